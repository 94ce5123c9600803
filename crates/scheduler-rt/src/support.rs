//! Which operators a processor can run (Band §4.2: accelerators support a
//! subset; what they lack falls back elsewhere).
//!
//! Operators are named by their ONNX op type (`Conv`, `Relu`, `HardSwish`,
//! `Gemm`, ...), except that a grouped convolution with one input channel
//! per group is named `DepthwiseConv`, so a list can exclude depthwise
//! convolutions while keeping dense ones.

use graph_ir::{Graph, NodeId, Op};
use std::collections::BTreeSet;

/// The operator set of one processor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum OpSupport {
    /// Every operator.
    #[default]
    All,
    /// Only the listed operators.
    Only(BTreeSet<String>),
    /// Every operator but the listed ones.
    AllBut(BTreeSet<String>),
}

impl OpSupport {
    /// From a config's optional `supports` and `unsupported` lists (at most
    /// one may be given; the caller reports that).
    pub fn from_lists(supports: Option<&[String]>, unsupported: Option<&[String]>) -> OpSupport {
        match (supports, unsupported) {
            (Some(s), _) => OpSupport::Only(s.iter().cloned().collect()),
            (None, Some(u)) => OpSupport::AllBut(u.iter().cloned().collect()),
            (None, None) => OpSupport::All,
        }
    }

    /// Whether an operator named `key` (see [`op_key`]) runs here.
    pub fn supports(&self, key: &str) -> bool {
        match self {
            OpSupport::All => true,
            OpSupport::Only(s) => s.contains(key),
            OpSupport::AllBut(s) => !s.contains(key),
        }
    }

    /// A short description for reports: `all`, `only A, B`, `all but A, B`.
    pub fn describe(&self) -> String {
        let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
        match self {
            OpSupport::All => "all operators".into(),
            OpSupport::Only(s) => format!("only {}", join(s)),
            OpSupport::AllBut(s) => format!("all but {}", join(s)),
        }
    }
}

/// Whether a support list may name `op`: a name IR nodes carry (an entry of
/// [`graph_ir::onnx::SUPPORTED_OPS`] not in
/// [`graph_ir::onnx::IMPORTED_AS_OTHER_OPS`]) or `DepthwiseConv`.
pub fn known_op(op: &str) -> bool {
    op == "DepthwiseConv"
        || (graph_ir::onnx::SUPPORTED_OPS.contains(&op) && !graph_ir::onnx::IMPORTED_AS_OTHER_OPS.contains(&op))
}

/// The names [`known_op`] accepts, for messages.
pub fn known_ops() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = graph_ir::onnx::SUPPORTED_OPS
        .iter()
        .copied()
        .filter(|o| known_op(o))
        .collect();
    v.push("DepthwiseConv");
    v
}

/// The name support lists use for node `id`.
pub fn op_key(g: &Graph, id: NodeId) -> &'static str {
    let node = g.node(id);
    if let Op::Conv(c) = &node.op
        && c.group > 1
        && node
            .inputs
            .first()
            .and_then(|o| g.fact(*o))
            .is_some_and(|f| f.shape.get(1) == Some(&c.group))
    {
        return "DepthwiseConv";
    }
    node.op.name()
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::builder::{Builder, ConvSpec};

    #[test]
    fn support_lists_name_what_nodes_are_called() {
        for op in ["Softmax", "LRN", "Reshape", "Add", "DepthwiseConv"] {
            assert!(known_op(op), "{op}");
        }
        for op in ["Squeeze", "Unsqueeze", "Sum", "Dropout", "LSTM"] {
            assert!(!known_op(op), "{op}");
        }
        assert!(!known_ops().contains(&"Squeeze"));
    }

    #[test]
    fn depthwise_convs_have_their_own_name() {
        let mut b = Builder::new("dw");
        let x = b.input("x", &[1, 8, 8, 8]).unwrap();
        let y = b.conv("dense", x, ConvSpec::new(8, 3, 1)).unwrap();
        let y = b.conv("dw", y, ConvSpec::new(8, 3, 1).group(8)).unwrap();
        let y = b.conv("grouped", y, ConvSpec::new(8, 3, 1).group(2)).unwrap();
        let g = b.finish("y", y).unwrap();
        let keys: Vec<_> = ["dense", "dw", "grouped"]
            .iter()
            .map(|n| op_key(&g, g.find(n).unwrap()))
            .collect();
        assert_eq!(keys, ["Conv", "DepthwiseConv", "Conv"]);
        let no_dw = OpSupport::AllBut(["DepthwiseConv".to_string()].into());
        assert!(no_dw.supports("Conv") && !no_dw.supports("DepthwiseConv"));
        let only = OpSupport::Only(["Conv".to_string()].into());
        assert!(only.supports("Conv") && !only.supports("Relu"));
    }
}
