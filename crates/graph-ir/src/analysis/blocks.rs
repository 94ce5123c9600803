//! Residual blocks and unit boundaries on the cut sequence of a main path.

use super::cuts::MainPath;
use crate::graph::{Graph, NodeId};
use crate::ops::{BinaryOp, Op};
use std::collections::BTreeSet;

/// An identity-residual block as indices into the cut sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Residual {
    pub entry: usize,
    pub exit: usize,
}

/// Whether every node only transforms values element by element or per
/// channel (normalisation, activations, SiLU's `x * sigmoid(x)`).
fn pointwise(g: &Graph, nodes: &[NodeId]) -> bool {
    !nodes.is_empty()
        && nodes
            .iter()
            .all(|id| matches!(g.node(*id).op, Op::BatchNorm(_) | Op::Unary(_) | Op::Binary(_)))
}

fn is_add(g: &Graph, id: NodeId) -> bool {
    matches!(&g.node(id).op, Op::Binary(b) if b.op == BinaryOp::Add)
}

/// Extends cut index `k` over following pointwise segments.
fn skip_pointwise(g: &Graph, mp: &MainPath, mut k: usize) -> usize {
    while k + 1 < mp.cuts.len() {
        let seg = mp.between(mp.cuts[k], mp.cuts[k + 1]);
        if !pointwise(g, &seg)
            || seg
                .iter()
                .any(|id| is_add(g, *id) && residual_at(g, mp, k + 1).is_some())
        {
            break;
        }
        k += 1;
    }
    k
}

/// If cut `j` is produced by an `Add` of an earlier cut and a value computed
/// after it, the index of that earlier cut.
fn residual_at(g: &Graph, mp: &MainPath, j: usize) -> Option<usize> {
    let add = mp.cuts[j].node;
    if !is_add(g, add) {
        return None;
    }
    let inputs = &g.node(add).inputs;
    for (a, b) in [(inputs[0], inputs[1]), (inputs[1], inputs[0])] {
        if let Some(i) = mp.cuts[..j].iter().position(|c| *c == a) {
            let pb = mp.pos.get(&b.node)?;
            if *pb > mp.pos[&a.node] && g.fact(a) == g.fact(mp.cuts[j]) {
                return Some(i);
            }
        }
    }
    None
}

/// Identity-residual blocks, each extended over a trailing activation.
pub(super) fn residual_blocks(g: &Graph, mp: &MainPath) -> Vec<Residual> {
    (0..mp.cuts.len())
        .filter_map(|j| {
            residual_at(g, mp, j).map(|entry| Residual {
                entry,
                exit: skip_pointwise(g, mp, j),
            })
        })
        .collect()
}

/// Cut index where the stem ends: after the first convolution, its
/// normalisation and activation, and a directly following pooling layer.
pub(super) fn stem_end(g: &Graph, mp: &MainPath) -> Option<usize> {
    let first_conv = mp.order.iter().position(|id| matches!(g.node(*id).op, Op::Conv(_)))?;
    let k = mp.cuts.iter().position(|c| mp.pos[&c.node] >= first_conv)?;
    let mut k = skip_pointwise(g, mp, k);
    if k + 1 < mp.cuts.len() {
        let seg = mp.between(mp.cuts[k], mp.cuts[k + 1]);
        if seg.len() == 1 && matches!(g.node(seg[0]).op, Op::Pool(_)) {
            k += 1;
        }
    }
    Some(k)
}

/// Whether cut `k` has had its spatial dimensions reduced away (a value of
/// rank above 4, such as a channel shuffle's, has not).
fn is_reduced(g: &Graph, mp: &MainPath, k: usize) -> bool {
    let c = mp.cuts[k];
    let rank = g.fact(c).map_or(0, |f| f.rank());
    rank < 4
        || matches!(
            g.node(c.node).op,
            Op::GlobalAveragePool(_) | Op::GlobalMaxPool(_) | Op::Reduce(_)
        )
}

/// Whether cut `k` is a Concat joining parallel paths (a fire, Inception or
/// ShuffleNet module's output), not one that appends new features to an
/// earlier cut (a DenseNet layer, whose block continues).
fn module_output(g: &Graph, mp: &MainPath, k: usize) -> bool {
    let node = g.node(mp.cuts[k].node);
    matches!(node.op, Op::Concat(_)) && node.inputs.iter().all(|i| !mp.cuts[..k].contains(i))
}

/// Whether the nodes hold a convolution or matrix product.
fn computes(g: &Graph, nodes: &[NodeId]) -> bool {
    nodes.iter().any(|id| {
        matches!(
            g.node(*id).op,
            Op::Conv(_) | Op::ConvTranspose(_) | Op::Gemm(_) | Op::MatMul(_)
        )
    })
}

/// Unit boundaries between the stem's end and the head's start (both
/// included), the head's start, and why the head starts there.
pub(super) fn boundaries(
    g: &Graph,
    mp: &MainPath,
    stem: usize,
    residuals: &[Residual],
) -> (BTreeSet<usize>, usize, String) {
    let mut b = BTreeSet::new();
    b.insert(stem);
    for r in residuals {
        b.insert(r.entry);
        b.insert(r.exit);
    }
    for (k, c) in mp.cuts.iter().enumerate() {
        let producer = &g.node(c.node).op;
        let consumers = g.consumers(*c);
        let linear = matches!(producer, Op::Conv(_) | Op::BatchNorm(_))
            && !consumers.is_empty()
            && consumers.iter().all(|(n, _)| matches!(g.node(*n).op, Op::Conv(_)));
        if linear || matches!(producer, Op::Pool(_)) {
            b.insert(k);
        }
        if module_output(g, mp, k) {
            b.insert(skip_pointwise(g, mp, k));
        }
    }
    let last = mp.cuts.len() - 1;
    let reduced = (stem + 1..mp.cuts.len()).find(|&k| is_reduced(g, mp, k));
    let upsampled = (stem..last).find(|&k| upsamples(g, mp, k));
    let limit = match (reduced, upsampled) {
        (Some(r), Some(u)) => Some(u.min(r - 1)),
        (Some(r), None) => Some(r - 1),
        (None, u) => u,
    };
    let head = match limit {
        Some(l) => b.range(..=l).next_back().copied().unwrap_or(stem),
        None => last,
    };
    let name = |k: usize| g.node(mp.cuts[k].node).name.clone();
    let reason = match (reduced, upsampled) {
        (Some(r), u) if u.is_none_or(|u| r - 1 <= u) => {
            format!("`{}` reduces the spatial dimensions away", name(r))
        }
        (_, Some(u)) => format!("the segment after `{}` enlarges the map (a decoder)", name(u)),
        _ if g.outputs().len() > 1 => format!(
            "the {} outputs part ways after `{}` (the head holds every node after it)",
            g.outputs().len(),
            name(last)
        ),
        _ => "the graph ends".into(),
    };
    let mut b: BTreeSet<usize> = b.into_iter().filter(|&k| k >= stem && k <= head).collect();
    b.insert(head);
    let (b, head) = without_empty_units(g, mp, b, head);
    (b, head, reason)
}

/// Removes boundaries so that every unit holds a convolution or matrix
/// product: a unit without one (a lone pooling) joins the unit after it,
/// or the head when it is the last. Returns the boundaries and the head.
fn without_empty_units(g: &Graph, mp: &MainPath, mut b: BTreeSet<usize>, mut head: usize) -> (BTreeSet<usize>, usize) {
    loop {
        let v: Vec<usize> = b.iter().copied().collect();
        let Some(w) = v
            .windows(2)
            .find(|w| !computes(g, &mp.between(mp.cuts[w[0]], mp.cuts[w[1]])))
        else {
            return (b, head);
        };
        b.remove(&w[1]);
        if w[1] == head {
            head = w[0];
        }
    }
}

/// Whether the segment after cut `k` enlarges a spatial map (a decoder or
/// feature-pyramid path: Resize, ConvTranspose).
fn upsamples(g: &Graph, mp: &MainPath, k: usize) -> bool {
    mp.between(mp.cuts[k], mp.cuts[k + 1])
        .iter()
        .any(|id| matches!(g.node(*id).op, Op::Resize(_) | Op::ConvTranspose(_)))
}
