//! Fresh weights for training from scratch.

use std::collections::HashSet;

use graph_ir::Graph;
use graph_ir::ops::{BinaryOp, Op};
use graph_ir::rng::SplitMix64;

use crate::error::TrainError;
use crate::lower::{Program, Role, elementwise_parameter};

/// A fresh PRelu slope (PyTorch's default).
const PRELU_SLOPE: f32 = 0.25;

/// Re-draws every parameter of `graph` as a freshly initialised network:
/// conv and linear weights He-uniform (±sqrt(6/fan_in)), their biases 0,
/// BatchNorm and InstanceNormalization scale 1, shift 0, running mean 0 and
/// variance 1, elementwise biases (Add, Sub) 0 and scales (Mul) 1, PRelu
/// slopes 0.25. Constants that are not parameters are kept. Deterministic
/// in `seed` and parameter names.
pub fn reinitialise(graph: &mut Graph, program: &Program, seed: u64) -> Result<(), TrainError> {
    let mut ones = HashSet::new();
    let mut zeros = HashSet::new();
    let mut slopes = HashSet::new();
    for id in graph.node_ids() {
        let node = graph.node(id);
        match &node.op {
            Op::BatchNorm(_) | Op::InstanceNorm(_) => {
                ones.insert(node.inputs[1].node);
            }
            Op::Binary(b) if b.op == BinaryOp::PRelu => {
                slopes.insert(node.inputs[1].node);
            }
            Op::Binary(b) => {
                for (slot, o) in node.inputs.iter().enumerate() {
                    if elementwise_parameter(graph, id, slot) {
                        if b.op == BinaryOp::Mul {
                            ones.insert(o.node);
                        } else {
                            zeros.insert(o.node);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    for spec in program.params() {
        let n: usize = spec.shape.iter().product();
        let values: Vec<f32> = match spec.role {
            Role::Fixed => continue,
            Role::RunningMean => vec![0.0; n],
            Role::RunningVar => vec![1.0; n],
            Role::Learnable if ones.contains(&spec.node) => vec![1.0; n],
            Role::Learnable if slopes.contains(&spec.node) => vec![PRELU_SLOPE; n],
            Role::Learnable if zeros.contains(&spec.node) || spec.shape.len() < 2 => vec![0.0; n],
            Role::Learnable => {
                let fan_in = fan_in(graph, spec.node, &spec.shape);
                let bound = (6.0 / fan_in.max(1) as f32).sqrt();
                let hash = spec.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    (h ^ b as u64).wrapping_mul(0x1000_0000_01b3)
                });
                let mut rng = SplitMix64::new(seed ^ hash);
                (0..n).map(|_| (2.0 * rng.next_f32() - 1.0) * bound).collect()
            }
        };
        graph.replace_op(
            spec.node,
            Op::Const(graph_ir::Tensor::from_f32(spec.shape.clone(), &values)),
        )?;
    }
    Ok(())
}

/// Inputs per output of a weight: `C/g·kh·kw` for conv weights, `K` for Gemm weights.
fn fan_in(graph: &Graph, weight: graph_ir::NodeId, shape: &[usize]) -> usize {
    for id in graph.node_ids() {
        let node = graph.node(id);
        if node.inputs.get(1).map(|o| o.node) != Some(weight) {
            continue;
        }
        match &node.op {
            Op::Gemm(g) => return if g.trans_b { shape[1] } else { shape[0] },
            Op::MatMul(_) => return shape[0],
            _ => {}
        }
    }
    shape[1..].iter().product()
}
