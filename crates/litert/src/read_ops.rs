//! Each LiteRT operator stretch writes as the graph-IR operator that
//! computes the same on the NCHW view of its tensors ([`crate::read`]).

use crate::error::LiteRtError;
use crate::lower::{TO_NCHW, TO_NHWC};
use crate::read::{Reader, view, view_axis};
use crate::schema::litert as fb;
use graph_ir::ops::{
    Binary, BinaryOp, Cast, Concat, Conv, CoordMode, Gemm, GlobalMaxPool, NearestMode, Pad, PadMode, Pool, PoolKind,
    Reduce, ReduceKind, Reshape, Resize, ResizeMode, ResizeTarget, Slice, Softmax, Transpose, Unary, UnaryOp,
};
use graph_ir::{DType, Op};

use fb::BuiltinOperator as B;

/// Begin and end padding of SAME on an axis of `input` giving `out`.
fn same(input: usize, out: usize, k: usize, stride: usize) -> (usize, usize) {
    let total = ((out.max(1) - 1) * stride + k).saturating_sub(input);
    (total / 2, total - total / 2)
}

/// `[top, left, bottom, right]` of a window operator on NHWC `x` giving `y`.
fn pads(x: &[usize], y: &[usize], k: [usize; 2], stride: [usize; 2], is_same: bool) -> [usize; 4] {
    if !is_same {
        return [0; 4];
    }
    let (t, b) = same(x[1], y[1], k[0], stride[0]);
    let (l, r) = same(x[2], y[2], k[1], stride[1]);
    [t, l, b, r]
}

/// The operator being read: its index, input and output tensors, and the
/// file's shapes of its first input and output.
pub(crate) struct At<'s> {
    k: usize,
    ins: &'s [i32],
    x: i32,
    y: i32,
    xs: Vec<usize>,
    ys: Vec<usize>,
}

impl At<'_> {
    /// `op` on the operator's first input, computing its output.
    fn one(&self, r: &mut Reader, op: Op) -> Result<(), LiteRtError> {
        let a = r.value_as(self.x, None)?;
        r.add(self.k, op, &[a], self.y)
    }
}

/// Refuses an operator with fewer inputs than its code reads, or whose
/// window operands are not rank 4, before anything indexes them.
fn check(r: &Reader, at: &At, code: B) -> Result<(), LiteRtError> {
    let (inputs, rank4) = match code {
        B::CONV_2D | B::DEPTHWISE_CONV_2D => (2, true),
        B::AVERAGE_POOL_2D | B::MAX_POOL_2D | B::RESIZE_BILINEAR | B::RESIZE_NEAREST_NEIGHBOR => (1, true),
        B::SLICE => (3, false),
        B::FULLY_CONNECTED
        | B::MEAN
        | B::SUM
        | B::REDUCE_MAX
        | B::ADD
        | B::SUB
        | B::MUL
        | B::DIV
        | B::MAXIMUM
        | B::MINIMUM
        | B::TRANSPOSE
        | B::PAD
        | B::PADV2 => (2, false),
        _ => (1, false),
    };
    if at.ins.len() < inputs {
        return Err(r.bad(format!(
            "operator {} ({code:?}) has {} inputs; it takes {inputs}",
            at.k,
            at.ins.len()
        )));
    }
    if (rank4 && (at.xs.len() != 4 || at.ys.len() != 4)) || at.xs.is_empty() {
        return Err(r.bad(format!(
            "operator {} ({code:?}) reads a tensor of shape {:?} into {:?}",
            at.k, at.xs, at.ys
        )));
    }
    Ok(())
}

/// `values` when it holds `n` entries, each below `bound` when given.
fn sized(
    r: &Reader,
    k: usize,
    what: &str,
    values: Vec<i64>,
    n: usize,
    bound: Option<i64>,
) -> Result<Vec<i64>, LiteRtError> {
    let inside = |v: &i64| bound.is_none_or(|b| (0..b).contains(v));
    if values.len() != n || !values.iter().all(inside) {
        return Err(r.bad(format!("operator {k}: {what} {values:?} does not fit its input")));
    }
    Ok(values)
}

pub(crate) fn operator<'a>(
    r: &mut Reader<'a>,
    k: usize,
    code: B,
    op: &fb::Operator<'a>,
    ins: &[i32],
    x: i32,
    y: i32,
) -> Result<(), LiteRtError> {
    let at = At {
        k,
        ins,
        x,
        y,
        xs: r.shape(x)?,
        ys: r.shape(y)?,
    };
    check(r, &at, code)?;
    let (xs, ys) = (&at.xs, &at.ys);
    let one = |r: &mut Reader<'a>, op: Op| at.one(r, op);
    match code {
        B::CONV_2D | B::DEPTHWISE_CONV_2D => conv(r, code, op, &at),
        B::FULLY_CONNECTED => {
            let ws = r.shape(ins[1])?;
            if ws.len() != 2 {
                return Err(r.bad(format!("operator {k}: fully-connected weights of shape {ws:?}")));
            }
            let mut inputs = vec![r.value_as(x, None)?, r.value_as(ins[1], Some(ws.clone()))?];
            if let Some(&b) = ins.get(2).filter(|b| **b >= 0) {
                inputs.push(r.value_as(b, Some(vec![ws[0]]))?);
            }
            let gemm = Gemm {
                alpha: 1.0,
                beta: 1.0,
                trans_a: false,
                trans_b: true,
            };
            r.add(k, Op::Gemm(gemm), &inputs, y)
        }
        B::AVERAGE_POOL_2D | B::MAX_POOL_2D => {
            let o = op
                .builtin_options_as_pool_2_doptions()
                .ok_or_else(|| r.bad(format!("operator {k}: a pool without options")))?;
            let kernel = [o.filter_height() as usize, o.filter_width() as usize];
            let strides = [o.stride_h() as usize, o.stride_w() as usize];
            let kind = if code == B::MAX_POOL_2D {
                PoolKind::Max
            } else {
                PoolKind::Average {
                    count_include_pad: false,
                }
            };
            let pool = Pool {
                kind,
                kernel,
                strides,
                pads: pads(xs, ys, kernel, strides, o.padding() == fb::Padding::SAME),
                dilations: [1, 1],
                ceil_mode: false,
            };
            one(r, Op::Pool(pool))
        }
        B::MEAN | B::SUM | B::REDUCE_MAX => reduce(r, code, op, &at),
        B::ADD | B::SUB | B::MUL | B::DIV | B::MAXIMUM | B::MINIMUM => binary(r, k, code, ins, y),
        B::RELU | B::RELU6 | B::LOGISTIC | B::TANH | B::HARD_SWISH | B::LEAKY_RELU => {
            let u = match code {
                B::RELU => UnaryOp::Relu,
                B::RELU6 => UnaryOp::Clip {
                    min: Some(0.0),
                    max: Some(6.0),
                },
                B::LOGISTIC => UnaryOp::Sigmoid,
                B::TANH => UnaryOp::Tanh,
                B::HARD_SWISH => UnaryOp::HardSwish,
                _ => UnaryOp::LeakyRelu {
                    alpha: op.builtin_options_as_leaky_relu_options().map_or(0.01, |o| o.alpha()),
                },
            };
            one(r, Op::Unary(Unary { op: u }))
        }
        _ => moving(r, code, op, &at),
    }
}

/// Operators that move or convert data, and softmax.
fn moving<'a>(r: &mut Reader<'a>, code: B, op: &fb::Operator<'a>, at: &At) -> Result<(), LiteRtError> {
    let (k, ins, y, xs, ys) = (at.k, at.ins, at.y, &at.xs, &at.ys);
    let one = |r: &mut Reader<'a>, op: Op| at.one(r, op);
    match code {
        B::CONCATENATION => {
            let axis = op.builtin_options_as_concatenation_options().map_or(0, |o| o.axis());
            let axis = if axis < 0 { axis + ys.len() as i32 } else { axis } as usize;
            let inputs = ins
                .iter()
                .map(|i| r.value_as(*i, None))
                .collect::<Result<Vec<_>, _>>()?;
            let concat = Concat {
                axis: view_axis(axis, ys.len()) as i64,
            };
            r.add(k, Op::Concat(concat), &inputs, y)
        }
        B::RESHAPE => {
            let shape = view(ys).iter().map(|d| *d as i64).collect();
            one(
                r,
                Op::Reshape(Reshape {
                    shape,
                    allowzero: false,
                }),
            )
        }
        B::TRANSPOSE => {
            let n = xs.len();
            let p = sized(r, k, "permutation", r.ints(ins[1])?, n, Some(n as i64))?;
            let p: Vec<usize> = p.iter().map(|a| *a as usize).collect();
            let perm = if p.len() == 4 {
                (0..4).map(|i| TO_NHWC[p[TO_NCHW[i]]]).collect()
            } else {
                p
            };
            one(r, Op::Transpose(Transpose { perm }))
        }
        B::PAD | B::PADV2 => {
            let n = xs.len();
            let pairs = sized(r, k, "paddings", r.ints(ins[1])?, 2 * n, None)?;
            let axis = |v: usize| if n == 4 { TO_NCHW[v] } else { v };
            let mut pads: Vec<i64> = (0..n).map(|v| pairs[2 * axis(v)]).collect();
            pads.extend((0..n).map(|v| pairs[2 * axis(v) + 1]));
            let pad = Pad {
                pads,
                mode: PadMode::Constant,
                value: 0.0,
            };
            one(r, Op::Pad(pad))
        }
        B::SLICE => {
            let n = xs.len();
            let begin = sized(r, k, "begin", r.ints(ins[1])?, n, None)?;
            let size = sized(r, k, "size", r.ints(ins[2])?, n, None)?;
            let axis = |v: usize| if n == 4 { TO_NCHW[v] } else { v };
            let starts: Vec<i64> = (0..n).map(|v| begin[axis(v)]).collect();
            let ends = (0..n).map(|v| begin[axis(v)] + size[axis(v)]).collect();
            let slice = Slice {
                starts,
                ends,
                axes: (0..n as i64).collect(),
                steps: vec![1; n],
            };
            one(r, Op::Slice(slice))
        }
        B::QUANTIZE | B::DEQUANTIZE => one(r, Op::Cast(Cast { to: DType::F32 })),
        B::RESIZE_BILINEAR | B::RESIZE_NEAREST_NEIGHBOR => one(r, Op::Resize(resize(code, op, ys))),
        B::SOFTMAX => {
            let axis = view_axis(xs.len() - 1, xs.len()) as i64;
            one(r, Op::Softmax(Softmax { axis, log: false }))
        }
        other => Err(r.bad(format!("operator {k} is {other:?}, which stretch does not write"))),
    }
}

/// RESIZE_BILINEAR or RESIZE_NEAREST_NEIGHBOR to NHWC shape `ys`.
fn resize<'a>(code: B, op: &fb::Operator<'a>, ys: &[usize]) -> Resize {
    let (mode, align, half) = match code {
        B::RESIZE_BILINEAR => {
            let o = op.builtin_options_as_resize_bilinear_options();
            let f = |g: fn(&fb::ResizeBilinearOptions<'a>) -> bool| o.as_ref().is_some_and(g);
            (
                ResizeMode::Linear,
                f(|o| o.align_corners()),
                f(|o| o.half_pixel_centers()),
            )
        }
        _ => {
            let o = op.builtin_options_as_resize_nearest_neighbor_options();
            let f = |g: fn(&fb::ResizeNearestNeighborOptions<'a>) -> bool| o.as_ref().is_some_and(g);
            let mode = ResizeMode::Nearest(NearestMode::Floor);
            (mode, f(|o| o.align_corners()), f(|o| o.half_pixel_centers()))
        }
    };
    let coord = match (align, half) {
        (true, _) => CoordMode::AlignCorners,
        (_, true) => CoordMode::HalfPixel,
        _ => CoordMode::Asymmetric,
    };
    Resize {
        mode,
        coord,
        target: ResizeTarget::Sizes([ys[1], ys[2]]),
    }
}

/// MEAN, SUM, or REDUCE_MAX over H and W.
fn reduce<'a>(r: &mut Reader<'a>, code: B, op: &fb::Operator<'a>, at: &At) -> Result<(), LiteRtError> {
    let (k, ins, xs) = (at.k, at.ins, &at.xs);
    let one = |r: &mut Reader<'a>, op: Op| at.one(r, op);
    let axes: Vec<usize> = r.ints(ins[1])?.iter().map(|a| *a as usize).collect();
    if axes.iter().any(|a| *a >= xs.len()) {
        return Err(r.bad(format!("operator {k}: axes {axes:?} of a rank-{} input", xs.len())));
    }
    let keep = op.builtin_options_as_reducer_options().is_some_and(|o| o.keep_dims());
    if code == B::REDUCE_MAX {
        if xs.len() == 4 && keep && axes == [1, 2] {
            return one(r, Op::GlobalMaxPool(GlobalMaxPool));
        }
        return Err(r.bad(format!("operator {k}: a REDUCE_MAX other than over H and W")));
    }
    let kind = if code == B::MEAN {
        ReduceKind::Mean
    } else {
        ReduceKind::Sum
    };
    let axes = axes.iter().map(|a| view_axis(*a, xs.len()) as i64).collect();
    one(
        r,
        Op::Reduce(Reduce {
            kind,
            axes,
            keepdims: keep,
        }),
    )
}

fn conv<'a>(r: &mut Reader<'a>, code: B, op: &fb::Operator<'a>, at: &At) -> Result<(), LiteRtError> {
    let (k, ins, y, xs, ys) = (at.k, at.ins, at.y, &at.xs[..], &at.ys[..]);
    let ws = r.shape(ins[1])?;
    if ws.len() != 4 || ws[1] == 0 || ws[2] == 0 {
        return Err(r.bad(format!("operator {k}: convolution weights of shape {ws:?}")));
    }
    let (stride, dilation, is_same) = if code == B::CONV_2D {
        let o = op
            .builtin_options_as_conv_2_doptions()
            .ok_or_else(|| r.bad(format!("operator {k}: a convolution without options")))?;
        let s = [o.stride_h() as usize, o.stride_w() as usize];
        let d = [o.dilation_h_factor() as usize, o.dilation_w_factor() as usize];
        (s, d, o.padding() == fb::Padding::SAME)
    } else {
        let o = op
            .builtin_options_as_depthwise_conv_2_doptions()
            .ok_or_else(|| r.bad(format!("operator {k}: a convolution without options")))?;
        let s = [o.stride_h() as usize, o.stride_w() as usize];
        let d = [o.dilation_h_factor() as usize, o.dilation_w_factor() as usize];
        (s, d, o.padding() == fb::Padding::SAME)
    };
    let (weights, out, group) = if code == B::CONV_2D {
        (vec![ws[0], ws[3], ws[1], ws[2]], ws[0], xs[3] / ws[3].max(1))
    } else {
        (vec![ws[3], 1, ws[1], ws[2]], ws[3], xs[3])
    };
    let keff = [(ws[1] - 1) * dilation[0] + 1, (ws[2] - 1) * dilation[1] + 1];
    let c = Conv {
        strides: stride,
        pads: pads(xs, ys, keff, stride, is_same),
        dilations: dilation,
        group,
    };
    let mut inputs = vec![r.value_as(ins[0], None)?, r.value_as(ins[1], Some(weights))?];
    if let Some(&b) = ins.get(2).filter(|b| **b >= 0) {
        inputs.push(r.value_as(b, Some(vec![out]))?);
    }
    r.add(k, Op::Conv(c), &inputs, y)
}

fn binary<'a>(r: &mut Reader<'a>, k: usize, code: B, ins: &[i32], y: i32) -> Result<(), LiteRtError> {
    let op = match code {
        B::ADD => BinaryOp::Add,
        B::SUB => BinaryOp::Sub,
        B::MUL => BinaryOp::Mul,
        B::DIV => BinaryOp::Div,
        B::MAXIMUM => BinaryOp::Max,
        _ => BinaryOp::Min,
    };
    let rank = |r: &Reader<'_>, i: i32| r.shape(i).map(|s| s.len());
    let peer = rank(r, ins[0])?.max(rank(r, ins[1])?);
    let mut inputs = Vec::new();
    for &i in &ins[..2] {
        let mut s = r.shape(i)?;
        if peer == 4 && s.len() < 4 {
            while s.len() < 4 {
                s.insert(0, 1);
            }
        }
        inputs.push(r.value_as(i, Some(view(&s)))?);
    }
    r.add(k, Op::Binary(Binary { op }), &inputs, y)
}

#[cfg(test)]
mod tests {
    use crate::model::{Act, Elem, ModelBuilder, Options};
    use crate::schema::litert::BuiltinOperator as B;

    /// A file of one operator `code` on `inputs` (of a rank-2 input `x`).
    fn file(code: B, extra: &[i32], options: Options) -> Vec<u8> {
        let mut m = ModelBuilder::new();
        let x = m.activation("x", Elem::F32, vec![1, 4], None);
        let y = m.activation("y", Elem::F32, vec![1, 4], None);
        let mut ins = vec![x];
        ins.extend(extra);
        m.op((code, 1), &ins, &[y], options);
        m.finish(&[x], &[y], "test")
    }

    #[test]
    fn operators_that_do_not_fit_their_inputs_are_refused_not_indexed() {
        let fc = file(B::FULLY_CONNECTED, &[], Options::FullyConnected { act: Act::None });
        let err = crate::cost_graph(&fc, "fc.tflite").unwrap_err().to_string();
        assert!(err.contains("has 1 inputs; it takes 2"), "{err}");
        let pool = file(B::MAX_POOL_2D, &[], Options::None);
        let err = crate::cost_graph(&pool, "pool.tflite").unwrap_err().to_string();
        assert!(err.contains("reads a tensor of shape [1, 4]"), "{err}");
        let mut m = ModelBuilder::new();
        let x = m.activation("x", Elem::F32, vec![1, 4], None);
        let y = m.activation("y", Elem::F32, vec![1, 4], None);
        let perm = m.const_i32("perm", vec![2], &[0, 7], None);
        let options = Options::Empty(crate::model::EmptyOptions::Transpose);
        m.op((B::TRANSPOSE, 1), &[x, perm], &[y], options);
        let err = crate::cost_graph(&m.finish(&[x], &[y], "t"), "t.tflite")
            .unwrap_err()
            .to_string();
        assert!(err.contains("permutation [0, 7]"), "{err}");
    }
}
