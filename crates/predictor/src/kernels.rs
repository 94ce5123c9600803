//! Kernel detection: splitting a graph into the kernels a runtime executes,
//! by fusion rules such as `conv+bn+act` (nn-Meter). A node whose output
//! feeds several consumers, or leaves the node set, ends a fusion.

use graph_ir::ops::{BinaryOp, Op};
use graph_ir::{Graph, NodeId};
use serde::Serialize;
use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

/// The operator classes fusion rules and features speak of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpClass {
    Conv,
    DwConv,
    Bn,
    /// Activations, softmax and other one-input ops that keep the shape.
    Act,
    Add,
    /// Element-wise products and other two-input arithmetic.
    Mul,
    Pool,
    /// Global pooling and spatial means.
    Gap,
    /// Fully connected: Gemm and MatMul.
    Fc,
    Concat,
    Split,
    /// Reshape, Flatten, Transpose, Slice, Pad.
    Layout,
}

impl OpClass {
    pub fn name(self) -> &'static str {
        match self {
            OpClass::Conv => "conv",
            OpClass::DwConv => "dwconv",
            OpClass::Bn => "bn",
            OpClass::Act => "act",
            OpClass::Add => "add",
            OpClass::Mul => "mul",
            OpClass::Pool => "pool",
            OpClass::Gap => "gap",
            OpClass::Fc => "fc",
            OpClass::Concat => "concat",
            OpClass::Split => "split",
            OpClass::Layout => "layout",
        }
    }

    /// The class [`OpClass::name`] gives `name`.
    pub fn from_name(name: &str) -> Option<OpClass> {
        OpClass::ALL.into_iter().find(|c| c.name() == name)
    }

    pub const ALL: [OpClass; 12] = [
        OpClass::Conv,
        OpClass::DwConv,
        OpClass::Bn,
        OpClass::Act,
        OpClass::Add,
        OpClass::Mul,
        OpClass::Pool,
        OpClass::Gap,
        OpClass::Fc,
        OpClass::Concat,
        OpClass::Split,
        OpClass::Layout,
    ];

    /// The class of a node (`None` for inputs and constants).
    pub fn of(g: &Graph, id: NodeId) -> Option<OpClass> {
        let node = g.node(id);
        Some(match &node.op {
            Op::Input(_) | Op::Const(_) => return None,
            Op::Conv(c) => {
                let cin = g.fact(node.inputs[0]).map_or(0, |f| f.shape[1]);
                if c.is_depthwise(cin) {
                    OpClass::DwConv
                } else {
                    OpClass::Conv
                }
            }
            Op::ConvTranspose(_) => OpClass::Conv,
            Op::BatchNorm(_) | Op::InstanceNorm(_) | Op::LayerNorm(_) | Op::Lrn(_) => OpClass::Bn,
            Op::Unary(_) | Op::Softmax(_) => OpClass::Act,
            Op::Binary(b) => {
                let consts = node.inputs.iter().filter(|o| g.const_tensor(**o).is_some()).count();
                match (b.op, consts) {
                    (_, 1) => OpClass::Act,
                    (BinaryOp::Add, _) => OpClass::Add,
                    _ => OpClass::Mul,
                }
            }
            Op::Pool(_) => OpClass::Pool,
            Op::GlobalAveragePool(_) | Op::GlobalMaxPool(_) | Op::Reduce(_) => OpClass::Gap,
            Op::Gemm(_) | Op::MatMul(_) => OpClass::Fc,
            Op::Concat(_) => OpClass::Concat,
            Op::Split(_) => OpClass::Split,
            Op::Reshape(_)
            | Op::Flatten(_)
            | Op::Transpose(_)
            | Op::Slice(_)
            | Op::Pad(_)
            | Op::Resize(_)
            | Op::Tile(_)
            | Op::Gather(_)
            | Op::DepthToSpace(_)
            | Op::SpaceToDepth(_)
            | Op::QuantizeLinear(_)
            | Op::DequantizeLinear(_)
            | Op::Cast(_) => OpClass::Layout,
        })
    }
}

impl fmt::Display for OpClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A chain of op classes that one kernel executes, written `conv+bn+act`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusionRule(pub Vec<OpClass>);

impl FromStr for FusionRule {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let classes = s
            .split('+')
            .map(|part| {
                OpClass::ALL
                    .into_iter()
                    .find(|c| c.name() == part.trim())
                    .ok_or_else(|| {
                        let known: Vec<&str> = OpClass::ALL.iter().map(|c| c.name()).collect();
                        format!(
                            "unknown op class `{part}` in fusion rule `{s}` (known: {})",
                            known.join(", ")
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if classes.len() < 2 {
            return Err(format!("fusion rule `{s}` needs at least two op classes"));
        }
        Ok(FusionRule(classes))
    }
}

/// The rules of mobile inference engines (TFLite, MNN) as nn-Meter lists them.
pub fn default_rules() -> Vec<FusionRule> {
    [
        "conv+bn+act",
        "conv+bn",
        "conv+act",
        "dwconv+bn+act",
        "dwconv+bn",
        "dwconv+act",
        "fc+act",
        "add+act",
        "bn+act",
    ]
    .iter()
    .map(|r| r.parse().expect("default rules parse"))
    .collect()
}

/// One kernel: nodes executed together, the first one naming it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    pub class: OpClass,
    pub nodes: Vec<NodeId>,
}

/// Splits `nodes` (in topological order; inputs and constants are skipped)
/// into kernels, applying the longest matching rule at each node.
pub fn detect(g: &Graph, nodes: &[NodeId], rules: &[FusionRule]) -> Vec<Kernel> {
    let set: HashSet<NodeId> = nodes.iter().copied().collect();
    let mut taken: HashSet<NodeId> = HashSet::new();
    let mut rules: Vec<&FusionRule> = rules.iter().collect();
    rules.sort_by_key(|r| std::cmp::Reverse(r.0.len()));
    let sole_successor = |id: NodeId| -> Option<NodeId> {
        let node = g.node(id);
        if node.outputs.len() != 1 || g.is_output(id.out(0)) {
            return None;
        }
        match g.consumers(id.out(0)).as_slice() {
            [(next, _)] if set.contains(next) => Some(*next),
            _ => None,
        }
    };
    let mut kernels = Vec::new();
    for &id in nodes {
        let Some(class) = OpClass::of(g, id) else { continue };
        if taken.contains(&id) {
            continue;
        }
        let mut best = vec![id];
        for rule in &rules {
            if rule.0[0] != class {
                continue;
            }
            let mut chain = vec![id];
            for want in &rule.0[1..] {
                let next = chain.last().and_then(|&last| sole_successor(last));
                match next {
                    Some(n) if !taken.contains(&n) && OpClass::of(g, n) == Some(*want) => chain.push(n),
                    _ => break,
                }
            }
            if chain.len() == rule.0.len() {
                best = chain;
                break;
            }
        }
        taken.extend(best.iter().copied());
        kernels.push(Kernel { class, nodes: best });
    }
    kernels
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::builder::{Builder, ConvSpec};

    fn classes(g: &Graph, ks: &[Kernel]) -> Vec<String> {
        ks.iter()
            .map(|k| {
                k.nodes
                    .iter()
                    .map(|n| OpClass::of(g, *n).map_or("?", |c| c.name()))
                    .collect::<Vec<_>>()
                    .join("+")
            })
            .collect()
    }

    fn ops(g: &Graph) -> Vec<NodeId> {
        g.topo_order().unwrap()
    }

    #[test]
    fn fuses_conv_bn_act_and_residual_add() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 8, 8, 8]).unwrap();
        let y = b.basic_block("b", x, 8, 1).unwrap();
        let g = b.finish("y", y).unwrap();
        let ks = detect(&g, &ops(&g), &default_rules());
        assert_eq!(classes(&g, &ks), ["conv+bn+act", "conv+bn", "add+act"]);
    }

    #[test]
    fn multi_consumer_output_is_not_fused() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 8, 8, 8]).unwrap();
        let c = b.conv("c", x, ConvSpec::new(8, 3, 1)).unwrap();
        let r = b.relu("r", c).unwrap();
        let s = b.add("s", c, r).unwrap();
        let g = b.finish("y", s).unwrap();
        let ks = detect(&g, &ops(&g), &default_rules());
        assert_eq!(classes(&g, &ks), ["conv", "act", "add"]);
    }

    #[test]
    fn depthwise_and_grouped_convs() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 8, 8, 8]).unwrap();
        let d = b.conv_bn("dw", x, ConvSpec::new(8, 3, 1).group(8), true).unwrap();
        let gc = b.conv_bn("gc", d, ConvSpec::new(16, 3, 1).group(2), false).unwrap();
        let g = b.finish("y", gc).unwrap();
        let ks = detect(&g, &ops(&g), &default_rules());
        assert_eq!(classes(&g, &ks), ["dwconv+bn+act", "conv+bn"]);
    }

    #[test]
    fn rules_parse_and_reject_unknown_classes() {
        assert_eq!(
            "conv+bn".parse::<FusionRule>().unwrap(),
            FusionRule(vec![OpClass::Conv, OpClass::Bn])
        );
        let e = "conv+batchnorm".parse::<FusionRule>().unwrap_err();
        assert!(e.contains("batchnorm") && e.contains("known"), "{e}");
    }
}
