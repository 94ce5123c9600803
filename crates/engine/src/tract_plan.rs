//! A tract plan as a compiled model, and what every tract-based engine
//! shares (tract-core only: the ONNX engine is [`crate::tract`], the LiteRT
//! one [`crate::tflite`]).

use crate::engine::{Compiled, Value};
use crate::error::EngineError;
use std::sync::{Arc, Mutex};
use tract_core::internal::tract_linalg::multithread::Executor;
use tract_core::prelude::*;

/// The exact tract release this build links (checked against Cargo.lock in tests).
pub const TRACT_VERSION: &str = "0.23.9";

/// A pool of `threads` threads named `name`; `None` (the calling thread
/// alone) for one thread.
pub(crate) fn executor(threads: usize, name: &str) -> Option<Executor> {
    (threads > 1).then(|| Executor::multithread_with_name(threads, name))
}

/// `e` as engine `engine`'s run error.
pub(crate) fn run_error(engine: &'static str, e: TractError) -> EngineError {
    EngineError::Run {
        engine,
        reason: format!("{e:#}"),
    }
}

/// A tract plan plus a pool of run states, so buffers are reused between runs.
pub(crate) struct TractCompiled {
    /// The engine's name, for errors.
    engine: &'static str,
    plan: Arc<TypedRunnableModel>,
    states: Mutex<Vec<TypedSimpleState>>,
}

impl TractCompiled {
    /// `plan` of engine `engine`, with no run state yet.
    pub(crate) fn new(engine: &'static str, plan: Arc<TypedRunnableModel>) -> TractCompiled {
        TractCompiled {
            engine,
            plan,
            states: Mutex::new(Vec::new()),
        }
    }
}

impl Compiled for TractCompiled {
    fn run(&self, inputs: TVec<Value>) -> Result<TVec<Value>, EngineError> {
        let poisoned = || EngineError::Run {
            engine: self.engine,
            reason: "state pool poisoned".into(),
        };
        let pooled = self.states.lock().map_err(|_| poisoned())?.pop();
        let mut state = match pooled {
            Some(s) => s,
            None => self.plan.spawn().map_err(|e| run_error(self.engine, e))?,
        };
        let out = state.run(inputs).map_err(|e| run_error(self.engine, e))?;
        if let Ok(mut pool) = self.states.lock() {
            pool.push(state);
        }
        Ok(out)
    }
}
