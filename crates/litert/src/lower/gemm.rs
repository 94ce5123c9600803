//! `Gemm` and `MatMul` by a constant as FULLY_CONNECTED (weights
//! `[M, K]`), in float or on int8 tensors. After a `Flatten` of an NHWC
//! tensor the weights' columns are permuted to NHWC order instead of the
//! activations being transposed back.

use super::quant;
use super::{Lower, Value, consts};
use crate::error::LiteRtError;
use crate::model::{Act, Elem, Options, Quant};
use crate::schema::litert::BuiltinOperator as B;
use graph_ir::NodeId;

/// Column `j` of the file's weights reads ONNX column `cols[j]`.
fn columns(k: usize, chw: Option<[usize; 3]>) -> Vec<usize> {
    match chw {
        None => (0..k).collect(),
        Some([c, h, w]) => {
            let mut cols = Vec::with_capacity(k);
            for y in 0..h {
                for x in 0..w {
                    for ch in 0..c {
                        cols.push(ch * h * w + y * w + x);
                    }
                }
            }
            cols
        }
    }
}

/// Element `(m, j)` of the file's `[M, K]` weights from ONNX's matrix
/// `b` (`[K, M]`, or `[M, K]` when `trans_b`).
fn pick<T: Copy>(b: &[T], m: usize, col: usize, rows: usize, kk: usize, trans_b: bool) -> T {
    if trans_b { b[m * kk + col] } else { b[col * rows + m] }
}

pub(crate) fn gemm(
    l: &mut Lower,
    id: NodeId,
    alpha: f32,
    beta: f32,
    trans_a: bool,
    trans_b: bool,
) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    let a = n.inputs[0];
    if trans_a {
        return Err(l.refuse(id, "a Gemm with transA"));
    }
    if l.fact(a).rank() != 2 {
        return Err(l.refuse(id, format!("a matrix product of a rank-{} input", l.fact(a).rank())));
    }
    let bs = l.fact(n.inputs[1]).shape.clone();
    if bs.len() != 2 {
        return Err(l.refuse(id, "a matrix product by a weight that is not a matrix"));
    }
    let (kk, m) = if trans_b { (bs[1], bs[0]) } else { (bs[0], bs[1]) };
    let (src, chw) = match l.value(a)?.clone() {
        Value::FlatNhwc { flat, chw, .. } => (Some(flat), Some(chw)),
        _ => (None, None),
    };
    let cols = columns(kk, chw);
    let weights = l.value(n.inputs[1])?.clone();
    let bias = match n.inputs.get(2) {
        Some(b) => Some(l.value(*b)?.clone()),
        None => None,
    };
    let target = quant::target(l, id, true);
    let int8 = match src {
        Some(f) if l.m.tensor(f).elem == Elem::I8 => Some(vec![f]),
        Some(_) => None,
        None => quant::int8_inputs(l, &[a]),
    };
    if let (Some(t), Some(x), Value::QConst(wq), true) = (&target, int8, &weights, alpha == 1.0 && beta == 1.0) {
        return int8_fc(l, id, t, x[0], wq, bias.as_ref(), &cols, trans_b);
    }
    let x = match src {
        Some(f) if l.m.tensor(f).elem == Elem::F32 => f,
        Some(f) => l.dequantize(f),
        None => l.float(a)?,
    };
    let (elem, raw) = float_data(l, id, &weights)?;
    let size = elem.size();
    let mut data = vec![0u8; m * kk * size];
    for i in 0..m * kk {
        let src = if trans_b {
            (i / kk) * kk + cols[i % kk]
        } else {
            cols[i % kk] * m + i / kk
        };
        data[i * size..(i + 1) * size].copy_from_slice(&raw[src * size..(src + 1) * size]);
    }
    let data = scaled(l, id, elem, data, alpha)?;
    let wt = consts::float_tensor(l, &format!("{}_weights", n.name), elem, vec![m, kk], data);
    let bname = format!("{}_bias", n.name);
    let bt = match &bias {
        Some(b) => {
            let (elem, raw) = float_data(l, id, b)?;
            if raw.len() != m * elem.size() {
                return Err(l.refuse(id, "a bias that is not one value per output"));
            }
            let raw = scaled(l, id, elem, raw, beta)?;
            consts::float_tensor(l, &bname, elem, vec![m], raw)
        }
        None => l.m.const_f32(&bname, vec![m], &vec![0.0; m]),
    };
    let out = l.f32_out(id, 0);
    l.set(id.out(0), Value::T(out));
    l.emit(
        B::FULLY_CONNECTED,
        &[x, wt, bt],
        &[out],
        Options::FullyConnected { act: Act::None },
    );
    Ok(())
}

/// The element type and raw data of a float or dequantized constant.
fn float_data(l: &Lower, id: NodeId, v: &Value) -> Result<(Elem, Vec<u8>), LiteRtError> {
    match v {
        Value::Const(c) => match (c.dtype(), c.raw()) {
            (graph_ir::DType::F32, Some(d)) => Ok((Elem::F32, d.to_vec())),
            (graph_ir::DType::F16, Some(d)) => Ok((Elem::F16, d.to_vec())),
            _ => Err(l.refuse(id, format!("a matrix product by a {} constant", c.dtype()))),
        },
        Value::QConst(q) => Ok((Elem::F32, consts::f32_bytes(&q.reals()))),
        _ => Err(l.refuse(id, "a matrix product by weights that are not constants")),
    }
}

/// `data` times `k` (float32 only; float16 data only at `k` = 1).
fn scaled(l: &Lower, id: NodeId, elem: Elem, data: Vec<u8>, k: f32) -> Result<Vec<u8>, LiteRtError> {
    if k == 1.0 {
        return Ok(data);
    }
    if elem != Elem::F32 {
        return Err(l.refuse(id, "a Gemm scaling float16 weights by alpha or beta"));
    }
    let v: Vec<f32> = data
        .chunks_exact(4)
        .map(|c| k * f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(consts::f32_bytes(&v))
}

/// The int8 FULLY_CONNECTED of node `id` writing `t`'s target.
#[allow(clippy::too_many_arguments)]
fn int8_fc(
    l: &mut Lower,
    id: NodeId,
    t: &quant::Target,
    x: i32,
    wq: &quant::QConst,
    bias: Option<&Value>,
    cols: &[usize],
    trans_b: bool,
) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    let (m, kk) = (if trans_b { wq.shape[0] } else { wq.shape[1] }, cols.len());
    let mut w = wq.clone();
    w.values = (0..m * kk)
        .map(|i| pick(&wq.values, i / kk, cols[i % kk], m, kk, trans_b))
        .collect();
    let per_channel = wq.scale.len() > 1;
    w.shape = vec![m, kk];
    w.axis = 0;
    if per_channel && (trans_b != (wq.axis == 0)) {
        return Err(l.quant_error(id, "weights quantized per input feature, which LiteRT cannot take"));
    }
    let (q, scales, requantized) = quant::symmetric(&w);
    if requantized {
        l.notes.push(format!(
            "{}: weights re-quantized symmetric per channel (LiteRT's int8 rule)",
            n.name
        ));
    }
    let wqp = Quant {
        scale: scales.clone(),
        zero_point: vec![0; m],
        axis: 0,
    };
    let data = q.iter().map(|v| *v as u8).collect();
    let wt =
        l.m.constant(&format!("{}_weights", n.name), Elem::I8, vec![m, kk], data, Some(wqp));
    let sx = l.m.tensor(x).quant.as_ref().map(|q| q.scale[0]).unwrap_or(1.0);
    let bscale: Vec<f32> = scales.iter().map(|s| s * sx).collect();
    let reals = match bias {
        Some(Value::QConst(b)) => b.reals(),
        Some(Value::Const(c)) => c.to_f32_vec().unwrap_or_default(),
        _ => vec![0.0; m],
    };
    if reals.len() != m {
        return Err(l.refuse(id, "a bias that is not one value per output"));
    }
    let bq = quant::bias_values(&reals, &bscale);
    let bqp = Quant {
        scale: bscale,
        zero_point: vec![0; m],
        axis: 0,
    };
    let bt = l.m.const_i32(&format!("{}_bias", n.name), vec![m], &bq, Some(bqp));
    let out = quant::output(l, t)?;
    l.emit(
        B::FULLY_CONNECTED,
        &[x, wt, bt],
        &[out],
        Options::FullyConnected { act: t.act },
    );
    Ok(())
}
