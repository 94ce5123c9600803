//! The ONNX files' QDQ form in LiteRT's quantization rules: int8
//! activations with one scale and zero point per tensor (a uint8 tensor
//! becomes int8 by shifting its zero point and values by 128), int8
//! weights symmetric per output channel, int32 biases at scale
//! input·weight.

use super::{Lower, Value};
use crate::error::LiteRtError;
use crate::model::{Act, Elem, EmptyOptions, Options, Quant};
use crate::schema::litert::BuiltinOperator as B;
use graph_ir::ops::UnaryOp;
use graph_ir::{DType, NodeId, Op, Outlet};

/// A dequantized constant: integers, and the parameters giving their
/// real values `scale · (q − zero_point)` (per tensor, or per slice
/// along `axis`).
#[derive(Clone, Debug)]
pub(crate) struct QConst {
    pub values: Vec<i64>,
    pub shape: Vec<usize>,
    pub scale: Vec<f32>,
    pub zero_point: Vec<i64>,
    pub axis: usize,
}

impl QConst {
    /// The parameters of element `i`.
    fn params(&self, i: usize) -> (f32, i64) {
        if self.scale.len() == 1 {
            return (self.scale[0], self.zero_point[0]);
        }
        let inner: usize = self.shape[self.axis + 1..].iter().product();
        let k = (i / inner) % self.shape[self.axis];
        (self.scale[k], self.zero_point[k])
    }

    /// The real values.
    pub fn reals(&self) -> Vec<f32> {
        (0..self.values.len())
            .map(|i| {
                let (s, z) = self.params(i);
                s * (self.values[i] - z) as f32
            })
            .collect()
    }

    /// The real values as a float32 tensor.
    pub fn dequantized(&self) -> graph_ir::Tensor {
        graph_ir::Tensor::from_f32(self.shape.clone(), &self.reals())
    }
}

/// Scalar `f32` and integer constants at `scale` and `zero_point` of a
/// Q/DQ node; `None` when they are not constants.
fn scalar_params(l: &Lower, scale: Outlet, zp: Option<Outlet>) -> Option<(Vec<f32>, Vec<i64>, DType)> {
    let s = l.g.const_tensor(scale)?.to_f32_vec()?;
    let (z, dtype) = match zp {
        Some(z) => {
            let t = l.g.const_tensor(z)?;
            (t.to_i64_vec()?, t.dtype())
        }
        None => (vec![0; s.len()], DType::U8),
    };
    Some((s, z, dtype))
}

/// The zero point in int8 terms.
fn to_int8_zp(z: i64, dtype: DType) -> i64 {
    if dtype == DType::U8 { z - 128 } else { z }
}

/// Checks LiteRT's rules on a per-tensor activation scale and zero point.
fn check_params(l: &Lower, id: NodeId, s: f32, z: i64) -> Result<(), LiteRtError> {
    if !(s.is_finite() && s > 0.0) {
        return Err(l.quant_error(id, format!("scale {s}: LiteRT needs a positive finite scale")));
    }
    if !(-128..=127).contains(&z) {
        return Err(l.quant_error(id, format!("zero point {z} (as int8) is outside -128..127")));
    }
    Ok(())
}

/// The int8 parameters of a `QuantizeLinear` node's output.
pub(crate) fn q_params(l: &Lower, q: NodeId) -> Result<Quant, LiteRtError> {
    let n = l.g.node(q);
    let (s, z, dtype) = scalar_params(l, n.inputs[1], n.inputs.get(2).copied())
        .filter(|(s, _, _)| s.len() == 1)
        .ok_or_else(|| l.refuse(q, "a quantization without constant per-tensor scale and zero point"))?;
    let z = to_int8_zp(z[0], dtype);
    check_params(l, q, s[0], z)?;
    Ok(Quant::tensor(s[0], z))
}

/// The parameters of graph input `id`, a uint8/int8 tensor: those of the
/// `DequantizeLinear` nodes reading it, which must agree.
pub(crate) fn input_params(l: &Lower, id: NodeId) -> Result<Quant, LiteRtError> {
    let mut found: Option<Quant> = None;
    for (c, _) in l.g.consumers(id.out(0)) {
        let n = l.g.node(c);
        if !matches!(n.op, Op::DequantizeLinear(_)) {
            return Err(l.refuse(c, "reads a quantized subgraph input without dequantizing it"));
        }
        let s = l.g.const_tensor(n.inputs[1]).and_then(|t| t.to_f32_vec());
        let z = n.inputs.get(2).and_then(|z| l.g.const_tensor(*z));
        let (Some(s), Some(z)) = (s, z) else {
            return Err(l.refuse(c, "a dequantization without constant scale and zero point"));
        };
        let zs = z.to_i64_vec().unwrap_or_default();
        if s.len() != 1 || zs.len() != 1 {
            return Err(l.refuse(c, "a per-channel dequantization of an activation"));
        }
        let q = Quant::tensor(s[0], to_int8_zp(zs[0], z.dtype()));
        check_params(l, c, s[0], q.zero_point[0])?;
        match &found {
            Some(f) if *f != q => {
                return Err(l.quant_error(
                    c,
                    "dequantizes a subgraph input with parameters other readers do not use",
                ));
            }
            _ => found = Some(q),
        }
    }
    found.ok_or_else(|| l.refuse(id, "a quantized subgraph input nothing dequantizes"))
}

/// `DequantizeLinear`: of a constant, a [`QConst`]; of an int8 tensor
/// with the same parameters, that tensor seen as float ([`Value::Deq`]).
pub(crate) fn dequantize_node(l: &mut Lower, id: NodeId, axis: i64) -> Result<(), LiteRtError> {
    let n = l.g.node(id);
    let (x, scale, zp) = (n.inputs[0], n.inputs[1], n.inputs.get(2).copied());
    let (s, z, dtype) =
        scalar_params(l, scale, zp).ok_or_else(|| l.refuse(id, "a dequantization without constant parameters"))?;
    if let Some(bad) = s.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
        return Err(l.quant_error(id, format!("scale {bad}: LiteRT needs positive finite scales")));
    }
    match l.value(x)?.clone() {
        Value::Const(c) => {
            let values = c
                .to_i64_vec()
                .ok_or_else(|| l.refuse(id, format!("dequantizes a {} constant", c.dtype())))?;
            let rank = c.shape().len() as i64;
            let axis = if axis < 0 { axis + rank } else { axis }.max(0) as usize;
            let q = QConst {
                values,
                shape: c.shape().to_vec(),
                scale: s,
                zero_point: z,
                axis,
            };
            l.set(id.out(0), Value::QConst(q));
        }
        Value::T(t) | Value::Deq(t) if l.m.tensor(t).elem == Elem::I8 => {
            let have = l.m.tensor(t).quant.clone();
            let want = Quant::tensor(s[0], to_int8_zp(z[0], dtype));
            if s.len() != 1 || have.as_ref() != Some(&want) {
                return Err(l.quant_error(
                    id,
                    format!(
                        "dequantizes `{}` with scale {} and zero point {}, which it was not quantized with",
                        l.m.tensor(t).name,
                        s[0],
                        z[0]
                    ),
                ));
            }
            l.set(id.out(0), Value::Deq(t));
        }
        _ => return Err(l.refuse(id, "dequantizes a value that is not quantized")),
    }
    Ok(())
}

/// `QuantizeLinear` not absorbed by the node before it: a QUANTIZE
/// operator (float → int8, or int8 → int8 with other parameters), or a
/// constant quantized here.
pub(crate) fn quantize(l: &mut Lower, id: NodeId) -> Result<(), LiteRtError> {
    let n = l.g.node(id);
    let x = n.inputs[0];
    let q = q_params(l, id)?;
    let v = l.value(x)?.clone();
    let src = match v {
        Value::Deq(t) => t,
        Value::T(t) => t,
        _ => l.float(x)?,
    };
    let out = requantize(l, src, &q, &n.name.clone());
    l.set(id.out(0), Value::T(out));
    Ok(())
}

/// `t` as an int8 tensor with parameters `q`: `t` itself when it has
/// them, else a QUANTIZE operator.
pub(crate) fn requantize(l: &mut Lower, t: i32, q: &Quant, name: &str) -> i32 {
    let def = l.m.tensor(t).clone();
    if def.elem == Elem::I8 && def.quant.as_ref() == Some(q) {
        return t;
    }
    let out = l.m.activation(name, Elem::I8, def.shape, Some(q.clone()));
    l.emit(B::QUANTIZE, &[t], &[out], Options::Empty(EmptyOptions::Quantize));
    out
}

/// Where node `id`'s result goes when a quantized form can write it
/// directly: the `QuantizeLinear` after it (and a ReLU or ReLU6 between,
/// fused when `fuse`), with the nodes to absorb.
pub(crate) struct Target {
    pub q: NodeId,
    pub act: Act,
    pub absorbed: Vec<NodeId>,
}

pub(crate) fn target(l: &Lower, id: NodeId, fuse: bool) -> Option<Target> {
    let g = l.g;
    let only = |o: Outlet| -> Option<NodeId> {
        let c = g.consumers(o);
        (c.len() == 1 && !g.is_output(o)).then(|| c[0].0)
    };
    let c = only(id.out(0))?;
    match &g.node(c).op {
        Op::QuantizeLinear(_) => Some(Target {
            q: c,
            act: Act::None,
            absorbed: vec![c],
        }),
        Op::Unary(u) if fuse => {
            let act = match u.op {
                UnaryOp::Relu => Act::Relu,
                UnaryOp::Clip {
                    min: Some(lo),
                    max: Some(hi),
                } if lo == 0.0 && hi == 6.0 => Act::Relu6,
                _ => return None,
            };
            let q = only(c.out(0))?;
            matches!(g.node(q).op, Op::QuantizeLinear(_)).then(|| Target {
                q,
                act,
                absorbed: vec![c, q],
            })
        }
        _ => None,
    }
}

/// The int8 tensors of the activations at `inputs`, when every one is.
pub(crate) fn int8_inputs(l: &Lower, inputs: &[Outlet]) -> Option<Vec<i32>> {
    inputs
        .iter()
        .map(|o| match l.values_get(*o) {
            Some(Value::Deq(t)) => Some(*t),
            Some(Value::T(t)) if l.m.tensor(*t).elem == Elem::I8 => Some(*t),
            _ => None,
        })
        .collect()
}

/// Writes the result of a quantized form of node `id` into a new int8
/// tensor for `target`, absorbing the nodes it covers; returns it.
pub(crate) fn output(l: &mut Lower, target: &Target) -> Result<i32, LiteRtError> {
    let q = q_params(l, target.q)?;
    let qn = l.g.node(target.q);
    let shape = super::nhwc(&qn.outputs[0].shape);
    let t = l.m.activation(&qn.name.clone(), Elem::I8, shape, Some(q));
    for a in &target.absorbed {
        l.absorb(*a);
    }
    l.set(target.q.out(0), Value::T(t));
    Ok(t)
}

/// The input of a one-input operator, int8 when a quantized form
/// applies: `(input tensor, int8 target)`.
pub(crate) fn operand(l: &mut Lower, id: NodeId, fuse: bool) -> Result<(i32, Option<Target>), LiteRtError> {
    let x = l.g.node(id).inputs[0];
    if let (Some(t), Some(xi)) = (target(l, id, fuse), int8_inputs(l, &[x])) {
        return Ok((xi[0], Some(t)));
    }
    Ok((l.float(x)?, None))
}

/// The output tensor of an operator that keeps its input's quantization
/// (`same_params`) or takes the target's, and the step that finishes it.
pub(crate) fn result(
    l: &mut Lower,
    id: NodeId,
    input: i32,
    target: &Option<Target>,
    same_params: bool,
) -> Result<(i32, Option<i32>), LiteRtError> {
    match target {
        None => {
            let out = l.f32_out(id, 0);
            l.set(id.out(0), Value::T(out));
            Ok((out, None))
        }
        Some(t) if !same_params => Ok((output(l, t)?, None)),
        Some(t) => {
            let def = l.m.tensor(input).clone();
            if def.quant.as_ref() == Some(&q_params(l, t.q)?) {
                return Ok((output(l, t)?, None));
            }
            let shape = super::nhwc(&l.g.node(id).outputs[0].shape);
            let name = l.g.node(id).name.clone();
            let tmp = l.m.activation(&name, Elem::I8, shape, def.quant.clone());
            let out = output(l, t)?;
            Ok((tmp, Some(out)))
        }
    }
}

/// Requantizes `tmp` into `out` where the operator had to keep its
/// input's parameters.
pub(crate) fn finish(l: &mut Lower, tmp: i32, out: Option<i32>) {
    if let Some(out) = out {
        let options = Options::Empty(EmptyOptions::Quantize);
        l.emit(B::QUANTIZE, &[tmp], &[out], options);
    }
}

/// [`operand`] for an operator whose int8 kernel fixes its output
/// parameters to `fixed`: float where the ONNX file's differ.
pub(crate) fn operand_fixed(
    l: &mut Lower,
    id: NodeId,
    fixed: Option<&Quant>,
) -> Result<(i32, Option<Target>), LiteRtError> {
    let (input, target) = operand(l, id, false)?;
    if let (Some(t), Some(fixed)) = (&target, fixed)
        && q_params(l, t.q)? != *fixed
    {
        return Ok((l.float(l.g.node(id).inputs[0])?, None));
    }
    Ok((input, target))
}

/// Biases at `scales`, from their real values (round half to even,
/// saturating).
pub(crate) fn bias_values(reals: &[f32], scales: &[f32]) -> Vec<i32> {
    reals
        .iter()
        .zip(scales)
        .map(|(r, s)| (r / s).round_ties_even().clamp(i32::MIN as f32, i32::MAX as f32) as i32)
        .collect()
}

/// Symmetric int8 weights per slice along `axis` of `c`'s real values
/// (LiteRT's rule: zero points 0, values in -127..127), as the file
/// stores them after `perm`; the scales, and whether `c` had to be
/// re-quantized to get there.
pub(crate) fn symmetric(c: &QConst) -> (Vec<i8>, Vec<f32>, bool) {
    let exact = c.zero_point.iter().all(|z| *z == 0) && c.values.iter().all(|v| (-127..=127).contains(v));
    if exact {
        let scales = if c.scale.len() == 1 {
            vec![c.scale[0]; c.shape[c.axis]]
        } else {
            c.scale.clone()
        };
        return (c.values.iter().map(|v| *v as i8).collect(), scales, false);
    }
    let reals = c.reals();
    let channels = c.shape[c.axis];
    let inner: usize = c.shape[c.axis + 1..].iter().product();
    let mut peak = vec![0.0f32; channels];
    for (i, r) in reals.iter().enumerate() {
        let k = (i / inner) % channels;
        peak[k] = peak[k].max(r.abs());
    }
    let scales: Vec<f32> = peak.iter().map(|p| if *p > 0.0 { p / 127.0 } else { 1.0 }).collect();
    let q = reals
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (r / scales[(i / inner) % channels])
                .round_ties_even()
                .clamp(-127.0, 127.0) as i8
        })
        .collect();
    (q, scales, true)
}

impl Lower<'_> {
    pub(crate) fn values_get(&self, o: Outlet) -> Option<&Value> {
        self.value(o).ok()
    }

    /// An error about quantization parameters LiteRT cannot take at node `id`.
    pub(crate) fn quant_error(&self, id: NodeId, reason: impl Into<String>) -> LiteRtError {
        LiteRtError::Quantization {
            subgraph: self.subgraph.clone(),
            node: self.g.node(id).name.clone(),
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{QConst, symmetric};

    #[test]
    fn symmetric_weights_are_kept_and_others_requantized_per_channel() {
        let w = QConst {
            values: vec![-127, 5, 127, 3],
            shape: vec![2, 2],
            scale: vec![0.5, 0.25],
            zero_point: vec![0, 0],
            axis: 0,
        };
        let (q, s, requantized) = symmetric(&w);
        assert_eq!((q, s, requantized), (vec![-127, 5, 127, 3], vec![0.5, 0.25], false));
        let asymmetric = QConst {
            zero_point: vec![10, 0],
            ..w
        };
        let (q, s, requantized) = symmetric(&asymmetric);
        assert!(requantized);
        // Channel 0's reals 0.5·(-137, -5) = (-68.5, -2.5): scale 68.5/127.
        assert!((s[0] - 68.5 / 127.0).abs() < 1e-6, "{s:?}");
        assert_eq!(q[0], -127);
        assert_eq!(q[2..], [127, 3]);
    }
}
