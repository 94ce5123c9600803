//! Replacing a model's classifier with a fresh one for another class count.

use graph_ir::ops::Op;
use graph_ir::rng::SplitMix64;
use graph_ir::{Graph, Tensor};

use crate::error::TrainError;

/// Gives the final fully connected layer (a `Gemm` with constant weights,
/// possibly followed by shape-only ops) `classes` outputs, with fresh weights
/// drawn uniform in ±1/sqrt(fan_in) (PyTorch's Linear default) from `seed`.
/// Returns the name of the replaced layer.
pub fn replace_head(graph: &mut Graph, classes: usize, seed: u64) -> Result<String, TrainError> {
    let not_found = |why: &str| {
        TrainError::Model(format!(
            "--replace-head needs the output to come from a Gemm (fully connected) layer with constant weights: {why}"
        ))
    };
    let (_, mut o) = graph.outputs().first().cloned().ok_or_else(|| not_found("no output"))?;
    let gemm = loop {
        let node = graph.node(o.node);
        match &node.op {
            Op::Gemm(_) => break o.node,
            Op::Reshape(_) | Op::Flatten(_) | Op::Unary(_) => o = node.inputs[0],
            other => return Err(not_found(&format!("found {} '{}'", other.name(), node.name))),
        }
    };
    let node = graph.node(gemm).clone();
    let Op::Gemm(g) = &node.op else {
        unreachable!("matched above")
    };
    let b = node.inputs[1];
    let b_shape = match &graph.node(b.node).op {
        Op::Const(t) => t.shape().to_vec(),
        _ => return Err(not_found(&format!("'{}' has computed weights", node.name))),
    };
    let k = if g.trans_b { b_shape[1] } else { b_shape[0] };
    let bound = 1.0 / (k as f32).sqrt();
    let mut rng = SplitMix64::new(seed ^ 0x4865_6164);
    let mut draw = |n: usize| {
        (0..n)
            .map(|_| (2.0 * rng.next_f32() - 1.0) * bound)
            .collect::<Vec<f32>>()
    };
    let shape = if g.trans_b { vec![classes, k] } else { vec![k, classes] };
    let weights = Tensor::from_f32(shape, &draw(classes * k));
    graph.replace_op(b.node, Op::Const(weights))?;
    if let Some(c) = node.inputs.get(2) {
        if !matches!(graph.node(c.node).op, Op::Const(_)) {
            return Err(not_found(&format!("'{}' has a computed bias", node.name)));
        }
        graph.replace_op(c.node, Op::Const(Tensor::from_f32(vec![classes], &draw(classes))))?;
    }
    let order = graph.topo_order()?;
    let from = order.iter().position(|&id| id == gemm).expect("in graph");
    for &id in &order[from..] {
        let op = graph.node(id).op.clone();
        graph.replace_op(id, op)?;
    }
    graph.check()?;
    Ok(node.name)
}
