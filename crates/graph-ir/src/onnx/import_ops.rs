//! Lowering of one ONNX node to an IR op (or an alias, or folded constants).

use super::ImportError;
use super::fold;
use super::node_ctx::{Lowered, NodeCtx, Src, Step};
use super::{import_blocks, import_matmul, import_resize, import_unary, import_window};
use crate::graph::Graph;
use crate::ops::*;

fn split(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    let axis = a.int("axis", 0)?;
    let x = g
        .fact(ctx.input(0)?)
        .cloned()
        .ok_or_else(|| ctx.err("input 0 has no fact"))?;
    let given = if ctx.opset < 13 {
        a.ints("split")?
    } else {
        ctx.const_ints(g, 1)?
    };
    let n_out = ctx.proto.output.len();
    let sizes = match given {
        Some(s) => s
            .iter()
            .map(|&v| usize::try_from(v).map_err(|_| ctx.err(format!("negative split size in {s:?}"))))
            .collect::<Result<Vec<_>, _>>()?,
        None => {
            let n = a.int("num_outputs", n_out as i64)?;
            if n != n_out as i64 {
                return Err(a.err("num_outputs", format!("is {n}, but the node has {n_out} outputs")));
            }
            let d = resolve_axis(axis, x.rank())
                .ok()
                .and_then(|ax| x.shape.get(ax).copied())
                .ok_or_else(|| ctx.err(format!("axis {axis} is out of range for {x}")))?;
            let chunk = d.div_ceil(n_out.max(1));
            (0..n_out).map(|i| chunk.min(d.saturating_sub(i * chunk))).collect()
        }
    };
    Ok(Lowered::Op(Op::Split(Split { axis, sizes }), ctx.data_inputs(1)?))
}

fn slice(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    let (starts, ends, axes, steps) = if ctx.opset < 10 {
        (a.ints("starts")?, a.ints("ends")?, a.ints("axes")?, None)
    } else {
        (
            ctx.const_ints(g, 1)?,
            ctx.const_ints(g, 2)?,
            ctx.const_ints(g, 3)?,
            ctx.const_ints(g, 4)?,
        )
    };
    let starts = starts.ok_or_else(|| ctx.err("starts are required"))?;
    let ends = ends.ok_or_else(|| ctx.err("ends are required"))?;
    let n = starts.len();
    let op = Slice {
        axes: axes.unwrap_or_else(|| (0..n as i64).collect()),
        steps: steps.unwrap_or_else(|| vec![1; n]),
        starts,
        ends,
    };
    Ok(Lowered::Op(Op::Slice(op), ctx.data_inputs(1)?))
}

fn pad(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    let mode = match a.string("mode", "constant")?.as_str() {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        other => return Err(a.err("mode", format!("`{other}` is not supported"))),
    };
    let (mut pads, value) = if ctx.opset < 11 {
        (
            a.ints("pads")?.ok_or_else(|| a.err("pads", "is required"))?,
            a.float("value", 0.0)?,
        )
    } else {
        (
            ctx.const_ints(g, 1)?.ok_or_else(|| ctx.err("pads are required"))?,
            ctx.const_scalar_f32(g, 2)?.unwrap_or(0.0),
        )
    };
    if let Some(axes) = ctx.const_ints(g, 3)? {
        let rank = g.fact(ctx.input(0)?).map_or(0, |f| f.rank());
        if pads.len() != 2 * axes.len() {
            return Err(ctx.err(format!("pads {pads:?} must hold 2 values per axis in {axes:?}")));
        }
        let mut full = vec![0; 2 * rank];
        for (i, &ax) in axes.iter().enumerate() {
            let ax = resolve_axis(ax, rank)
                .ok()
                .filter(|&a| a < rank)
                .ok_or_else(|| ctx.err(format!("axis {ax} is out of range for rank {rank}")))?;
            full[ax] = pads[i];
            full[ax + rank] = pads[i + axes.len()];
        }
        pads = full;
    }
    Ok(Lowered::Op(Op::Pad(Pad { pads, mode, value }), ctx.data_inputs(1)?))
}

fn reduce(ctx: &NodeCtx, g: &Graph, kind: ReduceKind) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    let keepdims = a.int("keepdims", 1)? != 0;
    let axes_moved = match kind {
        ReduceKind::Mean => 18,
        ReduceKind::Sum => 13,
    };
    let axes = if ctx.opset < axes_moved {
        a.ints("axes")?
    } else {
        ctx.const_ints(g, 1)?
    };
    let axes = axes.unwrap_or_default();
    if axes.is_empty() && a.int("noop_with_empty_axes", 0)? != 0 {
        return Ok(Lowered::Alias(vec![ctx.input(0)?]));
    }
    Ok(Lowered::Op(
        Op::Reduce(Reduce { kind, axes, keepdims }),
        ctx.data_inputs(1)?,
    ))
}

/// Dropout in inference: its input. Training-mode Dropout (the
/// `training_mode` input true, or not a constant) scales and masks, and is
/// refused, as training-mode BatchNormalization is.
fn dropout(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let training = match ctx.inputs.get(2).copied().flatten() {
        None => false,
        Some(o) => match g.const_tensor(o).and_then(|t| t.to_f64_vec()) {
            Some(v) => v.iter().any(|x| *x != 0.0),
            None => true,
        },
    };
    if training {
        return Err(ctx.err(
            "training-mode Dropout (training_mode true or computed) is not supported: it would lose its scaling; export the model in eval mode",
        ));
    }
    Ok(Lowered::Alias(vec![ctx.input(0)?]))
}

fn batch_norm(ctx: &NodeCtx) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    if a.int("training_mode", 0)? != 0 {
        return Err(a.err(
            "training_mode",
            "training-mode BatchNormalization is not supported; export the model in eval mode",
        ));
    }
    if ctx.proto.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(ctx.err("BatchNormalization with running-statistics outputs is not supported; export in eval mode"));
    }
    let op = BatchNorm {
        epsilon: a.float("epsilon", 1e-5)?,
        momentum: a.float("momentum", 0.9)?,
    };
    Ok(Lowered::Op(Op::BatchNorm(op), ctx.data_inputs(5)?))
}

fn reshape(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    let shape = if ctx.opset < 5 {
        a.ints("shape")?
    } else {
        ctx.const_ints(g, 1)?
    };
    let shape = shape.ok_or_else(|| ctx.err("target shape is required"))?;
    let op = Reshape {
        shape,
        allowzero: a.int("allowzero", 0)? != 0,
    };
    Ok(Lowered::Op(Op::Reshape(op), ctx.data_inputs(1)?))
}

fn transpose(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let rank = g.fact(ctx.input(0)?).map_or(0, |f| f.rank());
    let perm = ctx.attrs().usizes("perm", &(0..rank).rev().collect::<Vec<_>>(), None)?;
    Ok(Lowered::Op(Op::Transpose(Transpose { perm }), ctx.data_inputs(1)?))
}

fn gemm(ctx: &NodeCtx) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    let op = Gemm {
        alpha: a.float("alpha", 1.0)?,
        beta: a.float("beta", 1.0)?,
        trans_a: a.int("transA", 0)? != 0,
        trans_b: a.int("transB", 0)? != 0,
    };
    Ok(Lowered::Op(Op::Gemm(op), ctx.inputs_with_bias()?))
}

fn binary(ctx: &NodeCtx, op: BinaryOp) -> Result<Lowered, ImportError> {
    Ok(Lowered::Op(Op::Binary(Binary { op }), ctx.data_inputs(2)?))
}

/// Squeeze or Unsqueeze of a computed value: a Reshape to the shape it
/// gives (axes from the attribute before opset 13, from a constant input
/// after).
fn squeeze(ctx: &NodeCtx, g: &Graph, unsqueeze: bool) -> Result<Lowered, ImportError> {
    let x = ctx.input(0)?;
    let f = g.fact(x).ok_or_else(|| ctx.err("input has no shape"))?;
    let axes = if ctx.opset < 13 {
        ctx.attrs().ints("axes")?
    } else {
        ctx.const_ints(g, 1)?
    };
    let rank = f.rank() as i64;
    let out_rank = if unsqueeze {
        rank + axes.as_ref().map_or(0, |a| a.len() as i64)
    } else {
        rank
    };
    let resolve = |a: i64| resolve_axis(a, out_rank as usize).map_err(|e| ctx.err(format!("{e} ({f})")));
    let axes: Vec<usize> = axes
        .unwrap_or_default()
        .into_iter()
        .map(resolve)
        .collect::<Result<_, _>>()?;
    let shape: Vec<usize> = if unsqueeze {
        if axes.is_empty() {
            return Err(ctx.err("Unsqueeze needs axes"));
        }
        let mut dims = f.shape.iter().copied();
        (0..out_rank as usize)
            .map(|i| if axes.contains(&i) { 1 } else { dims.next().unwrap_or(1) })
            .collect()
    } else {
        if let Some(&a) = axes.iter().find(|&&a| f.shape[a] != 1) {
            return Err(ctx.err(format!("cannot squeeze axis {a} of {f}: its size is not 1")));
        }
        f.shape
            .iter()
            .enumerate()
            .filter(|&(i, &d)| !(if axes.is_empty() { d == 1 } else { axes.contains(&i) }))
            .map(|(_, &d)| d)
            .collect()
    };
    Ok(Lowered::Op(
        Op::Reshape(Reshape {
            shape: shape.iter().map(|&d| d as i64).collect(),
            allowzero: false,
        }),
        vec![x],
    ))
}

/// Max, Min or Sum of any number of inputs: a chain of binary nodes, left
/// to right.
fn variadic(ctx: &NodeCtx, op: BinaryOp) -> Result<Lowered, ImportError> {
    let n = ctx.inputs.len();
    let inputs = ctx.data_inputs(n)?;
    match n {
        0 => Err(ctx.err("needs at least one input")),
        1 => Ok(Lowered::Alias(inputs)),
        2 => binary(ctx, op),
        _ => Ok(Lowered::Chain(
            (1..n)
                .map(|i| Step {
                    suffix: "partial",
                    op: Op::Binary(Binary { op }),
                    inputs: vec![
                        if i == 1 {
                            Src::Value(inputs[0])
                        } else {
                            Src::Step(i - 2)
                        },
                        Src::Value(inputs[i]),
                    ],
                })
                .collect(),
        )),
    }
}

/// PRelu; before opset 7 a slope of one value per channel applies along
/// axis 1 (not the last axis, as broadcasting would), so it is reshaped to
/// `[C, 1, ..]`.
fn prelu(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let (x, slope) = (ctx.input(0)?, ctx.input(1)?);
    let rank = g.fact(x).map_or(0, |f| f.rank());
    let per_channel = g
        .fact(slope)
        .filter(|s| s.rank() == 1 && s.shape[0] > 1)
        .map(|s| s.shape[0]);
    match per_channel {
        Some(c) if ctx.opset < 7 && rank >= 3 => {
            let t = g
                .const_tensor(slope)
                .ok_or_else(|| ctx.err("a per-channel slope must be a constant"))?;
            let mut shape = vec![c];
            shape.resize(rank - 1, 1);
            let lifted = t
                .reshaped(shape)
                .ok_or_else(|| ctx.err("cannot lay the slope along the channels"))?;
            Ok(Lowered::Chain(vec![Step {
                suffix: "prelu",
                op: Op::Binary(Binary { op: BinaryOp::PRelu }),
                inputs: vec![Src::Value(x), Src::Const(lifted)],
            }]))
        }
        _ => binary(ctx, BinaryOp::PRelu),
    }
}

/// Tile with constant repeats (opset 6 and later).
fn tile(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    if ctx.opset < 6 {
        return Err(ctx.err(format!(
            "opset {} Tile (tiles and axis inputs) is not supported",
            ctx.opset
        )));
    }
    let reps = ctx.const_ints(g, 1)?.ok_or_else(|| ctx.err("repeats are required"))?;
    let repeats = reps
        .iter()
        .map(|&r| usize::try_from(r).map_err(|_| ctx.err(format!("negative repeat in {reps:?}"))))
        .collect::<Result<_, _>>()?;
    Ok(Lowered::Op(Op::Tile(Tile { repeats }), ctx.data_inputs(1)?))
}

/// Softmax or LogSoftmax. Before opset 13 the input is flattened to 2-D at
/// `axis` (default 1); that equals a softmax along `axis` only when every
/// later dimension is 1, else the node is refused.
fn softmax(ctx: &NodeCtx, g: &Graph, log: bool) -> Result<Lowered, ImportError> {
    let x = ctx.input(0)?;
    let old = ctx.opset < 13;
    let axis = ctx.attrs().int("axis", if old { 1 } else { -1 })?;
    if old
        && let Some(f) = g.fact(x)
        && let Ok(a) = resolve_axis(axis, f.rank())
        && f.shape[a + 1..].iter().any(|&d| d != 1)
    {
        return Err(ctx.err(format!(
            "opset {} flattens the input {f} from axis {axis} into one softmax; only a softmax along one axis \
             (the last, or one followed by size-1 dimensions) is supported: export the model at opset 13 or later",
            ctx.opset
        )));
    }
    Ok(Lowered::Op(Op::Softmax(Softmax { axis, log }), vec![x]))
}

/// `LRN`: a positive window size and its coefficients.
fn lrn(ctx: &NodeCtx) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    Ok(Lowered::Op(
        Op::Lrn(Lrn {
            size: usize::try_from(a.int("size", 0)?)
                .ok()
                .filter(|s| *s > 0)
                .ok_or_else(|| a.err("size", "must be a positive integer"))?,
            alpha: a.float("alpha", 1e-4)?,
            beta: a.float("beta", 0.75)?,
            bias: a.float("bias", 1.0)?,
        }),
        ctx.data_inputs(1)?,
    ))
}

/// Lowers one node of the default ONNX domain; `None` for an unknown op type.
pub(super) fn lower(ctx: &NodeCtx, g: &Graph) -> Result<Option<Lowered>, ImportError> {
    let a = ctx.attrs();
    if let Some(consts) = fold::try_fold(ctx, g)? {
        return Ok(Some(Lowered::Consts(consts)));
    }
    if let Some(lowered) = import_unary::lower(ctx, g)? {
        return Ok(Some(lowered));
    }
    let lowered = match ctx.proto.op_type.as_str() {
        "Identity" => Lowered::Alias(vec![ctx.input(0)?]),
        "Dropout" => dropout(ctx, g)?,
        "Conv" => import_window::conv(ctx, g)?,
        "ConvTranspose" => import_window::conv_transpose(ctx, g)?,
        "Resize" => import_resize::resize(ctx, g)?,
        "Upsample" => import_resize::upsample(ctx, g)?,
        "Tile" => tile(ctx, g)?,
        "Gather" => Lowered::Op(
            Op::Gather(Gather {
                axis: a.int("axis", 0)?,
            }),
            ctx.data_inputs(2)?,
        ),
        "BatchNormalization" => batch_norm(ctx)?,
        "Gelu" => import_blocks::gelu(ctx)?,
        "LayerNormalization" => import_blocks::layer_norm(ctx)?,
        "DepthToSpace" => import_blocks::depth_to_space(ctx)?,
        "SpaceToDepth" => import_blocks::space_to_depth(ctx)?,
        "QuantizeLinear" => import_blocks::quantize_linear(ctx)?,
        "DequantizeLinear" => import_blocks::dequantize_linear(ctx)?,
        "Cast" => import_blocks::cast(ctx)?,
        "Add" => binary(ctx, BinaryOp::Add)?,
        "Sub" => binary(ctx, BinaryOp::Sub)?,
        "Mul" => binary(ctx, BinaryOp::Mul)?,
        "Div" => binary(ctx, BinaryOp::Div)?,
        "Pow" => binary(ctx, BinaryOp::Pow)?,
        "PRelu" => prelu(ctx, g)?,
        "Max" => variadic(ctx, BinaryOp::Max)?,
        "Min" => variadic(ctx, BinaryOp::Min)?,
        "Sum" => variadic(ctx, BinaryOp::Add)?,
        "InstanceNormalization" => Lowered::Op(
            Op::InstanceNorm(InstanceNorm {
                epsilon: a.float("epsilon", 1e-5)?,
            }),
            ctx.data_inputs(3)?,
        ),
        "LRN" => lrn(ctx)?,
        "Softmax" => softmax(ctx, g, false)?,
        "LogSoftmax" => softmax(ctx, g, true)?,
        "Concat" => Lowered::Op(
            Op::Concat(Concat {
                axis: a.int("axis", 0)?,
            }),
            (0..ctx.inputs.len()).map(|i| ctx.input(i)).collect::<Result<_, _>>()?,
        ),
        "Split" => split(ctx, g)?,
        "Slice" => slice(ctx, g)?,
        "Reshape" => reshape(ctx, g)?,
        "Squeeze" => squeeze(ctx, g, false)?,
        "Unsqueeze" => squeeze(ctx, g, true)?,
        "Flatten" => Lowered::Op(
            Op::Flatten(Flatten {
                axis: a.int("axis", 1)?,
            }),
            ctx.data_inputs(1)?,
        ),
        "Transpose" => transpose(ctx, g)?,
        "MaxPool" => import_window::pool(ctx, g, PoolKind::Max)?,
        "AveragePool" => import_window::pool(
            ctx,
            g,
            PoolKind::Average {
                count_include_pad: false,
            },
        )?,
        "GlobalAveragePool" => Lowered::Op(Op::GlobalAveragePool(GlobalAveragePool), ctx.data_inputs(1)?),
        "GlobalMaxPool" => Lowered::Op(Op::GlobalMaxPool(GlobalMaxPool), ctx.data_inputs(1)?),
        "ReduceMean" => reduce(ctx, g, ReduceKind::Mean)?,
        "ReduceSum" => reduce(ctx, g, ReduceKind::Sum)?,
        "Gemm" => gemm(ctx)?,
        "MatMul" => import_matmul::matmul(ctx, g)?,
        "Pad" => pad(ctx, g)?,
        _ => return Ok(None),
    };
    Ok(Some(lowered))
}
