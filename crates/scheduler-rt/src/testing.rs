//! Annotated branched models built in code, for tests and benchmarks.
//!
//! Layout: a stem on `cpu0`, then branches reading the stem's output (one per
//! processor), concatenated along channels at a meeting point on `cpu0`, then
//! a head (conv-bn and a classifier) on `cpu0`. Weights are random (seed 7).

use graph_ir::builder::{Builder, ConvSpec};
use graph_ir::ops::Concat;
use graph_ir::{Graph, GraphError, Op, keys};

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
