//! An engine added in one file with one registry line: `Counting` (tract,
//! counting its compilations) is registered with [`EngineRegistry::with`]
//! and then named by the library paths of `stretch run` (a processor spec
//! and a runtime configuration parsed against the registry, the runtime's
//! engines made from it), `stretch profile` (the profiler's engine made
//! from it) and `stretch-run` (a bundle exported from a committed fixture,
//! configured and loaded with it). Without the registry line none of them
//! knows the name.

mod common;

use common::{arg, repo, scratch, stretch_ok};
use engine::host::CoreSet;
use engine::{Builds, Compiled, Engine, EngineEntry, EngineError, EngineRegistry, TractEngine};
use predictor::profiler::csv::Store;
use predictor::profiler::{KernelKind, Profiler, Settings};
use scheduler_rt::{ProcessorConfig, Runtime, RuntimeConfig};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Compilations by every `Counting` engine of this process.
static COMPILES: AtomicUsize = AtomicUsize::new(0);

/// tract, counting its compilations.
struct Counting(TractEngine);

impl Engine for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn version(&self) -> &'static str {
        engine::TRACT_VERSION
    }
    fn threads(&self) -> usize {
        self.0.threads()
    }
    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Compiled>, EngineError> {
        COMPILES.fetch_add(1, Ordering::SeqCst);
        self.0.compile(onnx)
    }
}

const COUNTING: EngineEntry = EngineEntry {
    name: "counting",
    aliases: &[],
    summary: "tract, counting its compilations (test)",
    builds: Builds::Named,
    make: |c| Ok(Box::new(Counting(TractEngine::new(c.threads)?))),
};

/// The registry every path below is given: the one registry line.
fn engines() -> EngineRegistry {
    EngineRegistry::builtin().with(COUNTING)
}

/// Compilations since `before`, failing the test when there were none.
fn compiled_since(before: usize, path: &str) -> usize {
    let now = COMPILES.load(Ordering::SeqCst);
    assert!(now > before, "{path}: the counting engine compiled nothing");
    now
}

const FIXTURE: &str = "fixtures/ops/add_residual_opset13.onnx";

#[test]
fn an_engine_added_in_one_file_runs_under_run_profile_and_stretch_run() {
    let dir = scratch("engine-plugin");
    let model = arg(&repo().join(FIXTURE));
    let g = graph_ir::onnx::import_file(&model, &Default::default()).expect("fixture");
    let inputs = engine::values("counting", &g.uniform_inputs(1)).expect("f32 inputs");
    let reference = TractEngine::new(1)
        .expect("tract")
        .compile(&std::fs::read(&model).expect("fixture"))
        .expect("compile")
        .run(inputs.iter().cloned().collect())
        .expect("run");

    // run: a processor spec and a runtime configuration name the engine.
    let mut before = COMPILES.load(Ordering::SeqCst);
    let spec = ProcessorConfig::parse("cpu0=inline,engine=counting", &engines()).expect("spec");
    let toml = "[[processor]]\nname = \"cpu0\"\nkind = \"inline\"\nengine = \"counting\"\n";
    let config = RuntimeConfig::parse_with(toml, "rt.toml", &engines()).expect("config");
    assert_eq!(config.processors, std::slice::from_ref(&spec));
    let rt = Runtime::load(&g, &[spec], scheduler_rt::factory(engines())).expect("load");
    let out = rt.run(inputs.to_vec()).expect("run");
    assert_eq!(out[0], reference[0]);
    assert!(
        rt.engines().iter().all(|(_, e, _)| *e == "counting"),
        "{:?}",
        rt.engines()
    );
    before = compiled_since(before, "run");

    // profile: the profiler measures kernels on the registry's engine.
    let profiling = engines().local("profile", "counting", 1).expect("engine");
    let csv = dir.join("kernels.csv");
    let (mut store, existing) = Store::open(&csv).expect("csv");
    let settings = Settings {
        kinds: vec![KernelKind::Act],
        samples: 1,
        rounds: 0,
        reps: 1,
        warmup: 0,
        ..Settings::quick()
    };
    let profiler = Profiler {
        engine: profiling.as_ref(),
        cores: CoreSet::new(vec![0]).expect("a core"),
        settings,
    };
    let summary = profiler.run(&mut store, existing, &mut |_| {}).expect("profile");
    assert!(summary.measured >= 1, "{summary:?}");
    let text = std::fs::read_to_string(&csv).expect("csv");
    assert!(text.lines().skip(1).all(|l| l.contains(",counting,")), "{text}");
    before = compiled_since(before, "profile");

    // stretch-run: a bundle of the fixture, configured and loaded with it.
    let out_dir = dir.join("bundle");
    let host = arg(&repo().join("configs/devices/host.toml"));
    stretch_ok(&["export", &model, "--device", &host, "--no-ort", "-o", &arg(&out_dir)]);
    let b = bundle::Bundle::open(&out_dir).expect("bundle");
    let configs = stretch_run::processors(&b.manifest, "counting", &[], &engines()).expect("processors");
    assert!(configs.iter().all(|c| c.engine == "counting"), "{configs:?}");
    let rt = stretch_run::load(&b, &configs, engines()).expect("load");
    let input = b.array(&b.manifest.reference.inputs[0]).expect("reference input");
    let x = tract_onnx::prelude::Tensor::from_shape(&input.shape, &input.data).expect("tensor");
    let out = rt.run(vec![x.into()]).expect("run");
    let want = b.array(&b.manifest.reference.outputs[0]).expect("reference output");
    let got = out[0].to_plain_array_view::<f32>().expect("f32");
    assert_eq!(got.iter().copied().collect::<Vec<_>>(), want.data);
    compiled_since(before, "stretch-run");

    // Without the registry line, the name is unknown, in today's words.
    let e = ProcessorConfig::parse("cpu0=inline,engine=counting", &EngineRegistry::builtin())
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("unknown engine 'counting' (tract, ort)"), "{e}");
}
