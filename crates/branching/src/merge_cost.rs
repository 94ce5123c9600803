//! What a `concat` merge costs the layers after it. Branch outputs are
//! concatenated as they are, so the layers reading the merge (through
//! channel-preserving ops up to the first convolution or fully connected
//! layer, the layers [`crate::rewrite`] widens) read another number of
//! channels than in the original model.

use crate::error::BranchError;
use graph_ir::ops::{Gemm, Op};
use graph_ir::{Fact, Graph, NodeId, Outlet, Tensor};
use predictor::LatencyModel;
use std::collections::{HashMap, HashSet};

/// The change in cost of the layers reading a value whose width changes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Widening {
    /// Predicted milliseconds the readers gain (negative: they save).
    pub ms: f64,
    /// MACs the readers gain (negative: they save).
    pub macs: i64,
}

/// The layers of `g` that read `value` (a stage boundary) and change with
/// its width, in topological order; with `width`, a graph of them reading a
/// value of `width` channels, its weights resized as [`crate::rewrite`]
/// resizes them. Errors name a reader that cannot take another width, as
/// the rewrite would (stage `stage` in messages).
fn readers(g: &Graph, value: Outlet, width: usize, stage: usize) -> Result<(Vec<NodeId>, Graph), BranchError> {
    let unsupported = |id: NodeId, reason: &str| BranchError::Unsupported {
        stage,
        node: g.node(id).name.clone(),
        op: g.node(id).op.name(),
        reason: format!("{reason}; use --merge project"),
    };
    let wide = |shape: &[usize], axis: usize, to: usize| {
        let mut s = shape.to_vec();
        if let Some(d) = s.get_mut(axis) {
            *d = to;
        }
        Tensor::without_data(Fact::f32(s))
    };
    let shape_of = |o: Outlet| g.fact(o).map(|f| f.shape.clone()).unwrap_or_default();
    let mut m = Graph::new("readers");
    let x = m.add_input(
        "x",
        Fact::f32(
            shape_of(value)
                .iter()
                .enumerate()
                .map(|(i, d)| if i == 1 { width } else { *d })
                .collect::<Vec<_>>(),
        ),
    )?;
    let mut map: HashMap<Outlet, Outlet> = HashMap::from([(value, x)]);
    let (mut nodes, mut ends, mut seen) = (Vec::new(), Vec::new(), HashSet::new());
    let mut frontier = vec![value];
    while let Some(o) = frontier.pop() {
        for (id, _) in g.consumers(o) {
            if !seen.insert(id) {
                continue;
            }
            let node = g.node(id);
            let name = node.name.clone();
            let mut inputs = vec![map[&o]];
            let k_wide = m.fact(map[&o]).and_then(|f| f.shape.last().copied()).unwrap_or(width);
            let mut copy = |m: &mut Graph, slot: usize, t: Tensor| -> Result<(), BranchError> {
                inputs.push(m.add_const(format!("{name}.in{slot}"), t)?);
                Ok(())
            };
            let through = match &node.op {
                Op::Conv(c) => {
                    if c.group != 1 {
                        return Err(unsupported(id, "a grouped or depthwise conv reads the widened merge"));
                    }
                    copy(&mut m, 1, wide(&shape_of(node.inputs[1]), 1, width))?;
                    for slot in 2..node.inputs.len() {
                        copy(
                            &mut m,
                            slot,
                            Tensor::without_data(Fact::f32(shape_of(node.inputs[slot]))),
                        )?;
                    }
                    false
                }
                Op::Gemm(Gemm { trans_b, .. }) => {
                    copy(
                        &mut m,
                        1,
                        wide(&shape_of(node.inputs[1]), if *trans_b { 1 } else { 0 }, k_wide),
                    )?;
                    for slot in 2..node.inputs.len() {
                        copy(
                            &mut m,
                            slot,
                            Tensor::without_data(Fact::f32(shape_of(node.inputs[slot]))),
                        )?;
                    }
                    false
                }
                Op::BatchNorm(_) => {
                    for slot in 1..node.inputs.len() {
                        copy(&mut m, slot, Tensor::without_data(Fact::f32(vec![width])))?;
                    }
                    true
                }
                Op::Unary(_) | Op::Pool(_) | Op::GlobalAveragePool(_) | Op::GlobalMaxPool(_) | Op::Flatten(_) => true,
                _ => return Err(unsupported(id, "this op cannot take a wider input")),
            };
            let new = m.add_node(name, node.op.clone(), &inputs)?;
            map.insert(id.out(0), new.out(0));
            nodes.push(id);
            if through && !g.consumers(id.out(0)).is_empty() {
                frontier.push(id.out(0));
            } else {
                ends.push((format!("y{}", ends.len()), new.out(0)));
            }
        }
    }
    m.set_outputs(ends)?;
    let order: HashMap<NodeId, usize> = g.topo_order()?.into_iter().enumerate().map(|(i, id)| (id, i)).collect();
    nodes.sort_by_key(|id| order.get(id).copied().unwrap_or(usize::MAX));
    Ok((nodes, m))
}

/// What reading `value` with `width` channels instead of its own costs the
/// layers of `g` after it, predicted on `processor`.
pub fn widening(
    g: &Graph,
    value: Outlet,
    width: usize,
    stage: usize,
    model: &dyn LatencyModel,
    processor: &str,
) -> Result<Widening, BranchError> {
    let (nodes, wide) = readers(g, value, width, stage)?;
    if nodes.is_empty() {
        return Ok(Widening::default());
    }
    let before = model.predict(g, &nodes, processor)?.total_ms;
    let after = model.predict_graph(&wide, processor)?.total_ms;
    Ok(Widening {
        ms: after - before,
        macs: wide.total_cost().macs as i64 - g.cost_of(&nodes).macs as i64,
    })
}
