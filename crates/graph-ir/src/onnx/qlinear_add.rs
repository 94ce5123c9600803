//! A QDQ addition as onnxruntime's `QLinearAdd` computes it on x86.
//!
//! With `rA = sA / sC` and `rB = sB / sC` in float32, onnxruntime's AVX2
//! kernel computes `fixed = zC − fma(rA, zA, rB·zB)`, then
//! `t = fma(a, rA, fma(b, rB, fixed))` (each `fma` rounded once to
//! float32), and writes `t` rounded half to even, saturated to the output
//! type. The float32 form the file states, `((a − zA)·sA + (b − zB)·sB) /
//! sC`, rounds about four values in a million differently. The rewrite
//! states the kernel's arithmetic in ONNX nodes: each `fma` is a float64
//! multiply-add (exact: an 8-bit integer times a float32 has at most 32
//! significant bits) cast to float32 once.

use super::qlinear_view::{self as qlinear, Fusion, View, eight_bit, lowest, scalar};
use crate::tensor::DType;

/// The rewrite of the `Add` at `add`, when both its inputs are dequantized
/// activations (not constants) of the output's 8-bit type, per tensor, and
/// its output is quantized (see [`super::fuse_qdq`]).
pub(super) fn fusion(view: &View, add: usize) -> Option<Fusion> {
    let node = view.node(add);
    if node.input.len() != 2 || node.output.len() != 1 {
        return None;
    }
    let operand = |value: &str| {
        let d = view.dequantize(value)?;
        if view.dtype(&d.input[0]).is_some() {
            return None;
        }
        let (scale, zero) = (view.constant(&d.input[1])?, view.constant(&d.input[2])?);
        (scale.1.len() == 1 && zero.1.len() == 1 && eight_bit(zero.0))
            .then(|| (d.input[0].clone(), scale.1[0] as f32, zero.0, zero.1[0] as f32))
    };
    let (a, sa, ta, za) = operand(&node.input[0])?;
    let (b, sb, tb, zb) = operand(&node.input[1])?;
    let out = view.quantized_output(&node.output[0])?;
    if ta != out.zero_type || tb != out.zero_type {
        return None;
    }
    let (sc, zc) = (out.scale as f32, out.zero as f32);
    let ratio_a = sa / sc;
    let ratio_b = sb / sc;
    let fixed_part = zc - ratio_a.mul_add(za, ratio_b * zb);
    let high: f32 = if out.zero_type == DType::U8 { 255.0 } else { 127.0 };
    let y = out.node.output[0].clone();
    let v = view.fresh(
        &format!("{y}.qadd"),
        [
            "ra", "rb", "fixed", "lo", "hi", "a", "b", "bt", "t1", "t1f", "t1d", "at", "t2", "t2f", "round", "clip",
        ],
    )?;
    let [
        ra,
        rb,
        fixed,
        lo,
        hi,
        a64,
        b64,
        bt,
        t1,
        t1f,
        t1d,
        at,
        t2,
        t2f,
        round,
        clip,
    ] = std::array::from_fn(|i| v[i].as_str());
    let initializers = vec![
        scalar(ra, DType::F64, &f64::from(ratio_a).to_le_bytes()),
        scalar(rb, DType::F64, &f64::from(ratio_b).to_le_bytes()),
        scalar(fixed, DType::F64, &f64::from(fixed_part).to_le_bytes()),
        scalar(lo, DType::F32, &(lowest(out.zero_type) as f32).to_le_bytes()),
        scalar(hi, DType::F32, &high.to_le_bytes()),
    ];
    let op = |op: &str, inputs: &[&str], output: &str| qlinear::node(op, inputs, output, node);
    let cast = |input: &str, to: DType, output: &str| qlinear::cast(input, to, output, node);
    let nodes = vec![
        cast(&a, DType::F64, a64),
        cast(&b, DType::F64, b64),
        op("Mul", &[b64, rb], bt),
        op("Add", &[bt, fixed], t1),
        cast(t1, DType::F32, t1f),
        cast(t1f, DType::F64, t1d),
        op("Mul", &[a64, ra], at),
        op("Add", &[at, t1d], t2),
        cast(t2, DType::F32, t2f),
        op("Round", &[t2f], round),
        op("Clip", &[round, lo, hi], clip),
        cast(clip, out.zero_type, &y),
    ];
    Some(Fusion {
        removed: [add].into_iter().chain(out.activation).collect(),
        quantize: out.index,
        nodes,
        initializers,
    })
}
