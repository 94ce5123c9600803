//! nn-Meter's per-kernel features, and the work and bytes of a kernel.

use crate::kernels::{Kernel, OpClass};
use graph_ir::ops::{Conv, ConvTranspose, Op};
use graph_ir::{Graph, NodeId, Outlet};
use std::collections::HashSet;

/// Feature names per kernel class, in the order [`features`] returns them.
pub fn feature_names(class: OpClass) -> &'static [&'static str] {
    match class {
        OpClass::Conv | OpClass::DwConv => &["h", "cin", "cout", "k", "s", "flops", "params"],
        OpClass::Fc => &["cin", "cout", "flops"],
        OpClass::Pool => &["h", "cin", "cout", "k", "s"],
        OpClass::Add => &["h", "c1", "c2", "fusable"],
        OpClass::Concat => &["h", "n", "c1", "c2", "c3", "c4"],
        OpClass::Bn | OpClass::Act | OpClass::Mul | OpClass::Gap | OpClass::Split | OpClass::Layout => &["h", "cin"],
    }
}

/// Output channels are tiled by this many in the engines' matrix kernels
/// that [`model_features`] describe a convolution's last tile with.
pub const COUT_TILE: usize = 32;

/// Names of the features a class's forest is fitted on: the measured
/// [`feature_names`], then those [`model_features`] derives from them.
pub fn model_feature_names(class: OpClass) -> Vec<&'static str> {
    let mut names = feature_names(class).to_vec();
    if matches!(class, OpClass::Conv | OpClass::DwConv) {
        names.push("cout_tail");
    }
    names
}

/// A kernel's measured `features` (its class's [`feature_names`]) with the
/// derived ones appended, named by [`model_feature_names`]. A convolution
/// gains `cout_tail`, its output channels modulo [`COUT_TILE`]: a matrix
/// kernel that tiles output channels runs a partly filled last tile, or
/// switches to a narrower, slower tile, so time per MAC is not smooth in
/// `cout`.
pub fn model_features(class: OpClass, features: &[f64]) -> Vec<f64> {
    let mut v = features.to_vec();
    if matches!(class, OpClass::Conv | OpClass::DwConv) {
        let cout = named(feature_names(class), features, "cout").unwrap_or(0.0);
        v.push((cout.max(0.0) as usize % COUT_TILE) as f64);
    }
    v
}

/// The feature called `name` among `features` named by `names` (a class's
/// [`feature_names`]), if it has one.
pub fn named(names: &[&str], features: &[f64], name: &str) -> Option<f64> {
    names
        .iter()
        .position(|n| *n == name)
        .and_then(|i| features.get(i).copied())
}

fn dim(g: &Graph, o: Outlet, i: usize) -> f64 {
    g.fact(o).and_then(|f| f.shape.get(i).copied()).unwrap_or(1) as f64
}

/// Features of a kernel, named by [`feature_names`] of its class.
pub fn features(g: &Graph, k: &Kernel) -> Vec<f64> {
    let first = g.node(k.nodes[0]);
    let x = first.inputs[0];
    let work = work(g, k);
    match (&first.op, k.class) {
        (Op::Conv(Conv { strides, .. }) | Op::ConvTranspose(ConvTranspose { strides, .. }), _) => {
            let w = first.inputs[1];
            let out = first.outputs[0].shape.get(1).copied().unwrap_or(0) as f64;
            vec![
                dim(g, x, 2),
                dim(g, x, 1),
                out,
                dim(g, w, 2),
                strides[0] as f64,
                work.flops as f64,
                work.params as f64,
            ]
        }
        (Op::Pool(p), _) => vec![
            dim(g, x, 2),
            dim(g, x, 1),
            dim(g, x, 1),
            p.kernel[0] as f64,
            p.strides[0] as f64,
        ],
        (_, OpClass::Fc) => {
            let cout = first.outputs[0].shape.last().copied().unwrap_or(0) as f64;
            let cin = g.fact(x).and_then(|f| f.shape.last().copied()).unwrap_or(0) as f64;
            vec![cin, cout, work.flops as f64]
        }
        (_, OpClass::Add) => vec![
            dim(g, x, 2),
            dim(g, x, 1),
            dim(g, first.inputs[1], 1),
            fusable_operands(g, k.nodes[0]) as f64,
        ],
        (_, OpClass::Concat) => {
            let mut v = vec![dim(g, x, 2), first.inputs.len() as f64];
            v.extend((0..4).map(|i| first.inputs.get(i).map_or(0.0, |o| dim(g, *o, 1))));
            v
        }
        _ => vec![dim(g, x, 2), dim(g, x, 1)],
    }
}

/// How many operands of the element-wise node `id` come straight from a
/// matrix product (a convolution or fully connected layer, possibly through
/// a BatchNorm) whose result nothing else reads. An engine that fuses the
/// ops after a product into it (tract adds a residual into the product's
/// output) can run such an add inside that product; the add's own time then
/// depends on whether it could.
pub fn fusable_operands(g: &Graph, id: NodeId) -> usize {
    let sole_reader =
        |o: Outlet, reader: NodeId| !g.is_output(o) && matches!(g.consumers(o).as_slice(), [(r, _)] if *r == reader);
    g.node(id)
        .inputs
        .iter()
        .filter(|o| {
            let mut at = **o;
            let mut reader = id;
            loop {
                if !sole_reader(at, reader) {
                    return false;
                }
                match OpClass::of(g, at.node) {
                    Some(OpClass::Conv | OpClass::DwConv | OpClass::Fc) => return true,
                    Some(OpClass::Bn) => {
                        reader = at.node;
                        at = g.node(at.node).inputs[0];
                    }
                    _ => return false,
                }
            }
        })
        .count()
}

/// Arithmetic and memory traffic of a set of nodes run as one kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Work {
    pub flops: u64,
    pub params: u64,
    /// Bytes read from outside the kernel (activations and weights) plus bytes
    /// written that leave it; values passed between fused nodes are free.
    pub bytes: u64,
    /// Output channels of the kernel's last node.
    pub out_channels: usize,
}

/// The work of a kernel.
pub fn work(g: &Graph, k: &Kernel) -> Work {
    work_of(g, &k.nodes)
}

/// The work of any set of nodes treated as one kernel.
pub fn work_of(g: &Graph, nodes: &[NodeId]) -> Work {
    let inside: HashSet<NodeId> = nodes.iter().copied().collect();
    let cost = g.cost_of(nodes);
    let mut read: HashSet<Outlet> = HashSet::new();
    let mut bytes = 0u64;
    for id in nodes {
        for o in &g.node(*id).inputs {
            if !inside.contains(&o.node) && read.insert(*o) {
                bytes += g.fact(*o).map_or(0, |f| f.bytes() as u64);
            }
        }
        let node = g.node(*id);
        for slot in 0..node.outputs.len() {
            let o = id.out(slot);
            let leaves = g.is_output(o) || g.consumers(o).iter().any(|(c, _)| !inside.contains(c));
            if leaves {
                bytes += node.outputs[slot].bytes() as u64;
            }
        }
    }
    let out_channels = nodes
        .last()
        .and_then(|id| g.node(*id).outputs.first())
        .and_then(|f| f.shape.get(1).copied())
        .unwrap_or(1);
    Work {
        flops: cost.flops,
        params: cost.params,
        bytes,
        out_channels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{default_rules, detect};
    use graph_ir::builder::{Builder, ConvSpec};

    #[test]
    fn an_add_counts_the_products_only_it_reads() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 8, 8, 8]).unwrap();
        let y = b.basic_block("b", x, 8, 1).unwrap();
        let p = b.conv_bn("p", y, ConvSpec::new(8, 1, 1), false).unwrap();
        let q = b.conv("q", y, ConvSpec::new(8, 1, 1)).unwrap();
        let z = b.add("pq", p, q).unwrap();
        let shared = b.conv("s", z, ConvSpec::new(8, 1, 1)).unwrap();
        let r = b.relu("r", shared).unwrap();
        let w = b.add("sr", shared, r).unwrap();
        let g = b.finish("y", w).unwrap();
        let kernels = detect(&g, &g.compute_order().unwrap(), &default_rules());
        let fusable: Vec<(String, f64)> = kernels
            .iter()
            .filter(|k| k.class == OpClass::Add)
            .map(|k| (g.node(k.nodes[0]).name.clone(), *features(&g, k).last().unwrap()))
            .collect();
        let names = |n: &str| fusable.iter().find(|(m, _)| m.contains(n)).map(|(_, f)| *f);
        assert_eq!(fusable.len(), 3, "{fusable:?}");
        assert_eq!(names("pq"), Some(2.0), "{fusable:?}");
        assert_eq!(names("sr"), Some(0.0), "{fusable:?}");
        assert_eq!(fusable.iter().filter(|(_, f)| *f == 1.0).count(), 1, "{fusable:?}");
    }
}
