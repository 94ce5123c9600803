//! The runtime's engines: each processor's engine is made from an
//! [`EngineRegistry`] by the processor's configuration.

use crate::config::ProcessorConfig;
use crate::error::RuntimeError;
use engine::{Engine, EngineRegistry};
use std::sync::Arc;

/// Makes the engine of one processor from its configuration.
pub type EngineFactory = dyn Fn(&ProcessorConfig) -> Result<Box<dyn Engine>, RuntimeError> + Send + Sync;

/// A factory making each processor's engine from `engines`.
pub fn factory(engines: EngineRegistry) -> Arc<EngineFactory> {
    Arc::new(move |c: &ProcessorConfig| Ok(engines.make(&c.engine_config())?))
}

/// A factory making each processor's engine from the built-in engines
/// ([`EngineRegistry::builtin`]): tract, or onnxruntime when built with
/// the `ort` feature and the library loads.
pub fn default_factory() -> Arc<EngineFactory> {
    factory(EngineRegistry::builtin())
}
