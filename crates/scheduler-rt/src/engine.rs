//! Engines: compile a subgraph once, run it many times.

use crate::config::ProcessorConfig;
use crate::engine_registry::EngineRegistry;
use crate::error::RuntimeError;
use std::sync::{Arc, Mutex};
use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::tract_linalg::multithread::Executor;

/// The exact tract release this build links.
pub const TRACT_VERSION: &str = predictor::profiler::TRACT_VERSION;

/// A tensor flowing between subgraphs (shared, cheap to clone).
pub type Value = TValue;

/// Compiles ONNX subgraphs for one processor.
pub trait Engine: Send + Sync {
    /// Short name (`tract`, `onnxruntime`).
    fn name(&self) -> &'static str;
    /// The engine's release.
    fn version(&self) -> &'static str;
    /// Threads one run of a compiled subgraph uses.
    fn threads(&self) -> usize;
    /// Compiles an ONNX model with static shapes; the error is the engine's reason.
    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Compiled>, String>;
    /// [`Engine::compile`] with `threads` intra-op threads instead of the
    /// engine's own; threads the engine starts for it inherit the calling
    /// thread's affinity. Engines without intra-op threads compile as usual.
    fn compile_threads(&self, onnx: &[u8], threads: usize) -> Result<Box<dyn Compiled>, String> {
        let _ = threads;
        self.compile(onnx)
    }
    /// The engine itself as [`Any`](std::any::Any), for the crate that
    /// defines an engine kind to reach what only that kind has (a remote
    /// engine's link model); `None` where there is nothing beyond this trait.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// Makes the engine of one processor from its configuration.
pub type EngineFactory = dyn Fn(&ProcessorConfig) -> Result<Box<dyn Engine>, RuntimeError> + Send + Sync;

/// The engine `config.engine` names among this crate's own
/// ([`EngineRegistry::builtin`]): tract, or onnxruntime when built with the
/// `ort` feature and the library loads.
pub fn make_engine(config: &ProcessorConfig) -> Result<Box<dyn Engine>, RuntimeError> {
    EngineRegistry::builtin().make(config)
}

/// A factory making each processor's engine with [`make_engine`].
pub fn default_factory() -> Arc<EngineFactory> {
    Arc::new(make_engine)
}

/// A compiled subgraph; may be run from several threads at once.
pub trait Compiled: Send + Sync {
    /// Runs once: inputs and outputs in the subgraph's declared orders.
    fn run(&self, inputs: TVec<Value>) -> Result<TVec<Value>, String>;
}

/// tract (sonos/tract): pure Rust, optimises the model at compile time.
/// With `threads > 1`, matrix products are split over a private pool whose
/// threads inherit the affinity of the thread that creates the engine.
pub struct TractEngine {
    threads: usize,
    executor: Option<Executor>,
}

impl TractEngine {
    /// An engine running each subgraph on `threads` (≥ 1) threads.
    pub fn new(threads: usize) -> TractEngine {
        let executor = (threads > 1).then(|| Executor::multithread_with_name(threads, "stretch-rt"));
        TractEngine {
            threads: threads.max(1),
            executor,
        }
    }
}

impl Engine for TractEngine {
    fn name(&self) -> &'static str {
        "tract"
    }

    fn version(&self) -> &'static str {
        TRACT_VERSION
    }

    fn threads(&self) -> usize {
        self.threads
    }

    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Compiled>, String> {
        tract_compile(onnx, self.executor.clone())
    }

    fn compile_threads(&self, onnx: &[u8], threads: usize) -> Result<Box<dyn Compiled>, String> {
        if threads == self.threads {
            return self.compile(onnx);
        }
        let executor = (threads > 1).then(|| Executor::multithread_with_name(threads, "stretch-rt-alone"));
        tract_compile(onnx, executor)
    }
}

/// An optimised tract plan of `onnx` whose matrix products use `executor`
/// (`None`: the calling thread alone).
fn tract_compile(onnx: &[u8], executor: Option<Executor>) -> Result<Box<dyn Compiled>, String> {
    let model = predictor::profiler::tract_model(onnx)
        .and_then(|m| m.into_optimized())
        .map_err(|e| format!("{e:#}"))?;
    let options = RunOptions {
        executor,
        ..RunOptions::default()
    };
    let plan = model
        .into_runnable_with_options(&options)
        .map_err(|e| format!("{e:#}"))?;
    Ok(Box::new(TractCompiled {
        plan,
        states: Mutex::new(Vec::new()),
    }))
}

/// A tract plan plus a pool of run states, so buffers are reused between runs.
struct TractCompiled {
    plan: Arc<TypedRunnableModel>,
    states: Mutex<Vec<TypedSimpleState>>,
}

impl Compiled for TractCompiled {
    fn run(&self, inputs: TVec<Value>) -> Result<TVec<Value>, String> {
        let pooled = self.states.lock().map_err(|_| "state pool poisoned".to_string())?.pop();
        let mut state = match pooled {
            Some(s) => s,
            None => self.plan.spawn().map_err(|e| format!("{e:#}"))?,
        };
        let out = state.run(inputs).map_err(|e| format!("{e:#}"))?;
        if let Ok(mut pool) = self.states.lock() {
            pool.push(state);
        }
        Ok(out)
    }
}
