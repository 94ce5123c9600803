//! Loading ONNX files for the timing examples.

use engine::{Compiled, Engine, Value};
use tract_core::prelude::*;

/// A compiled file with random inputs of the shapes the file declares.
pub struct Loaded {
    pub path: String,
    pub compiled: Box<dyn Compiled>,
    pub inputs: TVec<Value>,
}

impl Loaded {
    /// Runs the file once on its inputs.
    pub fn run(&self) -> Result<(), String> {
        self.compiled
            .run(self.inputs.clone())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// Compiles `path` on `engine`, with random inputs (seeded by position).
pub fn load(engine: &dyn Engine, path: &str) -> Result<Loaded, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let graph = graph_ir::onnx::import_file(path, &Default::default()).map_err(|e| format!("{path}: {e}"))?;
    let mut inputs: TVec<Value> = tvec![];
    for (i, node) in graph.inputs().iter().enumerate() {
        let shape = graph
            .fact(node.out(0))
            .map(|f| f.shape.clone())
            .ok_or(format!("{path}: input {i} without a shape"))?;
        let n = shape.iter().product();
        let t = Tensor::from_shape(&shape, &scheduler_rt::npy::random_values(3 + i as u64, n))
            .map_err(|e| e.to_string())?;
        inputs.push(t.into_tvalue());
    }
    Ok(Loaded {
        path: path.to_string(),
        compiled: engine.compile(&bytes).map_err(|e| format!("{path}: {e}"))?,
        inputs,
    })
}

/// The median and minimum of `ms`.
pub fn median_min(ms: &mut [f64]) -> (f64, f64) {
    let min = ms.iter().copied().fold(f64::INFINITY, f64::min);
    (graph_ir::stats::median_nan(ms), min)
}
