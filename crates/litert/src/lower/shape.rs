//! Operators that move data: Concat (axis mapped; int8 inputs first
//! requantized to the output's parameters, as delegates need), Reshape and Flatten
//! (direct where NHWC and NCHW orders agree, through transposes
//! otherwise), Transpose (composed with the layout change), Pad, Slice,
//! Split, Resize, and Softmax over the channel. On an int8 tensor they
//! keep its quantization, and the result stays int8.

use super::quant::{finish, result};
use super::{Lower, TO_NCHW, TO_NHWC, Value, consts, nhwc, nhwc_axis, quant};
use crate::error::LiteRtError;
use crate::model::{Act, Elem, EmptyOptions, Options, Quant};
use crate::schema::litert::BuiltinOperator as B;
use graph_ir::NodeId;
use graph_ir::ops::{CoordMode, NearestMode, Pad, PadMode, Resize, ResizeMode, Slice, Split};

/// The input of a data-moving operator: its int8 tensor where it has one
/// (the result is then int8 too), else its float tensor.
fn moved(l: &mut Lower, id: NodeId) -> Result<(i32, bool), LiteRtError> {
    let x = l.g.node(id).inputs[0];
    if let Some(t) = quant::int8_inputs(l, &[x]) {
        return Ok((t[0], true));
    }
    Ok((l.float(x)?, false))
}

/// A new tensor for output `slot` of `id` shaped `shape`, of `like`'s
/// type and quantization; set as the outlet's value.
fn moved_out(l: &mut Lower, id: NodeId, slot: usize, like: i32, shape: Vec<usize>) -> i32 {
    let def = l.m.tensor(like).clone();
    let name = l.g.node(id).name.clone();
    let out = l.m.activation(&name, def.elem, shape, def.quant.clone());
    set_moved(l, id, slot, out);
    out
}

/// Sets `t`, a data-moving operator's result, as output `slot` of `id`:
/// an int8 result stays the quantized view of the float value.
fn set_moved(l: &mut Lower, id: NodeId, slot: usize, t: i32) {
    let v = if l.m.tensor(t).elem == Elem::I8 {
        Value::Deq(t)
    } else {
        Value::T(t)
    };
    l.set(id.out(slot), v);
}

/// Whether a rank-4 NCHW shape has the same element order as NHWC.
fn order_agrees(shape: &[usize]) -> bool {
    shape.len() != 4 || shape[1] == 1 || shape[2] * shape[3] == 1
}

pub(crate) fn concat(l: &mut Lower, id: NodeId, axis: i64) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    let rank = n.outputs[0].rank();
    let a = if axis < 0 { axis + rank as i64 } else { axis } as usize;
    let file_axis = if rank == 4 { nhwc_axis(a) } else { a };
    let target = quant::target(l, id, true);
    if let (Some(t), Some(ins)) = (&target, quant::int8_inputs(l, &n.inputs)) {
        let q = quant::q_params(l, t.q)?;
        let ins: Vec<i32> = ins
            .iter()
            .map(|x| {
                let name = format!("{}_requantized", l.m.tensor(*x).name);
                quant::requantize(l, *x, &q, &name)
            })
            .collect();
        let out = quant::output(l, t)?;
        l.emit(
            B::CONCATENATION,
            &ins,
            &[out],
            Options::Concat {
                axis: file_axis,
                act: t.act,
            },
        );
        return Ok(());
    }
    let mut ins = Vec::new();
    for o in &n.inputs {
        let t = match l.value(*o)?.clone() {
            Value::Const(c) => consts::activation_const(l, *o, &c, rank)?,
            _ => l.float(*o)?,
        };
        ins.push(t);
    }
    let out = l.f32_out(id, 0);
    l.set(id.out(0), Value::T(out));
    l.emit(
        B::CONCATENATION,
        &ins,
        &[out],
        Options::Concat {
            axis: file_axis,
            act: Act::None,
        },
    );
    Ok(())
}

/// `t` (holding the ONNX value of shape `from`) reshaped to ONNX shape
/// `to`, in the file's layout.
fn reshape_value(l: &mut Lower, t: i32, from: &[usize], to: &[usize], name: &str) -> i32 {
    let mut t = t;
    if !order_agrees(from) {
        t = l.transpose(t, &TO_NCHW, &format!("{name}_nchw"));
    }
    if order_agrees(to) {
        return l.reshape(t, nhwc(to), name);
    }
    let r = l.reshape(t, to.to_vec(), &format!("{name}_onnx"));
    l.transpose(r, &TO_NHWC, name)
}

pub(crate) fn reshape(l: &mut Lower, id: NodeId) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    let from = l.fact(n.inputs[0]).shape.clone();
    let (t, _) = moved(l, id)?;
    let r = reshape_value(l, t, &from, &n.outputs[0].shape, &n.name);
    set_moved(l, id, 0, r);
    Ok(())
}

pub(crate) fn flatten(l: &mut Lower, id: NodeId) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    let from = l.fact(n.inputs[0]).shape.clone();
    let to = n.outputs[0].shape.clone();
    let (t, _) = moved(l, id)?;
    if from.len() == 4 && to == [from[0], from[1] * from[2] * from[3]] && !order_agrees(&from) {
        let flat = l.reshape(t, to.clone(), &n.name);
        let chw = [from[1], from[2], from[3]];
        l.set(id.out(0), Value::FlatNhwc { flat, src: t, chw });
        return Ok(());
    }
    let r = reshape_value(l, t, &from, &to, &n.name);
    set_moved(l, id, 0, r);
    Ok(())
}

pub(crate) fn transpose(l: &mut Lower, id: NodeId, perm: &[usize]) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    let (t, _) = moved(l, id)?;
    let file_perm: Vec<usize> = if perm.len() == 4 {
        (0..4).map(|i| TO_NCHW[perm[TO_NHWC[i]]]).collect()
    } else {
        perm.to_vec()
    };
    let r = l.transpose(t, &file_perm, &n.name);
    set_moved(l, id, 0, r);
    Ok(())
}

pub(crate) fn pad(l: &mut Lower, id: NodeId, p: &Pad) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    if p.mode != PadMode::Constant {
        return Err(l.refuse(id, "a reflect or edge Pad"));
    }
    if p.pads.iter().any(|v| *v < 0) {
        return Err(l.refuse(id, "a Pad that crops"));
    }
    let rank = p.pads.len() / 2;
    let (t, int8) = moved(l, id)?;
    if int8 && p.value != 0.0 {
        return Err(l.refuse(id, "a Pad of an int8 tensor with a value other than 0"));
    }
    let axis = |a: usize| if rank == 4 { TO_NHWC[a] } else { a };
    let pairs: Vec<i32> = (0..rank)
        .flat_map(|i| [p.pads[axis(i)] as i32, p.pads[axis(i) + rank] as i32])
        .collect();
    let pt =
        l.m.const_i32(&format!("{}_paddings", n.name), vec![rank, 2], &pairs, None);
    let out = moved_out(l, id, 0, t, nhwc(&n.outputs[0].shape));
    if p.value == 0.0 {
        l.emit(B::PAD, &[t, pt], &[out], Options::Empty(EmptyOptions::Pad));
    } else {
        let v = l.m.const_f32(&format!("{}_value", n.name), vec![], &[p.value]);
        l.emit(B::PADV2, &[t, pt, v], &[out], Options::Empty(EmptyOptions::PadV2));
    }
    Ok(())
}

/// Begin and size in the file's layout of a slice of an ONNX `shape`
/// given per ONNX axis.
fn slice_tensor(
    l: &mut Lower,
    id: NodeId,
    slot: usize,
    t: i32,
    shape: &[usize],
    begin: &[usize],
    size: &[usize],
) -> i32 {
    let name = format!("{}_{slot}", l.g.node(id).name);
    let (b, s) = if shape.len() == 4 {
        (nhwc(begin), nhwc(size))
    } else {
        (begin.to_vec(), size.to_vec())
    };
    let to_i32 = |v: &[usize]| v.iter().map(|x| *x as i32).collect::<Vec<_>>();
    let bt =
        l.m.const_i32(&format!("{name}_begin"), vec![b.len()], &to_i32(&b), None);
    let st = l.m.const_i32(&format!("{name}_size"), vec![s.len()], &to_i32(&s), None);
    let out = moved_out(l, id, slot, t, s);
    l.emit(B::SLICE, &[t, bt, st], &[out], Options::Empty(EmptyOptions::Slice));
    out
}

pub(crate) fn slice(l: &mut Lower, id: NodeId, s: &Slice) -> Result<(), LiteRtError> {
    if s.steps.iter().any(|k| *k != 1) {
        return Err(l.refuse(id, "a Slice with steps other than 1"));
    }
    let n = l.g.node(id).clone();
    let shape = l.fact(n.inputs[0]).shape.clone();
    let rank = shape.len();
    let mut begin = vec![0usize; rank];
    let mut size = shape.clone();
    let axes: Vec<i64> = if s.axes.is_empty() {
        (0..s.starts.len() as i64).collect()
    } else {
        s.axes.clone()
    };
    for (k, a) in axes.iter().enumerate() {
        let a = if *a < 0 { *a + rank as i64 } else { *a } as usize;
        let d = shape[a] as i64;
        let clamp = |v: i64| if v < 0 { (v + d).max(0) } else { v.min(d) };
        let (b, e) = (clamp(s.starts[k]), clamp(s.ends[k]));
        begin[a] = b as usize;
        size[a] = (e - b).max(0) as usize;
    }
    let (t, _) = moved(l, id)?;
    slice_tensor(l, id, 0, t, &shape, &begin, &size);
    Ok(())
}

pub(crate) fn split(l: &mut Lower, id: NodeId, s: &Split) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    let shape = l.fact(n.inputs[0]).shape.clone();
    let rank = shape.len();
    let axis = if s.axis < 0 { s.axis + rank as i64 } else { s.axis } as usize;
    let (t, _) = moved(l, id)?;
    let mut at = 0;
    for (slot, len) in s.sizes.iter().enumerate() {
        let mut begin = vec![0usize; rank];
        let mut size = shape.clone();
        begin[axis] = at;
        size[axis] = *len;
        slice_tensor(l, id, slot, t, &shape, &begin, &size);
        at += len;
    }
    Ok(())
}

pub(crate) fn resize(l: &mut Lower, id: NodeId, r: &Resize) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    let ys = n.outputs[0].shape.clone();
    let xs = l.fact(n.inputs[0]).shape.clone();
    if ys.len() != 4 || ys[0] != xs[0] || ys[1] != xs[1] {
        return Err(l.refuse(id, "a Resize of other axes than H and W"));
    }
    let (code, options) = match (&r.mode, r.coord) {
        (ResizeMode::Nearest(NearestMode::Floor), CoordMode::Asymmetric) => (
            B::RESIZE_NEAREST_NEIGHBOR,
            Options::ResizeNearest {
                align_corners: false,
                half_pixel: false,
            },
        ),
        (ResizeMode::Nearest(NearestMode::RoundPreferCeil), CoordMode::HalfPixel) => (
            B::RESIZE_NEAREST_NEIGHBOR,
            Options::ResizeNearest {
                align_corners: false,
                half_pixel: true,
            },
        ),
        (ResizeMode::Linear, CoordMode::HalfPixel | CoordMode::PytorchHalfPixel) => (
            B::RESIZE_BILINEAR,
            Options::ResizeBilinear {
                align_corners: false,
                half_pixel: true,
            },
        ),
        (ResizeMode::Linear, CoordMode::AlignCorners) => (
            B::RESIZE_BILINEAR,
            Options::ResizeBilinear {
                align_corners: true,
                half_pixel: false,
            },
        ),
        (ResizeMode::Linear, CoordMode::Asymmetric) => (
            B::RESIZE_BILINEAR,
            Options::ResizeBilinear {
                align_corners: false,
                half_pixel: false,
            },
        ),
        _ => return Err(l.refuse(id, "a Resize mode LiteRT computes differently")),
    };
    if r.coord == CoordMode::PytorchHalfPixel && (ys[2] == 1 || ys[3] == 1) {
        return Err(l.refuse(id, "a pytorch_half_pixel Resize to length 1"));
    }
    let (t, _) = moved(l, id)?;
    let size = l.m.const_i32(
        &format!("{}_size", n.name),
        vec![2],
        &[ys[2] as i32, ys[3] as i32],
        None,
    );
    let out = moved_out(l, id, 0, t, nhwc(&ys));
    l.emit(code, &[t, size], &[out], options);
    Ok(())
}

pub(crate) fn softmax(l: &mut Lower, id: NodeId, axis: i64, log: bool) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    let rank = l.fact(n.inputs[0]).rank();
    let a = if axis < 0 { axis + rank as i64 } else { axis } as usize;
    let last = if rank == 4 { a == 1 } else { a + 1 == rank };
    if log || !last {
        return Err(l.refuse(id, "a (log-)softmax LiteRT cannot place on its last axis"));
    }
    let fixed = Quant::tensor(1.0 / 256.0, -128);
    let (input, target) = quant::operand_fixed(l, id, Some(&fixed))?;
    let (out, last) = result(l, id, input, &target, false)?;
    l.emit(B::SOFTMAX, &[input], &[out], Options::Softmax);
    finish(l, out, last);
    Ok(())
}
