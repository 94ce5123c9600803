//! The engine abstraction: an [`Engine`] compiles an ONNX model once into a
//! [`Compiled`] model that runs many times, from several threads at once.

use crate::error::EngineError;
use tract_core::prelude::{TValue, TVec};

/// A tensor crossing an engine's boundary (shared, cheap to clone).
pub type Value = TValue;

/// Compiles ONNX models for one processor (or one profiling run).
pub trait Engine: Send + Sync {
    /// The engine's registered name (`tract`, `ort`), written to reports
    /// and to the profiler's CSV `engine` column.
    fn name(&self) -> &'static str;
    /// The engine's release, for provenance.
    fn version(&self) -> &'static str;
    /// Threads one run of a compiled model uses.
    fn threads(&self) -> usize;
    /// Compiles an ONNX model (opset of [`graph_ir::onnx::EXPORT_OPSET`],
    /// static shapes).
    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Compiled>, EngineError>;
    /// [`Engine::compile`] with `threads` intra-op threads instead of the
    /// engine's own; threads the engine starts for it inherit the calling
    /// thread's affinity. Engines without intra-op threads compile as usual.
    fn compile_threads(&self, onnx: &[u8], threads: usize) -> Result<Box<dyn Compiled>, EngineError> {
        let _ = threads;
        self.compile(onnx)
    }
    /// The engine itself as [`Any`](std::any::Any), for the crate that
    /// defines an engine to reach what only that engine has (a remote
    /// engine's link model); `None` where there is nothing beyond this trait.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// A compiled model; may be run from several threads at once.
pub trait Compiled: Send + Sync {
    /// Runs once: inputs and outputs in the model's declared orders.
    fn run(&self, inputs: TVec<Value>) -> Result<TVec<Value>, EngineError>;
}

/// `inputs` as engine values (f32 only), for the engine named `engine`;
/// the first that is not f32 data is named by its index.
pub fn values(engine: &'static str, inputs: &[graph_ir::Tensor]) -> Result<TVec<Value>, EngineError> {
    use tract_core::prelude::IntoTValue;
    inputs
        .iter()
        .enumerate()
        .map(|(index, t)| {
            let bad = |reason: String| EngineError::Input { engine, index, reason };
            let data = t
                .to_f32_vec()
                .ok_or_else(|| bad(format!("{} is not f32 data", t.fact())))?;
            tract_core::prelude::Tensor::from_shape(t.shape(), &data)
                .map(|t| t.into_tvalue())
                .map_err(|e| bad(format!("{e:#}")))
        })
        .collect()
}
