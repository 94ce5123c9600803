//! Inference engines the profiler measures kernels on.
//!
//! An [`Engine`] compiles an ONNX model once into a [`Runnable`]; the harness
//! binds inputs once and then times [`Runnable::run`] alone, so model loading
//! and input conversion never enter a measurement.

use super::error::EngineError;
use graph_ir::Tensor;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::tract_linalg::multithread::Executor;

/// The exact tract release this build links (checked against Cargo.lock in tests).
pub const TRACT_VERSION: &str = "0.23.9";

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

/// An inference engine that runs ONNX models on the CPU.
pub trait Engine {
    /// Short name written to the CSV `engine` column (`tract`).
    fn name(&self) -> &'static str;

    /// The engine's release, for provenance.
    fn version(&self) -> &'static str;

    /// Threads one model run uses.
    fn threads(&self) -> usize;

    /// Compiles an ONNX model (opset of [`graph_ir::onnx::EXPORT_OPSET`],
    /// static shapes) into something that can be run many times.
    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Runnable>, EngineError>;
}

/// A compiled model with bound inputs.
pub trait Runnable {
    /// Binds the model's inputs, in graph-input order. Must be called before [`Runnable::run`].
    fn set_inputs(&mut self, inputs: &[Tensor]) -> Result<(), EngineError>;

    /// Runs the model once on the bound inputs and discards its outputs.
    fn run(&mut self) -> Result<(), EngineError>;
}

/// tract (sonos/tract): pure Rust, optimises the model at load time.
///
/// With `threads > 1` matrix products are split over a private pool of that
/// many threads, created when the engine is; tract keeps small products on
/// the calling thread, as it does in production.
#[derive(Debug)]
pub struct TractEngine {
    threads: usize,
    executor: Option<Executor>,
}

const TRACT: &str = "tract";

impl TractEngine {
    /// An engine running each model on `threads` threads. The pool's threads
    /// inherit the CPU affinity of the calling thread, so pin first.
    pub fn new(threads: usize) -> Result<TractEngine, EngineError> {
        let executor = match threads {
            0 => return Err(EngineError::ZeroThreads { engine: TRACT }),
            1 => None,
            n => Some(Executor::multithread_with_name(n, "stretch-profile")),
        };
        Ok(TractEngine { threads, executor })
    }
}

/// `inputs` as tract values (f32 only), for an engine named `engine` that
/// takes them; the first that is not f32 data is named by its index.
pub fn tract_values(engine: &'static str, inputs: &[Tensor]) -> Result<TVec<TValue>, EngineError> {
    inputs
        .iter()
        .enumerate()
        .map(|(index, t)| {
            let bad = |reason: String| EngineError::Input { engine, index, reason };
            let values = t
                .to_f32_vec()
                .ok_or_else(|| bad(format!("{} is not f32 data", t.fact())))?;
            tract_onnx::prelude::Tensor::from_shape(t.shape(), &values)
                .map(|t| t.into_tvalue())
                .map_err(|e| bad(reason(e)))
        })
        .collect()
}

fn reason(e: impl std::fmt::Display) -> String {
    format!("{e:#}")
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

    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Runnable>, EngineError> {
        Ok(Box::new(self.runnable(onnx)?))
    }
}

impl TractEngine {
    fn runnable(&self, onnx: &[u8]) -> Result<TractRunnable, EngineError> {
        let load = |e: TractError| EngineError::Load {
            engine: TRACT,
            reason: reason(e),
        };
        let model = tract_model(onnx).and_then(|m| m.into_optimized()).map_err(load)?;
        let options = RunOptions {
            executor: self.executor.clone(),
            ..RunOptions::default()
        };
        let plan = model.into_runnable_with_options(&options).map_err(load)?;
        let state = plan.spawn().map_err(load)?;
        let n_inputs = plan.model().inputs.len();
        Ok(TractRunnable {
            state,
            n_inputs,
            inputs: TVec::new(),
        })
    }

    /// Compiles a model whose runs time every node of tract's optimised
    /// plan ([`NodeTimed::run_timed`]).
    pub fn compile_node_timed(&self, onnx: &[u8]) -> Result<NodeTimed, EngineError> {
        let inner = self.runnable(onnx)?;
        let nodes = inner
            .state
            .plan()
            .model()
            .nodes()
            .iter()
            .map(|n| PlanNode {
                name: n.name.clone(),
                op: n.op().name().to_string(),
                inputs: n.inputs.iter().map(|o| o.node).collect(),
            })
            .collect();
        Ok(NodeTimed { inner, nodes })
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
    inner: TractRunnable,
    nodes: Vec<PlanNode>,
}

impl NodeTimed {
    /// The plan's nodes, indexed like [`NodeTimed::run_timed`]'s figures.
    pub fn plan_nodes(&self) -> &[PlanNode] {
        &self.nodes
    }

    /// Binds the model's inputs, as [`Runnable::set_inputs`].
    pub fn set_inputs(&mut self, inputs: &[Tensor]) -> Result<(), EngineError> {
        self.inner.set_inputs(inputs)
    }

    /// Runs the model once; per plan node, the milliseconds its evaluation
    /// took (0 for nodes the plan does not run).
    pub fn run_timed(&mut self) -> Result<Vec<f64>, EngineError> {
        self.inner.bound()?;
        let mut times = vec![0.0; self.nodes.len()];
        self.inner
            .state
            .run_plan_with_eval(self.inner.inputs.clone(), |session, op_state, node, input| {
                let start = std::time::Instant::now();
                let out = tract_onnx::tract_core::plan::eval(session, op_state, node, input);
                times[node.id] += start.elapsed().as_secs_f64() * 1e3;
                out
            })
            .map(drop)
            .map_err(|e| EngineError::Run {
                engine: TRACT,
                reason: reason(e),
            })?;
        Ok(times)
    }
}

struct TractRunnable {
    state: TypedSimpleState,
    n_inputs: usize,
    inputs: TVec<TValue>,
}

impl TractRunnable {
    fn bound(&self) -> Result<(), EngineError> {
        if self.inputs.len() != self.n_inputs {
            return Err(EngineError::Run {
                engine: TRACT,
                reason: "inputs were not bound before the run".into(),
            });
        }
        Ok(())
    }
}

impl Runnable for TractRunnable {
    fn set_inputs(&mut self, inputs: &[Tensor]) -> Result<(), EngineError> {
        if inputs.len() != self.n_inputs {
            return Err(EngineError::Input {
                engine: TRACT,
                index: inputs.len().min(self.n_inputs),
                reason: format!("the model has {} inputs, {} given", self.n_inputs, inputs.len()),
            });
        }
        self.inputs = tract_values(TRACT, inputs)?;
        Ok(())
    }

    fn run(&mut self) -> Result<(), EngineError> {
        self.bound()?;
        self.state
            .run(self.inputs.clone())
            .map(drop)
            .map_err(|e| EngineError::Run {
                engine: TRACT,
                reason: reason(e),
            })
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
}
