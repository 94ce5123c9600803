//! Operators (or forms of them) newer than
//! [`EXPORT_OPSET`](super::EXPORT_OPSET): `Gelu` of opset 20, `Mish` of
//! opset 18 and the CRD order of `SpaceToDepth` of opset 28, written as the
//! opset-17 nodes that compute them (ONNX's function bodies; a reshape,
//! transpose and reshape for `SpaceToDepth`). Every node written carries
//! the annotations of the IR node; the last one takes its name and output.

use super::export::Writer;
use super::export_attrs::ints;
use crate::graph::NodeId;
use crate::ops::{DepthOrder, Op, SpaceToDepth, UnaryOp};
use crate::tensor::Tensor;
use onnx_ir::{AttributeProto, GraphProto, NodeProto};

/// An input of one node of a composition.
enum In {
    /// The IR node's input.
    X,
    /// The output of an earlier node.
    Step(usize),
    /// A float32 scalar constant.
    Const(f32),
    /// An int64 vector constant (a shape).
    Shape(Vec<i64>),
}

/// One node of a composition: op type, inputs, attributes.
type Node = (&'static str, Vec<In>, Vec<AttributeProto>);

fn plain(nodes: Vec<(&'static str, Vec<In>)>) -> Vec<Node> {
    nodes.into_iter().map(|(t, i)| (t, i, Vec::new())).collect()
}

/// `SpaceToDepth` in CRD order from an input of shape `x`.
fn space_to_depth_crd(b: usize, x: &[usize]) -> Vec<Node> {
    let [n, c, h, w] = [x[0], x[1], x[2], x[3]].map(|d| d as i64);
    let b = b as i64;
    vec![
        (
            "Reshape",
            vec![In::X, In::Shape(vec![n, c, h / b, b, w / b, b])],
            Vec::new(),
        ),
        ("Transpose", vec![In::Step(0)], vec![ints("perm", [0, 1, 3, 5, 2, 4])]),
        (
            "Reshape",
            vec![In::Step(1), In::Shape(vec![n, c * b * b, h / b, w / b])],
            Vec::new(),
        ),
    ]
}

/// The nodes that compute `op` on an input of shape `x`, or `None` when
/// the export opset has it.
fn steps(op: &Op, x: &[usize]) -> Option<Vec<Node>> {
    let u = match op {
        Op::Unary(u) => u,
        Op::SpaceToDepth(SpaceToDepth {
            block,
            order: DepthOrder::Crd,
        }) => return Some(space_to_depth_crd(*block, x)),
        _ => return None,
    };
    Some(plain(match u.op {
        UnaryOp::Gelu { tanh: false } => vec![
            ("Mul", vec![In::X, In::Const(std::f32::consts::FRAC_1_SQRT_2)]),
            ("Erf", vec![In::Step(0)]),
            ("Add", vec![In::Step(1), In::Const(1.0)]),
            ("Mul", vec![In::X, In::Step(2)]),
            ("Mul", vec![In::Step(3), In::Const(0.5)]),
        ],
        UnaryOp::Gelu { tanh: true } => vec![
            ("Mul", vec![In::X, In::X]),
            ("Mul", vec![In::Step(0), In::X]),
            ("Mul", vec![In::Step(1), In::Const(0.044_715)]),
            ("Add", vec![In::X, In::Step(2)]),
            (
                "Mul",
                vec![In::Step(3), In::Const((2.0 / std::f64::consts::PI).sqrt() as f32)],
            ),
            ("Tanh", vec![In::Step(4)]),
            ("Add", vec![In::Step(5), In::Const(1.0)]),
            ("Mul", vec![In::X, In::Step(6)]),
            ("Mul", vec![In::Step(7), In::Const(0.5)]),
        ],
        UnaryOp::Mish => vec![
            ("Softplus", vec![In::X]),
            ("Tanh", vec![In::Step(0)]),
            ("Mul", vec![In::X, In::Step(1)]),
        ],
        _ => return None,
    }))
}

impl Writer<'_> {
    /// Writes node `id` as its composition when it has one; false otherwise.
    pub(super) fn composed(&mut self, id: NodeId, g: &mut GraphProto) -> bool {
        let graph = self.graph;
        let node = graph.node(id);
        let x_shape = graph.fact(node.inputs[0]).map(|f| f.shape.clone()).unwrap_or_default();
        let Some(steps) = steps(&node.op, &x_shape) else {
            return false;
        };
        let x = self.names[&node.inputs[0]].clone();
        let meta = super::export::props(&node.annotations).metadata_props;
        let last = steps.len() - 1;
        let mut outs: Vec<String> = Vec::new();
        for (k, (op_type, inputs, attributes)) in steps.into_iter().enumerate() {
            let mut p = NodeProto::new();
            p.op_type = op_type.to_string();
            p.name = if k == last {
                node.name.clone()
            } else {
                self.fresh(&format!("{}.{}{k}", node.name, op_type.to_lowercase()))
            };
            for i in inputs {
                p.input.push(match i {
                    In::X => x.clone(),
                    In::Step(s) => outs[s].clone(),
                    In::Const(v) => self.operand(&node.name, &format!("c{k}"), Tensor::from_f32([], &[v])),
                    In::Shape(v) => self.operand(&node.name, &format!("shape{k}"), Tensor::from_i64([v.len()], &v)),
                });
            }
            p.attribute = attributes;
            let out = if k == last {
                self.names[&id.out(0)].clone()
            } else {
                p.name.clone()
            };
            p.output.push(out.clone());
            p.metadata_props = meta.clone();
            g.node.push(p);
            outs.push(out);
        }
        true
    }
}
