//! Which activations take their input's quantization parameters instead of
//! their own calibrated range: `quantize_static`'s rule for operators that
//! move, select or average values without changing their scale
//! (`QDQDirect8BitOp` and its kin: Reshape, Flatten, Transpose, Slice,
//! Split, Resize, MaxPool and AveragePool), so that a delegate runs them
//! on the integers as they are.

use crate::params::{self, QParams};
use graph_ir::{Graph, NodeId, Op, Outlet};
use std::collections::{HashMap, HashSet};

/// Whether `op`'s output is quantized with its first input's parameters.
fn keeps_input_params(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape(_) | Op::Flatten(_) | Op::Transpose(_) | Op::Slice(_) | Op::Split(_) | Op::Resize(_) | Op::Pool(_)
    )
}

/// The parameters of each of `acts` (in topological order), `ranges[i]`
/// the calibrated range of `acts[i]`: an output of an int8 node that
/// keeps its input's parameters takes them when that input is quantized
/// too; every other activation gets [`params::activation`] of its range.
pub fn activation_params(g: &Graph, acts: &[Outlet], ranges: &[(f32, f32)], int8: &HashSet<NodeId>) -> Vec<QParams> {
    let mut by_outlet: HashMap<Outlet, QParams> = HashMap::new();
    let mut out = Vec::with_capacity(acts.len());
    for (o, &(lo, hi)) in acts.iter().zip(ranges) {
        let node = g.node(o.node);
        let inherited = (int8.contains(&o.node) && keeps_input_params(&node.op))
            .then(|| node.inputs.first().and_then(|i| by_outlet.get(i)).copied())
            .flatten();
        let p = inherited.unwrap_or_else(|| params::activation(lo, hi));
        by_outlet.insert(*o, p);
        out.push(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrecisionMap;
    use crate::qdq::{activations_to_calibrate, int8_nodes};
    use graph_ir::builder::{Builder, ConvSpec};
    use graph_ir::keys;
    use graph_ir::ops::{Pool, PoolKind};
    use predictor::Precision;

    /// `conv → relu → average pool → conv`, all on an int8 `cpu`.
    #[test]
    fn an_average_pool_keeps_its_input_params_and_a_convolution_does_not() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 3, 8, 8]).unwrap();
        let y = b.conv("conv0", x, ConvSpec::new(4, 3, 1).bias()).unwrap();
        let y = b.relu("relu", y).unwrap();
        let pool = Pool {
            kind: PoolKind::Average {
                count_include_pad: false,
            },
            kernel: [2, 2],
            strides: [2, 2],
            pads: [0; 4],
            dilations: [1, 1],
            ceil_mode: false,
        };
        let y = b.node("pool", Op::Pool(pool), &[y]).unwrap();
        let y = b.conv("conv1", y, ConvSpec::new(4, 1, 1)).unwrap();
        let mut g = b.finish("y", y).unwrap();
        g.fill_missing_weights(1);
        for id in g.node_ids() {
            g.annotate(id, keys::PROCESSOR, "cpu");
        }
        let map = PrecisionMap::new([("cpu".to_string(), Precision::Int8)].into(), None);
        let acts = activations_to_calibrate(&g, &map).unwrap();
        let names: Vec<&str> = acts.iter().map(|o| g.node(o.node).name.as_str()).collect();
        let at = |n: &str| {
            names
                .iter()
                .position(|x| *x == n)
                .unwrap_or_else(|| panic!("{n} in {names:?}"))
        };
        let ranges: Vec<(f32, f32)> = (0..acts.len()).map(|i| (0.0, 1.0 + i as f32)).collect();
        let int8: HashSet<NodeId> = int8_nodes(&g, &map).unwrap().into_iter().collect();
        let p = activation_params(&g, &acts, &ranges, &int8);
        assert_eq!(
            p[at("pool")],
            p[at("relu")],
            "the pool's output takes its input's parameters"
        );
        let (lo, hi) = ranges[at("pool")];
        assert_ne!(p[at("pool")], params::activation(lo, hi));
        let (lo, hi) = ranges[at("conv1")];
        assert_eq!(
            p[at("conv1")],
            params::activation(lo, hi),
            "a convolution keeps its own range"
        );
    }
}
