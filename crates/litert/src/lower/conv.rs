//! `Conv` as CONV_2D (weights OHWI) or DEPTHWISE_CONV_2D (weights
//! `[1, H, W, C·M]`), in float or on int8 tensors; padding LiteRT's SAME
//! or VALID cannot express becomes an explicit PAD.

use super::quant::{self, QConst};
use super::{Lower, Value, consts};
use crate::error::LiteRtError;
use crate::model::{Act, Elem, EmptyOptions, Options, Quant, Window};
use crate::schema::litert::BuiltinOperator as B;
use graph_ir::NodeId;
use graph_ir::ops::Conv;

/// How a window operator's padding is written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Padding {
    Valid,
    Same,
    /// `[top, left, bottom, right]` padded first, then VALID.
    Explicit([usize; 4]),
}

/// The padding giving ONNX's windows: the same first window and count.
/// `k` is the effective (dilated) kernel, `out` ONNX's output size.
pub(crate) fn padding(
    input: [usize; 2],
    k: [usize; 2],
    stride: [usize; 2],
    pads: [usize; 4],
    out: [usize; 2],
) -> Padding {
    let valid = (0..2).all(|i| input[i] >= k[i] && (input[i] - k[i]) / stride[i] + 1 == out[i]);
    if pads == [0; 4] && valid {
        return Padding::Valid;
    }
    let same = (0..2).all(|i| {
        let o = input[i].div_ceil(stride[i]);
        let total = ((o - 1) * stride[i] + k[i]).saturating_sub(input[i]);
        o == out[i] && pads[i] == total / 2
    });
    if same { Padding::Same } else { Padding::Explicit(pads) }
}

/// `t` padded by `pads` (`[top, left, bottom, right]` of an NHWC tensor)
/// with zeros (an int8 tensor: its zero point), or with `value` through
/// PADV2 when given.
pub(crate) fn pad_hw(l: &mut Lower, t: i32, pads: [usize; 4], value: Option<i32>, name: &str) -> i32 {
    let def = l.m.tensor(t).clone();
    let p = [
        0,
        0,
        pads[0] as i32,
        pads[2] as i32,
        pads[1] as i32,
        pads[3] as i32,
        0,
        0,
    ];
    let pt = l.m.const_i32(&format!("{name}_paddings"), vec![4, 2], &p, None);
    let shape = vec![
        def.shape[0],
        def.shape[1] + pads[0] + pads[2],
        def.shape[2] + pads[1] + pads[3],
        def.shape[3],
    ];
    let out =
        l.m.activation(&format!("{name}_padded"), def.elem, shape, def.quant.clone());
    match value {
        Some(v) => l.emit(B::PADV2, &[t, pt, v], &[out], Options::Empty(EmptyOptions::PadV2)),
        None => l.emit(B::PAD, &[t, pt], &[out], Options::Empty(EmptyOptions::Pad)),
    }
    out
}

pub(crate) fn conv(l: &mut Lower, id: NodeId, c: &Conv) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    let x = n.inputs[0];
    let xs = l.fact(x).shape.clone();
    let ws = l.fact(n.inputs[1]).shape.clone();
    let ys = n.outputs[0].shape.clone();
    if xs.len() != 4 {
        return Err(l.refuse(id, format!("a convolution of a rank-{} input", xs.len())));
    }
    let depthwise = c.group > 1 && c.group == xs[1] && ws[1] == 1;
    let k = [(ws[2] - 1) * c.dilations[0] + 1, (ws[3] - 1) * c.dilations[1] + 1];
    let pad = padding([xs[2], xs[3]], k, c.strides, c.pads, [ys[2], ys[3]]);
    let weights = l.value(n.inputs[1])?.clone();
    let bias = match n.inputs.get(2) {
        Some(b) => Some(l.value(*b)?.clone()),
        None => None,
    };
    let target = quant::target(l, id, true);
    let int8 = quant::int8_inputs(l, &[x]);
    let (input, out, act, wt, bt) = match (target, int8, &weights) {
        (Some(target), Some(xi), Value::QConst(wq)) => {
            let xi = xi[0];
            let (wt, bt, requantized) = int8_weights(l, &n.name, xi, wq, bias.as_ref(), depthwise)?;
            if requantized {
                l.notes.push(format!(
                    "{}: weights re-quantized symmetric per channel (LiteRT's int8 rule)",
                    n.name
                ));
            }
            let out = quant::output(l, &target)?;
            (xi, out, target.act, wt, bt)
        }
        _ => {
            let xf = l.float(x)?;
            let (wt, bt) = float_weights(l, &n.name, &weights, bias.as_ref(), ws[0], depthwise)?;
            let out = l.f32_out(id, 0);
            l.set(id.out(0), Value::T(out));
            (xf, out, Act::None, wt, bt)
        }
    };
    let (input, same) = match pad {
        Padding::Valid => (input, false),
        Padding::Same => (input, true),
        Padding::Explicit(p) => (pad_hw(l, input, p, None, &n.name), false),
    };
    let options = if depthwise {
        Options::Window(Window::Depthwise {
            same,
            stride: c.strides,
            dilation: c.dilations,
            multiplier: ws[0] / xs[1],
            act,
        })
    } else {
        Options::Window(Window::Conv {
            same,
            stride: c.strides,
            dilation: c.dilations,
            act,
        })
    };
    let code = if depthwise { B::DEPTHWISE_CONV_2D } else { B::CONV_2D };
    l.emit(code, &[input, wt, bt], &[out], options);
    Ok(())
}

/// The permutation from ONNX's `[M, C/g, kh, kw]` to the file's layout.
fn perm(depthwise: bool) -> [usize; 4] {
    if depthwise { [1, 2, 3, 0] } else { [0, 2, 3, 1] }
}

fn float_weights(
    l: &mut Lower,
    name: &str,
    w: &Value,
    b: Option<&Value>,
    channels: usize,
    depthwise: bool,
) -> Result<(i32, i32), LiteRtError> {
    let w = match w {
        Value::Const(t) => t.clone(),
        Value::QConst(q) => q.dequantized(),
        _ => return Err(weights_not_constant(l, name)),
    };
    let wt = consts::weights(l, &format!("{name}_weights"), &w, &perm(depthwise))?;
    let bname = format!("{name}_bias");
    let bt = match b {
        Some(Value::Const(t)) => consts::weights(l, &bname, t, &[0])?,
        Some(Value::QConst(q)) => consts::weights(l, &bname, &q.dequantized(), &[0])?,
        Some(_) => return Err(weights_not_constant(l, name)),
        None => l.m.const_f32(&bname, vec![channels], &vec![0.0; channels]),
    };
    Ok((wt, bt))
}

fn weights_not_constant(l: &Lower, name: &str) -> LiteRtError {
    LiteRtError::Internal {
        subgraph: l.subgraph.clone(),
        what: format!("{name}: weights or bias are not constants"),
    }
}

/// Int8 weights symmetric per output channel and int32 biases at scale
/// `input · weight`; whether anything was re-quantized.
fn int8_weights(
    l: &mut Lower,
    name: &str,
    input: i32,
    w: &QConst,
    b: Option<&Value>,
    depthwise: bool,
) -> Result<(i32, i32, bool), LiteRtError> {
    let mut w = w.clone();
    if w.scale.len() == 1 {
        w.axis = 0;
    }
    let (q, scales, mut requantized) = quant::symmetric(&w);
    let channels = w.shape[0];
    let bytes: Vec<u8> = q.iter().map(|v| *v as u8).collect();
    let (data, shape) = consts::permute(&bytes, &w.shape, &perm(depthwise), 1);
    let wq = Quant {
        scale: scales.clone(),
        zero_point: vec![0; channels],
        axis: if depthwise { 3 } else { 0 },
    };
    let wt =
        l.m.constant(&format!("{name}_weights"), Elem::I8, shape, data, Some(wq));
    let sx = l.m.tensor(input).quant.as_ref().map(|q| q.scale[0]).unwrap_or(1.0);
    let bscale: Vec<f32> = scales.iter().map(|s| s * sx).collect();
    let (values, exact) = match b {
        Some(Value::QConst(bq)) => {
            let same = bq.zero_point.iter().all(|z| *z == 0)
                && bq.values.len() == channels
                && (0..channels).all(|k| {
                    let s = if bq.scale.len() == 1 { bq.scale[0] } else { bq.scale[k] };
                    (s - bscale[k]).abs() <= 1e-6 * bscale[k].abs()
                });
            if same {
                (bq.values.iter().map(|v| *v as i32).collect(), true)
            } else {
                (quant::bias_values(&bq.reals(), &bscale), false)
            }
        }
        Some(Value::Const(t)) => {
            let reals = t.to_f32_vec().ok_or_else(|| weights_not_constant(l, name))?;
            (quant::bias_values(&reals, &bscale), false)
        }
        Some(_) => return Err(weights_not_constant(l, name)),
        None => (vec![0; channels], true),
    };
    requantized |= !exact;
    let bqp = Quant {
        scale: bscale,
        zero_point: vec![0; channels],
        axis: 0,
    };
    let bt =
        l.m.const_i32(&format!("{name}_bias"), vec![channels], &values, Some(bqp));
    Ok((wt, bt, requantized))
}

#[cfg(test)]
mod tests {
    use super::{Padding, padding};

    #[test]
    fn padding_is_valid_same_or_explicit_as_onnx_places_the_windows() {
        assert_eq!(padding([8, 8], [3, 3], [1, 1], [0; 4], [6, 6]), Padding::Valid);
        assert_eq!(padding([8, 8], [3, 3], [1, 1], [1, 1, 1, 1], [8, 8]), Padding::Same);
        // Stride 2 on an even input: SAME pads (0, 1), ONNX's (1, 1) start a row earlier.
        assert_eq!(
            padding([8, 8], [3, 3], [2, 2], [1, 1, 1, 1], [4, 4]),
            Padding::Explicit([1, 1, 1, 1])
        );
        assert_eq!(padding([7, 7], [3, 3], [2, 2], [1, 1, 1, 1], [4, 4]), Padding::Same);
        assert_eq!(padding([8, 8], [1, 1], [2, 2], [0; 4], [4, 4]), Padding::Valid);
    }
}
