//! Refusing a model whose values need more memory than the process may
//! have, before anything is allocated for it: one value alone, or the
//! values alive at once when the model runs node by node.

use crate::error::RuntimeError;
use graph_ir::{Graph, NodeId, Op, Outlet};
use std::collections::HashMap;

/// Bytes of memory the kernel reports available (`MemAvailable` of
/// `/proc/meminfo`); `None` where that cannot be read.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Fails when one value of `g` (an input, weight, intermediate or output)
/// needs more bytes than `available`, or when the values alive at once
/// ([`peak_bytes`]) do: running the model node by node would need at
/// least that much. Engines' own scratch memory comes on top.
pub fn check_fits(g: &Graph, available: u64) -> Result<(), RuntimeError> {
    for id in g.node_ids() {
        let node = g.node(id);
        for (slot, f) in node.outputs.iter().enumerate() {
            let need = f.checked_bytes().map_or(u64::MAX, |b| b as u64);
            if need > available {
                let value = if node.outputs.len() == 1 {
                    node.name.clone()
                } else {
                    format!("{} (output {slot})", node.name)
                };
                return Err(RuntimeError::TooLarge {
                    value,
                    fact: f.to_string(),
                    need_gb: need as f64 / 1e9,
                    available_gb: available as f64 / 1e9,
                });
            }
        }
    }
    check_peak(g, available)
}

/// The most bytes the values of `g` hold at once when its nodes run one
/// at a time in topological order: weights and inputs throughout, each
/// other value from the node that makes it until its last reader has
/// made its own outputs (graph outputs until the end). With the node
/// after whose outputs the peak is reached.
pub fn peak_bytes(g: &Graph) -> Result<(u64, Option<NodeId>), RuntimeError> {
    let order = g.topo_order()?;
    let size = |f: &graph_ir::Fact| f.checked_bytes().map_or(u64::MAX, |b| b as u64);
    let mut last_read: HashMap<Outlet, usize> = HashMap::new();
    for (step, id) in order.iter().enumerate() {
        for o in &g.node(*id).inputs {
            last_read.insert(*o, step);
        }
    }
    let kept = |o: Outlet| g.is_output(o) || matches!(g.node(o.node).op, Op::Const(_) | Op::Input(_));
    let mut freed_after: Vec<Vec<Outlet>> = vec![Vec::new(); order.len()];
    for (o, step) in &last_read {
        if !kept(*o) {
            freed_after[*step].push(*o);
        }
    }
    let (mut live, mut peak, mut at) = (0u64, 0u64, None);
    for (step, id) in order.iter().enumerate() {
        let node = g.node(*id);
        for (slot, f) in node.outputs.iter().enumerate() {
            let o = id.out(slot);
            if kept(o) || last_read.contains_key(&o) {
                live = live.saturating_add(size(f));
            }
        }
        if live > peak {
            (peak, at) = (live, Some(*id));
        }
        for o in &freed_after[step] {
            live = live.saturating_sub(g.fact(*o).map_or(0, size));
        }
    }
    Ok((peak, at))
}

fn check_peak(g: &Graph, available: u64) -> Result<(), RuntimeError> {
    let (peak, at) = peak_bytes(g)?;
    if peak > available {
        return Err(RuntimeError::TooLargeTogether {
            node: at.map_or_else(String::new, |id| g.node(id).name.clone()),
            need_gb: peak as f64 / 1e9,
            available_gb: available as f64 / 1e9,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::{Fact, Op, ops::Unary, ops::UnaryOp};

    #[test]
    fn a_value_larger_than_memory_is_named() {
        let mut g = Graph::new("g");
        let x = g.add_input("x", Fact::f32([1, 3, 1000, 1000])).unwrap();
        g.add_node("relu", Op::Unary(Unary { op: UnaryOp::Relu }), &[x])
            .unwrap();
        assert!(check_fits(&g, 12_000_000).is_ok());
        let err = check_fits(&g, 11_999_999).unwrap_err().to_string();
        assert!(
            err.contains("`x`") && err.contains("f32[1x3x1000x1000]") && err.contains("0.012 GB"),
            "{err}"
        );
    }

    /// `x` (4 MB) -> a -> b, and `sum = a + b`: x, a and b are alive
    /// together when b is made, 12 MB, and a, b and sum when sum is.
    #[test]
    fn values_alive_together_are_counted() {
        let relu = || Op::Unary(Unary { op: UnaryOp::Relu });
        let mut g = Graph::new("g");
        let x = g.add_input("x", Fact::f32([1, 1, 1000, 1000])).unwrap();
        let a = g.add_node("a", relu(), &[x]).unwrap().out(0);
        let b = g.add_node("b", relu(), &[a]).unwrap().out(0);
        let sum = g
            .add_node(
                "sum",
                Op::Binary(graph_ir::ops::Binary {
                    op: graph_ir::ops::BinaryOp::Add,
                }),
                &[a, b],
            )
            .unwrap()
            .out(0);
        let c = g.add_node("c", relu(), &[sum]).unwrap().out(0);
        g.set_outputs(vec![("c".into(), c)]).unwrap();
        let (peak, at) = peak_bytes(&g).unwrap();
        assert_eq!(peak, 16_000_000, "x, a, b and sum at once");
        assert_eq!(g.node(at.unwrap()).name, "sum");
        assert!(check_fits(&g, 16_000_000).is_ok());
        let err = check_fits(&g, 15_999_999).unwrap_err().to_string();
        assert!(
            err.contains("alive at once") && err.contains("`sum`") && err.contains("0.016 GB"),
            "{err}"
        );
    }
}
