//! The profiling harness end to end: resuming skips measured rows (also after
//! an interrupted write), rows of another setup are refused, adaptive rounds
//! add neighbours, and tract runs a kernel of every class.

use engine::host::CoreSet;
use engine::{Compiled, Engine, EngineError, TractEngine, Value};
use predictor::profiler::csv::{Row, Store};
use predictor::profiler::{Event, KernelKind, Origin, Profiler, Settings, Summary};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use tract_core::prelude::TVec;

/// Counts compiled models; runs do nothing.
struct Fake {
    compiled: AtomicUsize,
    threads: usize,
}

struct Noop;

impl Compiled for Noop {
    fn run(&self, _: TVec<Value>) -> Result<TVec<Value>, EngineError> {
        std::hint::black_box(());
        Ok(TVec::new())
    }
}

impl Engine for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn version(&self) -> &'static str {
        "0"
    }
    fn threads(&self) -> usize {
        self.threads
    }
    fn compile(&self, _: &[u8]) -> Result<Box<dyn Compiled>, EngineError> {
        self.compiled.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(Noop))
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stretch-profiler-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir.join("kernels.csv")
}

fn settings(rounds: u32) -> Settings {
    Settings {
        kinds: vec![KernelKind::ConvBnRelu, KernelKind::Act, KernelKind::Concat],
        samples: 6,
        rounds,
        reps: 2,
        warmup: 0,
        ..Settings::quick()
    }
}

fn profile(
    engine: &dyn Engine,
    path: &Path,
    settings: Settings,
) -> Result<Summary, predictor::profiler::ProfilerError> {
    let (mut store, existing) = Store::open(path)?;
    let p = Profiler {
        engine,
        cores: CoreSet::new(vec![0]).expect("a core"),
        settings,
    };
    p.run(&mut store, existing, &mut |_| {})
}

fn fake() -> Fake {
    Fake {
        compiled: AtomicUsize::new(0),
        threads: 1,
    }
}

fn rows(path: &Path) -> Vec<Row> {
    let (_, existing) = Store::open(path).expect("reopen");
    existing.rows.into_iter().map(|(_, r)| r).collect()
}

#[test]
fn rerun_measures_nothing_new() {
    let path = scratch("rerun");
    let engine = fake();
    let first = profile(&engine, &path, settings(1)).expect("first run");
    let n = first.measured;
    assert!(n >= 18, "{first:?}");
    assert_eq!(engine.compiled.load(Ordering::Relaxed), n);
    let before = std::fs::read_to_string(&path).expect("csv");

    let second = profile(&engine, &path, settings(1)).expect("second run");
    assert_eq!((second.measured, second.resumed), (0, n), "{second:?}");
    assert_eq!(engine.compiled.load(Ordering::Relaxed), n);
    assert_eq!(std::fs::read_to_string(&path).expect("csv"), before);
    assert_eq!(second.classes["act"].rows, first.classes["act"].rows);
}

#[test]
fn interrupted_run_resumes_without_losing_rows() {
    let whole = scratch("whole");
    profile(&fake(), &whole, settings(0)).expect("uninterrupted run");
    let text = std::fs::read_to_string(&whole).expect("csv");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 18);

    let cut = scratch("cut");
    let kept = lines[..8].join("\n");
    std::fs::write(&cut, format!("{kept}\n{}", &lines[8][..20])).expect("write");
    let engine = fake();
    let s = profile(&engine, &cut, settings(0)).expect("resumed run");
    assert_eq!((s.measured, s.resumed, s.torn_line), (11, 7, Some(9)), "{s:?}");
    let resumed = std::fs::read_to_string(&cut).expect("csv");
    assert!(resumed.starts_with(&format!("{kept}\n")));
    let keys = |p: &Path| {
        let mut k: Vec<String> = rows(p).iter().map(Row::key).collect();
        k.sort();
        k
    };
    assert_eq!(keys(&cut), keys(&whole));
}

#[test]
fn rows_of_another_setup_are_refused() {
    let path = scratch("mismatch");
    profile(
        &fake(),
        &path,
        Settings {
            samples: 1,
            ..settings(0)
        },
    )
    .expect("first run");
    let two = Fake {
        compiled: AtomicUsize::new(0),
        threads: 2,
    };
    let e = profile(&two, &path, settings(0))
        .expect_err("threads differ")
        .to_string();
    assert!(e.contains("kernels.csv:2: row was measured with threads `1`"), "{e}");
    assert_eq!(two.compiled.load(Ordering::Relaxed), 0);
}

#[test]
fn adaptive_rounds_add_neighbours_of_badly_predicted_rows() {
    let path = scratch("adaptive");
    let s = profile(
        &fake(),
        &path,
        Settings {
            rounds: 2,
            ..settings(0)
        },
    )
    .expect("run");
    let all = rows(&path);
    let adaptive: Vec<&Row> = all.iter().filter(|r| r.origin == Origin::Adaptive).collect();
    assert!(!adaptive.is_empty(), "{s:?}");
    assert!(adaptive.iter().all(|r| r.round >= 1));
    assert_eq!(s.adaptive.len(), 2 * 3);
    for r in s.adaptive.iter().filter(|r| r.round == 1) {
        assert_eq!(r.fitted_rows, 6, "{r:?}");
        assert!(r.added <= 6 && r.within_threshold + r.badly_predicted == 6, "{r:?}");
    }
    assert_eq!(adaptive.len(), s.adaptive.iter().map(|r| r.added).sum::<usize>());
}

#[test]
fn tract_runs_a_kernel_of_every_class() {
    let path = scratch("tract");
    let engine = TractEngine::new(1).expect("tract");
    let mut measured = Vec::new();
    let settings = Settings {
        kinds: KernelKind::ALL.to_vec(),
        samples: 1,
        rounds: 0,
        reps: 2,
        warmup: 1,
        ..Settings::quick()
    };
    let p = Profiler {
        engine: &engine,
        cores: CoreSet::new(vec![0]).expect("a core"),
        settings,
    };
    let (mut store, existing) = Store::open(&path).expect("open");
    p.run(&mut store, existing, &mut |e| {
        if let Event::Measured { row, .. } = e {
            measured.push(row.clone());
        }
    })
    .expect("profile");
    assert_eq!(measured.len(), KernelKind::ALL.len());
    for r in &measured {
        assert!(
            r.median_ms > 0.0 && r.p10_ms <= r.median_ms && r.median_ms <= r.p90_ms,
            "{r:?}"
        );
        assert_eq!((r.engine.as_str(), r.threads), ("tract", 1));
    }
}

#[test]
fn tract_runs_on_two_threads() {
    let engine = TractEngine::new(2).expect("tract");
    let c = predictor::profiler::KernelConfig {
        kind: KernelKind::ConvBnRelu,
        h: 14,
        cin: 32,
        cout: 64,
        k: 3,
        s: 1,
        parts: vec![],
    };
    let kg = predictor::profiler::kernel_graph::KernelGraph::build(&c).expect("build");
    let r =
        predictor::profiler::timing::Bound::new(&engine, &kg.onnx(1).expect("onnx"), &kg.inputs(1)).expect("compile");
    r.run().expect("run");
    let mut timed = engine.compile_node_timed(&kg.onnx(1).expect("onnx")).expect("compile");
    let e = timed.set_inputs(&[]).expect_err("wrong input count").to_string();
    assert!(e.contains("the model has 1 inputs, 0 given"), "{e}");
    assert!(TractEngine::new(0).is_err());
}
