//! tract (sonos/tract): pure Rust, optimises the model at compile time.

use crate::engine::{Compiled, Engine, values};
use crate::error::EngineError;
use crate::tract_plan::{TRACT_VERSION, TractCompiled, executor, run_error};
use std::sync::Arc;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::tract_linalg::multithread::Executor;

const TRACT: &str = "tract";

/// The tract model of ONNX `onnx`: float16 values are computed as on a
/// phone's GPU in fp16 mode, float32 rounded to float16 after each
/// operator ([`graph_ir::onnx::fp16_rounded`], as every host engine loads
/// them); tract fuses no QDQ pattern, so a quantized file is then
/// rewritten into what onnxruntime computes for it
/// ([`graph_ir::onnx::fuse_qdq`]: convolutions as integer `QLinearConv`,
/// additions and quantizations in onnxruntime's arithmetic); other files
/// load unchanged ([`graph_ir::onnx::tract_form`]).
pub fn tract_model(onnx: &[u8]) -> TractResult<InferenceModel> {
    let form = graph_ir::onnx::tract_form(onnx);
    tract_onnx::onnx().model_for_read(&mut form.as_deref().unwrap_or(onnx))
}

/// The tract engine. With `threads > 1`, matrix products are split over a
/// private pool of that many threads, created with the engine, whose
/// threads inherit the affinity of the thread that creates it (pin first);
/// tract keeps small products on the calling thread.
#[derive(Debug)]
pub struct TractEngine {
    threads: usize,
    executor: Option<Executor>,
}

impl TractEngine {
    /// An engine running each model on `threads` threads; 0 is refused.
    pub fn new(threads: usize) -> Result<TractEngine, EngineError> {
        if threads == 0 {
            return Err(EngineError::ZeroThreads { engine: TRACT });
        }
        Ok(TractEngine {
            threads,
            executor: executor(threads, "stretch-tract"),
        })
    }

    /// An optimised plan of `onnx` whose matrix products use `executor`.
    fn plan(onnx: &[u8], executor: Option<Executor>) -> Result<Arc<TypedRunnableModel>, EngineError> {
        let model = tract_model(onnx).and_then(|m| m.into_optimized()).map_err(load)?;
        let options = RunOptions {
            executor,
            ..RunOptions::default()
        };
        model.into_runnable_with_options(&options).map_err(load)
    }

    /// Compiles a model whose runs time every node of tract's optimised
    /// plan ([`NodeTimed::run_timed`]).
    pub fn compile_node_timed(&self, onnx: &[u8]) -> Result<NodeTimed, EngineError> {
        let plan = Self::plan(onnx, self.executor.clone())?;
        let nodes = plan
            .model()
            .nodes()
            .iter()
            .map(|n| PlanNode {
                name: n.name.clone(),
                op: n.op().name().to_string(),
                inputs: n.inputs.iter().map(|o| o.node).collect(),
            })
            .collect();
        let n_inputs = plan.model().inputs.len();
        let state = plan.spawn().map_err(load)?;
        Ok(NodeTimed {
            state,
            n_inputs,
            inputs: TVec::new(),
            nodes,
        })
    }
}

fn load(e: TractError) -> EngineError {
    EngineError::Load {
        engine: TRACT,
        reason: format!("{e:#}"),
    }
}

impl Engine for TractEngine {
    fn name(&self) -> &'static str {
        TRACT
    }

    fn version(&self) -> &'static str {
        TRACT_VERSION
    }

    fn threads(&self) -> usize {
        self.threads
    }

    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Compiled>, EngineError> {
        Ok(Box::new(TractCompiled::new(
            TRACT,
            Self::plan(onnx, self.executor.clone())?,
        )))
    }

    fn compile_threads(&self, onnx: &[u8], threads: usize) -> Result<Box<dyn Compiled>, EngineError> {
        if threads == self.threads {
            return self.compile(onnx);
        }
        let plan = Self::plan(onnx, executor(threads, "stretch-tract-alone"))?;
        Ok(Box::new(TractCompiled::new(TRACT, plan)))
    }
}

/// One node of tract's optimised plan.
#[derive(Clone, Debug)]
pub struct PlanNode {
    /// tract names the nodes it derives from an ONNX node after that node
    /// (`conv1`, `conv1.pack`, ...); a matrix product that absorbed the ops
    /// after it (bias, residual add, activation) takes the last one's name.
    pub name: String,
    /// tract's name for the node's operator (`OptMatMul`, `Add`, ...).
    pub op: String,
    /// The plan nodes whose outputs it reads, by index.
    pub inputs: Vec<usize>,
}

/// A compiled tract model whose runs report the time of each node of the
/// optimised plan.
pub struct NodeTimed {
    state: TypedSimpleState,
    n_inputs: usize,
    inputs: TVec<TValue>,
    nodes: Vec<PlanNode>,
}

impl NodeTimed {
    /// The plan's nodes, indexed like [`NodeTimed::run_timed`]'s figures.
    pub fn plan_nodes(&self) -> &[PlanNode] {
        &self.nodes
    }

    /// Binds the model's inputs, in graph-input order; must be called
    /// before [`NodeTimed::run_timed`].
    pub fn set_inputs(&mut self, inputs: &[graph_ir::Tensor]) -> Result<(), EngineError> {
        if inputs.len() != self.n_inputs {
            return Err(EngineError::Input {
                engine: TRACT,
                index: inputs.len().min(self.n_inputs),
                reason: format!("the model has {} inputs, {} given", self.n_inputs, inputs.len()),
            });
        }
        self.inputs = values(TRACT, inputs)?;
        Ok(())
    }

    /// Runs the model once; per plan node, the milliseconds its evaluation
    /// took (0 for nodes the plan does not run).
    pub fn run_timed(&mut self) -> Result<Vec<f64>, EngineError> {
        if self.inputs.len() != self.n_inputs {
            return Err(EngineError::Run {
                engine: TRACT,
                reason: "inputs were not bound before the run".into(),
            });
        }
        let mut times = vec![0.0; self.nodes.len()];
        self.state
            .run_plan_with_eval(self.inputs.clone(), |session, op_state, node, input| {
                let start = std::time::Instant::now();
                let out = tract_onnx::tract_core::plan::eval(session, op_state, node, input);
                times[node.id] += start.elapsed().as_secs_f64() * 1e3;
                out
            })
            .map(drop)
            .map_err(|e| run_error(TRACT, e))?;
        Ok(times)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tract_version_matches_the_lock_file() {
        let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock")).unwrap();
        let entry = format!("name = \"tract-onnx\"\nversion = \"{TRACT_VERSION}\"");
        assert!(
            lock.contains(&entry),
            "update TRACT_VERSION to the tract-onnx version in Cargo.lock"
        );
    }

    #[test]
    fn zero_threads_are_refused() {
        let e = TractEngine::new(0).unwrap_err().to_string();
        assert_eq!(e, "tract: --threads must be at least 1");
    }
}
