//! The runtime's engines as profiler engines, so that `stretch profile`
//! measures kernels the way `stretch run`, `bench` and `serve` run them.

use predictor::profiler::{Engine, EngineError, Runnable};
use scheduler_rt::{Compiled, ProcessorConfig, Value, WorkerKind};
use tract_onnx::prelude::TVec;

/// A runtime engine (`scheduler_rt::make_engine`) seen by the profiler:
/// each kernel compiles as the runtime compiles a subgraph, and each timed
/// run is a runtime run (outputs handed back as the runtime receives them).
pub struct RuntimeEngine {
    name: &'static str,
    inner: Box<dyn scheduler_rt::Engine>,
}

impl RuntimeEngine {
    /// The runtime's `engine` with `threads` intra-op threads; fails with
    /// the runtime's reason when this build or machine lacks it.
    pub fn new(engine: scheduler_rt::EngineKind, threads: usize) -> anyhow::Result<RuntimeEngine> {
        if threads == 0 {
            anyhow::bail!("--threads must be at least 1");
        }
        let mut config = ProcessorConfig::new("profile", WorkerKind::Inline);
        config.engine = engine;
        config.threads = threads;
        let inner = scheduler_rt::make_engine(&config)?;
        Ok(RuntimeEngine {
            name: inner.name(),
            inner,
        })
    }
}

impl Engine for RuntimeEngine {
    fn name(&self) -> &'static str {
        self.name
    }

    fn version(&self) -> &'static str {
        self.inner.version()
    }

    fn threads(&self) -> usize {
        self.inner.threads()
    }

    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Runnable>, EngineError> {
        let compiled = self.inner.compile(onnx).map_err(|reason| EngineError::Load {
            engine: self.name,
            reason,
        })?;
        Ok(Box::new(RuntimeRunnable {
            name: self.name,
            compiled,
            inputs: TVec::new(),
        }))
    }
}

struct RuntimeRunnable {
    name: &'static str,
    compiled: Box<dyn Compiled>,
    inputs: TVec<Value>,
}

impl Runnable for RuntimeRunnable {
    fn set_inputs(&mut self, inputs: &[graph_ir::Tensor]) -> Result<(), EngineError> {
        self.inputs = predictor::profiler::tract_values(self.name, inputs)?;
        Ok(())
    }

    fn run(&mut self) -> Result<(), EngineError> {
        self.compiled
            .run(self.inputs.clone())
            .map(drop)
            .map_err(|reason| EngineError::Run {
                engine: self.name,
                reason,
            })
    }
}
