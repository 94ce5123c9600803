//! A fingerprint of a graph's structure: what a plan or a branched model
//! records of the model it was made from, to refuse being applied to
//! another.

use crate::graph::Graph;
use crate::ops::Op;

impl Graph {
    /// 16 hex digits (FNV-1a, 64 bits) over the nodes that compute the
    /// outputs, in a canonical order (depth first from the outputs, inputs
    /// in slot order): each operator with its attributes, the facts of
    /// inputs, constants and outputs, and which outputs feed which inputs.
    /// Names, weight values and the order of nodes in the file are left
    /// out: a model renamed, converted or given other weights keeps its
    /// fingerprint; another input shape, operator or wiring changes it.
    /// `None` for a graph with a cycle.
    pub fn fingerprint(&self) -> Option<String> {
        self.topo_order().ok()?;
        let order = self.canonical_order();
        let position: std::collections::HashMap<_, _> = order.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let mut text = String::new();
        for id in &order {
            let node = self.node(*id);
            match &node.op {
                Op::Const(t) => text.push_str(&format!("const {}", t.fact())),
                Op::Input(f) => text.push_str(&format!("input {f}")),
                op => text.push_str(&format!("{op:?}")),
            }
            for o in &node.inputs {
                text.push_str(&format!(" <{}.{}", position[&o.node], o.slot));
            }
            for f in &node.outputs {
                text.push_str(&format!(" >{f}"));
            }
            text.push('\n');
        }
        for (_, o) in self.outputs() {
            text.push_str(&format!("out {}.{}\n", position[&o.node], o.slot));
        }
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        Some(format!("{h:016x}"))
    }
}

impl Graph {
    /// Nodes that the outputs read, each after its inputs, found depth
    /// first from the outputs in order and through inputs in slot order.
    fn canonical_order(&self) -> Vec<crate::NodeId> {
        let mut order = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (_, o) in self.outputs() {
            let mut stack = vec![(o.node, 0usize)];
            while let Some((id, next)) = stack.pop() {
                if next == 0 && !seen.insert(id) {
                    continue;
                }
                let inputs = &self.node(id).inputs;
                if let Some(i) = inputs.get(next) {
                    stack.push((id, next + 1));
                    if !seen.contains(&i.node) {
                        stack.push((i.node, 0));
                    }
                } else {
                    order.push(id);
                }
            }
        }
        order
    }
}

#[cfg(test)]
mod tests {
    use crate::builder::{Builder, ConvSpec};

    fn net(width: usize, rename: bool) -> crate::Graph {
        let mut b = Builder::new(if rename { "other" } else { "net" });
        let x = b.input("x", &[1, 3, 16, 16]).unwrap();
        let name = if rename { "c" } else { "conv" };
        let y = b.conv_bn(name, x, ConvSpec::new(width, 3, 1), true).unwrap();
        let y = b.classifier("head", y, 10).unwrap();
        b.finish("y", y).unwrap()
    }

    #[test]
    fn names_do_not_count_and_structure_does() {
        let a = net(8, false).fingerprint().unwrap();
        assert_eq!(a.len(), 16);
        assert_eq!(a, net(8, true).fingerprint().unwrap());
        assert_ne!(a, net(16, false).fingerprint().unwrap());
    }
}
