//! The partitioned runtime against a whole-graph tract run of the same model.

use engine::{Compiled, Engine, EngineError, TractEngine, Value};
use graph_ir::Graph;
use scheduler_rt::testing::{INPUT, three_branch, two_branch, unannotated};
use scheduler_rt::{EngineFactory, ProcessorConfig, Runtime, RuntimeError};
use std::sync::Arc;
use tract_core::prelude::{IntoTValue, TVec, Tensor, tvec};

const TOLERANCE: f32 = 1e-4;

fn tract() -> Arc<EngineFactory> {
    scheduler_rt::default_factory()
}

fn data(v: &Value) -> Vec<f32> {
    v.to_plain_array_view::<f32>().unwrap().iter().copied().collect()
}

fn input(seed: u64) -> Value {
    Tensor::from_shape(&INPUT, &input_data(seed)).unwrap().into_tvalue()
}

fn input_data(seed: u64) -> Vec<f32> {
    scheduler_rt::npy::random_values(seed, INPUT.iter().product())
}

fn whole(g: &Graph) -> Box<dyn Compiled> {
    let bytes = graph_ir::onnx::export_bytes(g).unwrap();
    TractEngine::new(1).unwrap().compile(&bytes).unwrap()
}

fn assert_close(got: &Value, want: &Value) {
    assert_eq!(got.shape(), want.shape());
    let (g, w) = (data(got), data(want));
    let scale = w.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= TOLERANCE * scale,
            "element {i}: {a} vs {b} (scale {scale})"
        );
    }
}

fn check(g: &Graph, workers: usize) {
    let rt = Runtime::load(g, &ProcessorConfig::default_set(workers), tract()).unwrap();
    let reference = whole(g);
    for seed in 0..3 {
        let got = rt.run(vec![input(seed)]).unwrap();
        let want = reference.run(tvec![input(seed)]).unwrap();
        assert_close(&got[0], &want[0]);
    }
}

/// `clients` threads each run `requests` requests on `rt` at once and
/// check every output against a whole-graph run of `g`.
fn concurrent_clients(rt: &Arc<Runtime>, g: &Graph, clients: u64, requests: u64) {
    let reference: Arc<dyn Compiled> = Arc::from(whole(g));
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let (rt, reference) = (rt.clone(), reference.clone());
            std::thread::spawn(move || {
                for r in 0..requests {
                    let seed = 1000 * c + r;
                    let got = rt.run(vec![input(seed)]).unwrap();
                    let want = reference.run(tvec![input(seed)]).unwrap();
                    assert_close(&got[0], &want[0]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn one_two_and_three_workers_match_the_whole_graph() {
    let _workers = shared_workers();
    let one = unannotated(8, 1).unwrap();
    let rt = Runtime::load(&one, &ProcessorConfig::default_set(1), tract()).unwrap();
    assert_eq!(rt.partition().subgraphs.len(), 1);
    check(&one, 1);
    check(&two_branch(8, 1).unwrap(), 2);
    check(&three_branch(8).unwrap(), 3);
}

#[test]
fn eight_clients_get_their_own_results() {
    let _workers = shared_workers();
    let g = two_branch(8, 1).unwrap();
    let rt = Arc::new(Runtime::load(&g, &ProcessorConfig::default_set(2), tract()).unwrap());
    concurrent_clients(&rt, &g, 8, 50);
}

/// Fails (or panics) on the request whose first input element is `marker`.
struct Faulty {
    inner: Box<dyn Compiled>,
    marker: f32,
    panic: bool,
}

impl Compiled for Faulty {
    fn run(&self, inputs: TVec<Value>) -> Result<TVec<Value>, EngineError> {
        if inputs.iter().any(|v| {
            v.to_plain_array_view::<f32>()
                .ok()
                .and_then(|a| a.iter().next().copied())
                == Some(self.marker)
        }) {
            if self.panic {
                panic!("injected panic");
            }
            return Err(EngineError::Run {
                engine: "faulty",
                reason: "injected failure".into(),
            });
        }
        self.inner.run(inputs)
    }
}

struct FaultyEngine {
    inner: TractEngine,
    panic: bool,
}

impl Engine for FaultyEngine {
    fn name(&self) -> &'static str {
        "faulty"
    }
    fn version(&self) -> &'static str {
        "0"
    }
    fn threads(&self) -> usize {
        1
    }
    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Compiled>, EngineError> {
        Ok(Box::new(Faulty {
            inner: self.inner.compile(onnx)?,
            marker: 42.0,
            panic: self.panic,
        }))
    }
}

#[test]
fn a_failing_or_panicking_engine_fails_only_its_request() {
    let _workers = shared_workers();
    let g = two_branch(8, 1).unwrap();
    let reference = whole(&g);
    for panic in [false, true] {
        let factory: Arc<EngineFactory> = Arc::new(move |_| {
            Ok(Box::new(FaultyEngine {
                inner: TractEngine::new(1).unwrap(),
                panic,
            }) as Box<dyn Engine>)
        });
        let rt = Runtime::load(&g, &ProcessorConfig::default_set(2), factory).unwrap();
        for seed in 0..4 {
            let mut d = input_data(seed);
            if seed == 2 {
                d[0] = 42.0;
            }
            let x = Tensor::from_shape(&INPUT, &d).unwrap().into_tvalue();
            match rt.run(vec![x.clone()]) {
                Ok(out) => {
                    assert_ne!(seed, 2);
                    assert_close(&out[0], &reference.run(tvec![x]).unwrap()[0]);
                }
                Err(RuntimeError::Run {
                    subgraph,
                    processor,
                    reason,
                }) => {
                    assert_eq!(seed, 2);
                    assert_eq!((subgraph.as_str(), processor.as_str()), ("sg0@cpu0", "cpu0"));
                    assert!(reason.contains(if panic { "injected panic" } else { "injected failure" }));
                }
                Err(e) => panic!("unexpected error {e}"),
            }
        }
    }
}

#[test]
fn bad_inputs_and_configs_are_named() {
    let _workers = shared_workers();
    let g = two_branch(8, 1).unwrap();
    let e = Runtime::load(&g, &ProcessorConfig::default_set(1), tract())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("'cpu1'") && e.contains("configured: cpu0"), "{e}");
    let rt = Runtime::load(&g, &ProcessorConfig::default_set(2), tract()).unwrap();
    let wrong = Tensor::zero::<f32>(&[1, 3, 16, 16]).unwrap().into_tvalue();
    let e = rt.run(vec![wrong]).err().unwrap().to_string();
    assert!(
        e.contains("expected f32 [1, 3, 32, 32]") && e.contains("[1, 3, 16, 16]"),
        "{e}"
    );
    let wrong = Tensor::zero::<i64>(&INPUT).unwrap().into_tvalue();
    let e = rt.run(vec![wrong]).err().unwrap().to_string();
    assert!(e.contains("I64"), "{e}");
    let mut cfg = ProcessorConfig::default_set(2);
    cfg[1] = "cpu1=pool:core1000".parse().unwrap();
    let e = Runtime::load(&g, &cfg, tract()).err().unwrap().to_string();
    assert!(e.contains("cpu1") && e.contains("1000"), "{e}");
}

#[test]
fn disabling_a_processor_mid_run_loses_no_request() {
    let _workers = shared_workers();
    disabling_loses_no_request(scheduler_rt::WorkerKind::Pool);
}

#[test]
fn disabling_a_queue_processor_mid_run_loses_no_request() {
    let _workers = shared_workers();
    disabling_loses_no_request(scheduler_rt::WorkerKind::Queue);
}

fn disabling_loses_no_request(kind: scheduler_rt::WorkerKind) {
    let g = two_branch(8, 1).unwrap();
    let mut procs = ProcessorConfig::default_set(2);
    procs[1].kind = kind;
    let rt = Arc::new(Runtime::load(&g, &procs, tract()).unwrap());
    let subgraphs = rt.partition().subgraphs.len();
    let on_cpu1 = rt
        .partition()
        .subgraphs
        .iter()
        .filter(|s| s.processor == "cpu1")
        .count();
    assert_eq!(
        rt.compiled_copies(),
        subgraphs,
        "each subgraph compiled on its home only"
    );
    let reference: Arc<dyn Compiled> = Arc::from(whole(&g));
    rt.run(vec![input(0)]).unwrap();
    let branch_b = rt
        .partition()
        .subgraphs
        .iter()
        .position(|s| s.processor == "cpu1")
        .unwrap();
    assert!(rt.latency_ms(branch_b, "cpu1").is_some_and(|ms| ms > 0.0));
    assert_eq!(rt.latency_ms(branch_b, "cpu0"), None);
    rt.set_enabled("cpu1", false).unwrap();
    assert_eq!(
        rt.compiled_copies(),
        subgraphs + on_cpu1,
        "cpu1's subgraphs compiled on cpu0 when it goes"
    );
    let spans = rt.run_traced(vec![input(0)]).unwrap().1.spans;
    assert!(rt.latency_ms(branch_b, "cpu0").is_some_and(|ms| ms > 0.0));
    assert!(spans.iter().all(|s| s.processor == "cpu0"), "{spans:?}");
    rt.set_enabled("cpu1", true).unwrap();
    let spans = rt.run_traced(vec![input(0)]).unwrap().1.spans;
    assert!(spans.iter().any(|s| s.processor == "cpu1"), "{spans:?}");
    let toggler = {
        let rt = rt.clone();
        std::thread::spawn(move || {
            for k in 0..40 {
                rt.set_enabled("cpu1", k % 2 == 1).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            rt.set_enabled("cpu1", true).unwrap();
        })
    };
    let clients: Vec<_> = (0..4u64)
        .map(|c| {
            let (rt, reference) = (rt.clone(), reference.clone());
            std::thread::spawn(move || {
                for r in 0..20u64 {
                    let seed = 7000 + 100 * c + r;
                    let got = rt.run(vec![input(seed)]).unwrap();
                    assert_close(&got[0], &reference.run(tvec![input(seed)]).unwrap()[0]);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    toggler.join().unwrap();
    let e = rt.set_enabled("gpu", false).unwrap_err().to_string();
    assert!(e.contains("'gpu'") && e.contains("cpu0, cpu1"), "{e}");
}

#[cfg(feature = "ort")]
#[test]
fn onnxruntime_processors_match_the_whole_graph() {
    let _workers = shared_workers();
    let g = three_branch(8).unwrap();
    let procs: Vec<ProcessorConfig> = ["cpu0=inline,engine=ort", "cpu1=pool,engine=ort,threads=2", "cpu2=queue"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let rt = Runtime::load(&g, &procs, tract()).unwrap();
    let engines: Vec<&str> = rt.engines().iter().map(|(_, e, _)| *e).collect();
    assert_eq!(engines, ["ort", "ort", "tract"]);
    let reference = whole(&g);
    for seed in 0..3 {
        let got = rt.run(vec![input(seed)]).unwrap();
        assert_close(&got[0], &reference.run(tvec![input(seed)]).unwrap()[0]);
    }
}

#[cfg(not(feature = "ort"))]
#[test]
fn onnxruntime_processors_need_the_feature() {
    let _workers = shared_workers();
    let procs: Vec<ProcessorConfig> = vec!["cpu0=inline,engine=ort".parse().unwrap()];
    let e = Runtime::load(&unannotated(8, 1).unwrap(), &procs, tract())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("`ort` feature"), "{e}");
}

/// `stem@cpu0 → a@gpu → b@gpu`, `c@cpu0` beside them reading the stem, and
/// `(b + c) + a` on cpu0: `a` and `b` are consecutive subgraphs of `gpu`.
fn gpu_chain() -> Graph {
    use graph_ir::builder::Builder;
    use graph_ir::keys;
    let mut b = Builder::new("chain");
    let x = b.input("x", &INPUT).unwrap();
    let stem = b.relu("stem", x).unwrap();
    let a = b.relu("a", stem).unwrap();
    let bb = b.relu("b", a).unwrap();
    let c = b.relu("c", stem).unwrap();
    let s1 = b.add("s1", bb, c).unwrap();
    let y = b.add("s2", s1, a).unwrap();
    let mut g = b.finish("y", y).unwrap();
    for id in g.node_ids() {
        let p = if ["a", "b"].contains(&g.node(id).name.as_str()) {
            "gpu"
        } else {
            "cpu0"
        };
        g.annotate(id, keys::PROCESSOR, p);
    }
    g
}

#[test]
fn a_queue_worker_runs_chained_subgraphs_without_waiting_for_the_scheduler() {
    let _workers = shared_workers();
    use scheduler_rt::testing::slowed_factory;
    use std::sync::atomic::AtomicU64;
    let g = gpu_chain();
    let delays = vec![
        ("cpu0".to_string(), Arc::new(AtomicU64::new(60_000))),
        ("gpu".to_string(), Arc::new(AtomicU64::new(5_000))),
    ];
    let procs: Vec<ProcessorConfig> = ["cpu0=inline", "gpu=queue"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let rt = Runtime::load(&g, &procs, slowed_factory(delays)).unwrap();
    let names: Vec<&str> = rt.partition().subgraphs.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names
            .windows(2)
            .any(|w| w[0].ends_with("@gpu") && w[1].ends_with("@gpu")),
        "{names:?}"
    );
    let reference = whole(&g);
    let (out, trace) = rt.run_traced(vec![input(1)]).unwrap();
    let spans = trace.spans;
    assert_close(&out[0], &reference.run(tvec![input(1)]).unwrap()[0]);
    let gpu: Vec<_> = spans.iter().filter(|s| s.processor == "gpu").collect();
    let inline_c = spans
        .iter()
        .filter(|s| s.processor == "cpu0")
        .find(|s| s.start_s >= gpu[0].start_s - 1e-3)
        .expect("c runs beside the gpu chain");
    assert_eq!(gpu.len(), 2, "{spans:?}");
    let gap = gpu[1].start_s - gpu[0].end_s;
    assert!(
        gap < 0.02 && gpu[1].end_s < inline_c.end_s,
        "the second gpu subgraph waited for the scheduler: {spans:?}"
    );
    let pooled: Vec<ProcessorConfig> = ["cpu0=inline", "gpu=pool"].iter().map(|s| s.parse().unwrap()).collect();
    let rt = Runtime::load(&g, &pooled, scheduler_rt::default_factory()).unwrap();
    assert_close(
        &rt.run(vec![input(2)]).unwrap()[0],
        &reference.run(tvec![input(2)]).unwrap()[0],
    );
}

/// Compiles with tract and records, per compile, the threads asked for and
/// the cores the compiling thread may use.
struct Recording {
    inner: TractEngine,
    calls: Arc<std::sync::Mutex<Vec<(usize, usize)>>>,
}

impl Engine for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }
    fn version(&self) -> &'static str {
        "0"
    }
    fn threads(&self) -> usize {
        1
    }
    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Compiled>, EngineError> {
        self.compile_threads(onnx, 1)
    }
    fn compile_threads(&self, onnx: &[u8], threads: usize) -> Result<Box<dyn Compiled>, EngineError> {
        let cores = engine::host::available().unwrap().len();
        self.calls.lock().unwrap().push((threads, cores));
        self.inner.compile_threads(onnx, threads)
    }
}

#[test]
fn subgraphs_nothing_runs_beside_get_their_alone_threads_on_every_core() {
    let _workers = shared_workers();
    let g = two_branch(8, 1).unwrap();
    let reference = whole(&g);
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = calls.clone();
    let factory: Arc<EngineFactory> = Arc::new(move |_| {
        Ok(Box::new(Recording {
            inner: TractEngine::new(1).unwrap(),
            calls: seen.clone(),
        }) as Box<dyn Engine>)
    });
    let two_cores = engine::host::allowed_cores().unwrap().len() >= 2;
    let procs: Vec<ProcessorConfig> = if two_cores {
        ["cpu0=inline:core0,alone_threads=2", "cpu1=pool:core1,alone_threads=2"]
    } else {
        ["cpu0=inline,alone_threads=2", "cpu1=pool,alone_threads=2"]
    }
    .iter()
    .map(|s| s.parse().unwrap())
    .collect();
    let rt = Runtime::load(&g, &procs, factory).unwrap();
    let mut calls = calls.lock().unwrap().clone();
    calls.sort();
    assert_eq!(calls.iter().map(|c| c.0).collect::<Vec<_>>(), [1, 1, 2, 2], "{calls:?}");
    if two_cores {
        assert!(calls.iter().filter(|c| c.0 == 2).all(|c| c.1 >= 2), "{calls:?}");
    }
    let x = input(5);
    assert_close(
        &rt.run(vec![x.clone()]).unwrap()[0],
        &reference.run(tvec![x]).unwrap()[0],
    );
}

/// Tests that start runtimes hold this lock shared; the test that counts
/// what idle workers named `stretch-cpu1` do holds it alone, so that the
/// busy workers of tests running beside it are not counted with its own.
static WORKER_THREADS: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared_workers() -> std::sync::RwLockReadGuard<'static, ()> {
    WORKER_THREADS.read().unwrap_or_else(|e| e.into_inner())
}

/// Activity of this process's threads named `name`: CPU clock ticks (user
/// and system) plus context switches (voluntary and not), summed. A thread
/// blocked on a channel adds nothing; one polling adds ticks on an idle
/// machine and switches on a busy one (each yield that lets another run).
fn thread_activity(name: &str) -> Option<u64> {
    let mut total = None;
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        let status = std::fs::read_to_string(t.path().join("status")).ok()?;
        let switches: u64 = status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        *total.get_or_insert(0) += ticks + switches;
    }
    total
}

#[test]
fn polling_processors_match_the_whole_graph_and_block_between_requests() {
    let _alone = WORKER_THREADS.write().unwrap_or_else(|e| e.into_inner());
    let g = two_branch(8, 1).unwrap();
    let procs: Vec<ProcessorConfig> = ["cpu0=inline,wait=poll", "cpu1=pool,wait=poll"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let rt = Arc::new(Runtime::load(&g, &procs, tract()).unwrap());
    concurrent_clients(&rt, &g, 4, 30);
    assert_eq!(rt.requests_in_flight(), 0);
    let factory: Arc<EngineFactory> = Arc::new(|_| {
        Ok(Box::new(FaultyEngine {
            inner: TractEngine::new(1).unwrap(),
            panic: false,
        }) as Box<dyn Engine>)
    });
    let faulty = Runtime::load(&g, &procs, factory).unwrap();
    let mut d = input_data(5);
    d[0] = 42.0;
    let x = Tensor::from_shape(&INPUT, &d).unwrap().into_tvalue();
    assert!(matches!(faulty.run(vec![x]), Err(RuntimeError::Run { .. })));
    assert_eq!(faulty.requests_in_flight(), 0, "a failed request stayed counted");
    let Some(before) = thread_activity("stretch-cpu1") else {
        return;
    };
    std::thread::sleep(std::time::Duration::from_millis(400));
    let after = thread_activity("stretch-cpu1").unwrap();
    assert!(
        after - before <= 4,
        "the idle pool workers ran {} times (clock ticks + context switches) in 400 ms: they kept polling between requests",
        after - before
    );
}
