//! Annotated branched models built in code, for tests and benchmarks.
//!
//! Layout: a stem on `cpu0`, then branches reading the stem's output (one per
//! processor), concatenated along channels at a meeting point on `cpu0`, then
//! a head (conv-bn and a classifier) on `cpu0`. Weights are random (seed 7).
//! [`Slowed`] engines emulate a processor under outside load.

use crate::config::ProcessorConfig;
use crate::factory::EngineFactory;
use crate::support::OpSupport;
use engine::{Compiled, Engine, EngineError, EngineRegistry, Value};
use graph_ir::builder::{Builder, ConvSpec};
use graph_ir::ops::{Concat, UnaryOp};
use graph_ir::{Graph, GraphError, Op, keys};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tract_core::prelude::TVec;

/// Input shape of the models built here.
pub const INPUT: [usize; 4] = [1, 3, 32, 32];

/// Stem, one branch per processor in `branches` (each `blocks` ResNet basic
/// blocks of `width` channels), a meeting point and a head.
pub fn branched(width: usize, blocks: usize, branches: &[&str]) -> Result<Graph, GraphError> {
    build(width, blocks, branches, true, INPUT[2])
}

/// [`branched`] with a `side`x`side` input, for benchmarks.
pub fn branched_sized(width: usize, blocks: usize, branches: &[&str], side: usize) -> Result<Graph, GraphError> {
    build(width, blocks, branches, true, side)
}

/// The sequential counterpart of a two-branch [`branched_sized`] model: one
/// branch of `2 * blocks` blocks (the same blocks run one after the other),
/// unannotated.
pub fn sequential_sized(width: usize, blocks: usize, side: usize) -> Result<Graph, GraphError> {
    build(width, 2 * blocks, &["cpu0"], false, side)
}

fn build(width: usize, blocks: usize, branches: &[&str], annotate: bool, side: usize) -> Result<Graph, GraphError> {
    let mut b = Builder::new("branched");
    let x = b.input("x", &[1, 3, side, side])?;
    let stem = b.conv_bn("stem", x, ConvSpec::new(width, 3, 2), true)?;
    let mut ends = Vec::new();
    for (i, _) in branches.iter().enumerate() {
        let mut y = stem;
        for k in 0..blocks {
            y = b.basic_block(&format!("branch{i}.block{k}"), y, width, 1)?;
        }
        ends.push(y);
    }
    let merged = b.graph.add_node("merge", Op::Concat(Concat { axis: 1 }), &ends)?.out(0);
    let head = b.conv_bn("head.conv", merged, ConvSpec::new(width, 1, 1), true)?;
    let y = b.classifier("head.classifier", head, 10)?;
    let mut g = b.finish("logits", y)?;
    for id in g.node_ids().into_iter().filter(|_| annotate) {
        let name = g.node(id).name.clone();
        let processor = branches
            .iter()
            .enumerate()
            .find(|(i, _)| name.starts_with(&format!("branch{i}.")))
            .map_or("cpu0", |(_, p)| *p);
        g.annotate(id, keys::PROCESSOR, processor);
        if name == "merge" {
            g.annotate(id, keys::MEETING_POINT, "true");
        }
    }
    g.fill_missing_weights(7);
    Ok(g)
}

/// Two branches: `cpu0` and `cpu1`.
pub fn two_branch(width: usize, blocks: usize) -> Result<Graph, GraphError> {
    branched(width, blocks, &["cpu0", "cpu1"])
}

/// Three branches of one block each: `cpu0`, `cpu1` and `cpu2`.
pub fn three_branch(width: usize) -> Result<Graph, GraphError> {
    branched(width, 1, &["cpu0", "cpu1", "cpu2"])
}

/// The same layers as [`two_branch`] without any annotation (runs whole).
pub fn unannotated(width: usize, blocks: usize) -> Result<Graph, GraphError> {
    build(width, blocks, &["cpu0", "cpu1"], false, INPUT[2])
}

/// Wraps an engine so every run first sleeps for the delay currently in
/// `delay_us` (shared, so a test can slow a processor down and speed it up
/// again while the runtime serves requests).
pub struct Slowed {
    pub inner: Box<dyn Engine>,
    pub delay_us: Arc<AtomicU64>,
}

impl Engine for Slowed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn version(&self) -> &'static str {
        self.inner.version()
    }

    fn threads(&self) -> usize {
        self.inner.threads()
    }

    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Compiled>, EngineError> {
        Ok(Box::new(SlowedCompiled {
            inner: self.inner.compile(onnx)?,
            delay_us: self.delay_us.clone(),
        }))
    }
}

struct SlowedCompiled {
    inner: Box<dyn Compiled>,
    delay_us: Arc<AtomicU64>,
}

impl Compiled for SlowedCompiled {
    fn run(&self, inputs: TVec<Value>) -> Result<TVec<Value>, EngineError> {
        let us = self.delay_us.load(Ordering::Relaxed);
        if us > 0 {
            std::thread::sleep(Duration::from_micros(us));
        }
        self.inner.run(inputs)
    }
}

/// An engine factory making tract engines, each processor named in `delays`
/// wrapped in [`Slowed`] with that shared delay.
pub fn slowed_factory(delays: Vec<(String, Arc<AtomicU64>)>) -> Arc<EngineFactory> {
    Arc::new(move |config: &ProcessorConfig| {
        let inner = EngineRegistry::builtin().make(&config.engine_config())?;
        Ok(match delays.iter().find(|(p, _)| *p == config.name) {
            Some((_, d)) => Box::new(Slowed {
                inner,
                delay_us: d.clone(),
            }) as Box<dyn Engine>,
            None => inner,
        })
    })
}

/// A chain of unary operators named `op0`, `op1`, ... from a 1x2x2x2
/// input `x` to output `y`: the smallest model the multi-DNN policies cut
/// into units.
pub fn unary_chain(ops: &[UnaryOp]) -> Result<Graph, GraphError> {
    let mut b = Builder::new("chain");
    let mut y = b.input("x", &[1, 2, 2, 2])?;
    for (i, op) in ops.iter().enumerate() {
        y = b.unary(&format!("op{i}"), y, *op)?;
    }
    b.finish("y", y)
}

/// A processor that runs only the ONNX operator types `ops`.
pub fn support_only(ops: &[&str]) -> OpSupport {
    OpSupport::Only(ops.iter().map(|s| s.to_string()).collect())
}
