//! Refusing a model one of whose values needs more memory than the
//! process may have, before anything is allocated for it.

use crate::error::RuntimeError;
use graph_ir::Graph;

/// Bytes of memory the kernel reports available (`MemAvailable` of
/// `/proc/meminfo`); `None` where that cannot be read.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Fails when one value of `g` (an input, weight, intermediate or output)
/// needs more bytes than `available`: running the model would need at
/// least that much at once. A lower bound: passing says nothing about the
/// peak of many values alive together.
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
}
