//! An operator's attributes as ONNX writes them at
//! [`EXPORT_OPSET`](super::EXPORT_OPSET), and the operands the IR keeps as
//! attributes but ONNX takes as inputs (written as initializers).

use super::ExportError;
use super::export::{EXPORT_OPSET, Writer};
use crate::graph::Node;
use crate::ops::*;
use crate::tensor::{Fact, Tensor};
use onnx_ir::{AttributeProto, AttributeType, NodeProto};

impl Writer<'_> {
    /// Writes `node`'s attributes and operand inputs into `p`; refuses a
    /// form the export opset cannot express.
    pub(super) fn attributes(&mut self, node: &Node, p: &mut NodeProto) -> Result<(), ExportError> {
        match &node.op {
            Op::Input(_) | Op::Const(_) => unreachable!("written as graph inputs and initializers"),
            Op::Unary(u) => self.unary(node, u, p),
            Op::Split(_) | Op::Slice(_) | Op::Reshape(_) | Op::Tile(_) | Op::Reduce(_) | Op::Pad(_) => {
                self.operands(node, p)
            }
            Op::Resize(r) => self.resize(node, r, p),
            Op::Pool(pool) => return pool_attributes(self.graph.fact(node.inputs[0]), node, pool, &mut p.attribute),
            _ => plain_attributes(self.graph, node, &mut p.attribute),
        }
        Ok(())
    }

    /// A unary operator's parameters; Clip's bounds become inputs.
    fn unary(&mut self, node: &Node, u: &Unary, p: &mut NodeProto) {
        let a = &mut p.attribute;
        match u.op {
            UnaryOp::HardSigmoid { alpha, beta } => {
                a.push(float("alpha", alpha));
                a.push(float("beta", beta));
            }
            UnaryOp::LeakyRelu { alpha } | UnaryOp::Elu { alpha } => a.push(float("alpha", alpha)),
            UnaryOp::Selu { alpha, gamma } => {
                a.push(float("alpha", alpha));
                a.push(float("gamma", gamma));
            }
            UnaryOp::Clip { min, max } => {
                let name = node.name.clone();
                let min = min.map(|v| self.operand(&name, "min", Tensor::from_f32([], &[v])));
                let max = max.map(|v| self.operand(&name, "max", Tensor::from_f32([], &[v])));
                match (min, max) {
                    (Some(lo), Some(hi)) => p.input.extend([lo, hi]),
                    (Some(lo), None) => p.input.push(lo),
                    (None, Some(hi)) => p.input.extend([String::new(), hi]),
                    (None, None) => {}
                }
            }
            _ => {}
        }
    }

    /// The operators whose IR attributes are ONNX inputs at the export
    /// opset: split sizes, slice bounds, target shapes, repeats, sum axes,
    /// pads and the pad value.
    fn operands(&mut self, node: &Node, p: &mut NodeProto) {
        let a = &mut p.attribute;
        match &node.op {
            Op::Split(s) => {
                a.push(int("axis", s.axis));
                let sizes: Vec<i64> = usizes(&s.sizes);
                let name = self.operand(&node.name, "split", Tensor::from_i64([sizes.len()], &sizes));
                p.input.push(name);
            }
            Op::Slice(s) => {
                for (what, v) in [
                    ("starts", &s.starts),
                    ("ends", &s.ends),
                    ("axes", &s.axes),
                    ("steps", &s.steps),
                ] {
                    let name = self.operand(&node.name, what, Tensor::from_i64([v.len()], v));
                    p.input.push(name);
                }
            }
            Op::Reshape(r) => {
                if r.allowzero {
                    a.push(int("allowzero", 1));
                }
                let name = self.operand(&node.name, "shape", Tensor::from_i64([r.shape.len()], &r.shape));
                p.input.push(name);
            }
            Op::Reduce(r) => {
                if !r.axes.is_empty() {
                    match r.kind {
                        ReduceKind::Mean => a.push(ints("axes", r.axes.iter().copied())),
                        ReduceKind::Sum => {
                            let name = node.name.clone();
                            let axes = self.operand(&name, "axes", Tensor::from_i64([r.axes.len()], &r.axes));
                            p.input.push(axes);
                        }
                    }
                }
                a.push(int("keepdims", r.keepdims as i64));
            }
            Op::Tile(t) => {
                let name = node.name.clone();
                let reps = usizes(&t.repeats);
                let reps = self.operand(&name, "repeats", Tensor::from_i64([reps.len()], &reps));
                p.input.push(reps);
            }
            Op::Pad(pd) => {
                a.push(string("mode", pd.mode.onnx_name()));
                let name = node.name.clone();
                let pads = self.operand(&name, "pads", Tensor::from_i64([pd.pads.len()], &pd.pads));
                p.input.push(pads);
                if pd.mode == PadMode::Constant {
                    let v = self.operand(&name, "value", Tensor::from_f32([], &[pd.value]));
                    p.input.push(v);
                }
            }
            _ => unreachable!("only operators with operand inputs"),
        }
    }

    /// Resize's mode attributes; its scales or sizes become inputs after
    /// an empty `roi`.
    fn resize(&mut self, node: &Node, r: &Resize, p: &mut NodeProto) {
        let name = node.name.clone();
        let a = &mut p.attribute;
        a.push(string("coordinate_transformation_mode", r.coord.onnx_name()));
        match r.mode {
            ResizeMode::Nearest(m) => {
                a.push(string("mode", "nearest"));
                a.push(string("nearest_mode", m.onnx_name()));
            }
            ResizeMode::Linear => a.push(string("mode", "linear")),
            ResizeMode::Cubic {
                a: coeff,
                exclude_outside,
            } => {
                a.push(string("mode", "cubic"));
                a.push(float("cubic_coeff_a", coeff));
                a.push(int("exclude_outside", exclude_outside as i64));
            }
        }
        p.input.push(String::new());
        match r.target {
            ResizeTarget::Scales([h, w]) => {
                let scales = self.operand(&name, "scales", Tensor::from_f32([4], &[1.0, 1.0, h, w]));
                p.input.push(scales);
            }
            ResizeTarget::Sizes(_) => {
                let out = &node.outputs[0].shape;
                let sizes = usizes(out);
                let sizes = self.operand(&name, "sizes", Tensor::from_i64([4], &sizes));
                p.input.extend([String::new(), sizes]);
            }
        }
    }
}

/// The attributes of an operator that ONNX writes as attributes only.
fn plain_attributes(graph: &crate::graph::Graph, node: &Node, a: &mut Vec<AttributeProto>) {
    match &node.op {
        Op::Conv(c) => {
            let w = graph.fact(node.inputs[1]).expect("checked graph");
            a.push(ints("kernel_shape", usizes(&w.shape[2..])));
            a.push(ints("strides", usizes(&c.strides)));
            a.push(ints("pads", usizes(&c.pads)));
            a.push(ints("dilations", usizes(&c.dilations)));
            a.push(int("group", c.group as i64));
        }
        Op::BatchNorm(b) => {
            a.push(float("epsilon", b.epsilon));
            a.push(float("momentum", b.momentum));
        }
        Op::Binary(_) | Op::GlobalAveragePool(_) | Op::GlobalMaxPool(_) | Op::MatMul(_) => {}
        Op::LayerNorm(n) => {
            a.push(int("axis", n.axis));
            a.push(float("epsilon", n.epsilon));
        }
        Op::DepthToSpace(d) => {
            a.push(int("blocksize", d.block as i64));
            a.push(string("mode", d.order.onnx_name()));
        }
        Op::SpaceToDepth(s) => a.push(int("blocksize", s.block as i64)),
        Op::QuantizeLinear(q) => a.push(int("axis", q.axis)),
        Op::DequantizeLinear(d) => a.push(int("axis", d.axis)),
        Op::Cast(c) => a.push(int("to", c.to.onnx_code() as i64)),
        Op::Concat(c) => a.push(int("axis", c.axis)),
        Op::Softmax(sm) => a.push(int("axis", sm.axis)),
        Op::InstanceNorm(n) => a.push(float("epsilon", n.epsilon)),
        Op::Lrn(l) => {
            a.push(int("size", l.size as i64));
            a.push(float("alpha", l.alpha));
            a.push(float("beta", l.beta));
            a.push(float("bias", l.bias));
        }
        Op::Flatten(f) => a.push(int("axis", f.axis)),
        Op::Transpose(t) => a.push(ints("perm", usizes(&t.perm))),
        Op::ConvTranspose(c) => {
            let w = graph.fact(node.inputs[1]).expect("checked graph");
            a.push(ints("kernel_shape", usizes(&w.shape[2..])));
            a.push(ints("strides", usizes(&c.strides)));
            a.push(ints("pads", usizes(&c.pads)));
            a.push(ints("dilations", usizes(&c.dilations)));
            a.push(ints("output_padding", usizes(&c.output_padding)));
            a.push(int("group", c.group as i64));
        }
        Op::Gather(gt) => a.push(int("axis", gt.axis)),
        Op::Gemm(gm) => {
            a.push(float("alpha", gm.alpha));
            a.push(float("beta", gm.beta));
            a.push(int("transA", gm.trans_a as i64));
            a.push(int("transB", gm.trans_b as i64));
        }
        Op::Input(_)
        | Op::Const(_)
        | Op::Unary(_)
        | Op::Split(_)
        | Op::Slice(_)
        | Op::Reshape(_)
        | Op::Tile(_)
        | Op::Reduce(_)
        | Op::Pad(_)
        | Op::Resize(_)
        | Op::Pool(_) => unreachable!("written by Writer::attributes"),
    }
}

/// A pooling window's attributes; refuses an average pool with
/// dilations, which needs opset 19.
fn pool_attributes(x: Option<&Fact>, node: &Node, pool: &Pool, a: &mut Vec<AttributeProto>) -> Result<(), ExportError> {
    a.push(ints("kernel_shape", usizes(&pool.kernel)));
    a.push(ints("strides", usizes(&pool.strides)));
    a.push(ints("pads", usizes(&pool.pads)));
    a.push(int("ceil_mode", ceil_needed(pool, x, &node.outputs[0]) as i64));
    match pool.kind {
        PoolKind::Max => a.push(ints("dilations", usizes(&pool.dilations))),
        PoolKind::Average { count_include_pad } => {
            if pool.dilations != [1, 1] {
                return Err(ExportError::Node {
                    node: node.name.clone(),
                    op: node.op.name(),
                    opset: EXPORT_OPSET,
                    reason: "AveragePool dilations need opset 19".to_string(),
                });
            }
            a.push(int("count_include_pad", count_include_pad as i64));
        }
    }
    Ok(())
}

fn attr(name: &str) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.to_string();
    a
}

pub(super) fn int(name: &str, v: i64) -> AttributeProto {
    let mut a = attr(name);
    a.type_ = AttributeType::INT.into();
    a.i = v;
    a
}

pub(super) fn ints(name: &str, v: impl IntoIterator<Item = i64>) -> AttributeProto {
    let mut a = attr(name);
    a.type_ = AttributeType::INTS.into();
    a.ints = v.into_iter().collect();
    a
}

pub(super) fn float(name: &str, v: f32) -> AttributeProto {
    let mut a = attr(name);
    a.type_ = AttributeType::FLOAT.into();
    a.f = v;
    a
}

pub(super) fn string(name: &str, v: &str) -> AttributeProto {
    let mut a = attr(name);
    a.type_ = AttributeType::STRING.into();
    a.s = v.as_bytes().to_vec().into();
    a
}

/// Whether `pool` must be written with `ceil_mode`: only where rounding
/// down would give fewer windows than it has. Where a ceiling's last
/// window would start in the end padding, ONNX drops it (and opset-17 shape
/// inference does not), leaving the floor's count: written without
/// `ceil_mode`, the windows and their divisors are the same.
fn ceil_needed(pool: &Pool, x: Option<&Fact>, out: &Fact) -> bool {
    let Some(x) = x.filter(|x| x.rank() == 4 && pool.ceil_mode) else {
        return pool.ceil_mode;
    };
    (0..2).any(|i| {
        let pads = (pool.pads[i], pool.pads[i + 2]);
        let floor = crate::ops::window_out(
            x.shape[2 + i],
            pool.kernel[i],
            pool.strides[i],
            pool.dilations[i],
            pads,
            false,
        );
        floor.map_or(true, |f| f != out.shape[2 + i])
    })
}

fn usizes(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}
