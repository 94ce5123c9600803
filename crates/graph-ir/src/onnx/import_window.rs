//! Lowering of windowed ONNX nodes: Conv, ConvTranspose and the pools,
//! 2-D directly and 1-D as the 2-D op over a height of 1 (a Reshape to
//! `[N, C, 1, L]` before and back to `[N, C', L']` after).

use super::ImportError;
use super::import_ops::{Lowered, NodeCtx, Src, Step};
use crate::graph::Graph;
use crate::ops::*;
use crate::tensor::Tensor;

/// The attributes of a window along its `dims` spatial axes (1 or 2).
struct Window {
    dims: usize,
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
}

impl Window {
    fn read(ctx: &NodeCtx, kernel: Vec<usize>) -> Result<Window, ImportError> {
        let a = ctx.attrs();
        let dims = kernel.len();
        Ok(Window {
            strides: a.usizes("strides", &vec![1; dims], Some(dims))?,
            dilations: a.usizes("dilations", &vec![1; dims], Some(dims))?,
            dims,
            kernel,
        })
    }

    /// Lifts a 1-D list `[v]` to the 2-D `[1, v]`; 2-D lists pass through.
    fn two(&self, v: &[usize], one: usize) -> [usize; 2] {
        if self.dims == 1 { [one, v[0]] } else { [v[0], v[1]] }
    }

    /// `[begin.., end..]` pads in 2-D order `[top, left, bottom, right]`.
    fn pads2(&self, p: &[usize]) -> [usize; 4] {
        if self.dims == 1 {
            [0, p[0], 0, p[1]]
        } else {
            [p[0], p[1], p[2], p[3]]
        }
    }
}

/// Spatial dims of the node's input 0, which must have `dims` of them.
fn spatial(ctx: &NodeCtx, g: &Graph, dims: usize) -> Result<Vec<usize>, ImportError> {
    let x = g.fact(ctx.input(0)?).ok_or_else(|| ctx.err("input 0 has no shape"))?;
    if x.rank() != dims + 2 {
        return Err(ctx.err(format!(
            "a {dims}-D window needs an input of rank {}, got {x}",
            dims + 2
        )));
    }
    Ok(x.shape[2..].to_vec())
}

/// Explicit pads `[begin.., end..]` of a sliding window, resolving `auto_pad`.
fn window_pads(ctx: &NodeCtx, g: &Graph, w: &Window) -> Result<Vec<usize>, ImportError> {
    let a = ctx.attrs();
    let auto = a.string("auto_pad", "NOTSET")?;
    let n = w.dims;
    match auto.as_str() {
        "NOTSET" => a.usizes("pads", &vec![0; 2 * n], Some(2 * n)),
        "VALID" => Ok(vec![0; 2 * n]),
        "SAME_UPPER" | "SAME_LOWER" => {
            let x = spatial(ctx, g, n)?;
            let mut pads = vec![0; 2 * n];
            for i in 0..n {
                let out = x[i].div_ceil(w.strides[i].max(1));
                let eff = w.dilations[i]
                    .checked_mul(w.kernel[i].max(1) - 1)
                    .and_then(|e| e.checked_add(1));
                let reach = out
                    .checked_sub(1)
                    .and_then(|o| o.checked_mul(w.strides[i]))
                    .zip(eff)
                    .and_then(|(r, e)| r.checked_add(e))
                    .ok_or_else(|| {
                        ctx.err(format!(
                            "auto_pad {auto}: axis {} of size {} cannot hold a window of kernel {}, stride {}, dilation {}",
                            2 + i,
                            x[i],
                            w.kernel[i],
                            w.strides[i],
                            w.dilations[i]
                        ))
                    })?;
                let total = reach.saturating_sub(x[i]);
                let small = total / 2;
                (pads[i], pads[i + n]) = if auto == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
            }
            Ok(pads)
        }
        other => Err(a.err("auto_pad", format!("unknown value `{other}`"))),
    }
}

/// The node as `op`, wrapped for a 1-D window: the input reshaped to
/// `[N, C, 1, L]`, `weight` (already 2-D) replacing input 1, and the
/// output reshaped back to rank 3.
fn lower_windowed(
    ctx: &NodeCtx,
    w: &Window,
    op: Op,
    weight: Option<Tensor>,
    n_in: usize,
) -> Result<Lowered, ImportError> {
    let inputs = ctx.data_inputs(n_in)?;
    if w.dims == 2 {
        return Ok(Lowered::Op(op, inputs));
    }
    let to = |shape: &[i64]| {
        Op::Reshape(Reshape {
            shape: shape.to_vec(),
            allowzero: false,
        })
    };
    let mut main: Vec<Src> = vec![Src::Step(0)];
    if let Some(wt) = weight {
        main.push(Src::Const(wt));
    }
    main.extend(inputs[main.len()..].iter().map(|&o| Src::Value(o)));
    Ok(Lowered::Chain(vec![
        Step {
            suffix: "as_2d",
            op: to(&[0, 0, 1, -1]),
            inputs: vec![Src::Value(inputs[0])],
        },
        Step {
            suffix: "2d",
            op,
            inputs: main,
        },
        Step {
            suffix: "as_1d",
            op: to(&[0, 0, -1]),
            inputs: vec![Src::Step(1)],
        },
    ]))
}

/// The weight of a Conv/ConvTranspose (input 1): its spatial rank, and for
/// a 1-D window the constant reshaped to 2-D.
fn weight(ctx: &NodeCtx, g: &Graph, op: &str) -> Result<(Vec<usize>, Option<Tensor>), ImportError> {
    let w = g
        .fact(ctx.input(1)?)
        .cloned()
        .ok_or_else(|| ctx.err("the weight has no shape"))?;
    match w.rank() {
        4 => Ok((w.shape.clone(), None)),
        3 => {
            let t = g
                .const_tensor(ctx.input(1)?)
                .ok_or_else(|| ctx.err(format!("a 1-D {op} needs a constant weight")))?;
            let s = &w.shape;
            let lifted = t
                .reshaped(vec![s[0], s[1], 1, s[2]])
                .ok_or_else(|| ctx.err(format!("cannot lift the weight {w} to 2-D")))?;
            Ok((vec![s[0], s[1], 1, s[2]], Some(lifted)))
        }
        r => Err(ctx.err(format!(
            "only 1-D and 2-D {op} are supported; the weight {w} makes it {}-D",
            r.saturating_sub(2)
        ))),
    }
}

fn n_inputs(ctx: &NodeCtx) -> usize {
    if ctx.inputs.get(2).copied().flatten().is_some() {
        3
    } else {
        2
    }
}

fn check_kernel_attr(ctx: &NodeCtx, kernel: &[usize]) -> Result<(), ImportError> {
    let a = ctx.attrs();
    if let Some(k) = a.ints("kernel_shape")?
        && k.iter().map(|&v| v as usize).collect::<Vec<_>>() != kernel
    {
        return Err(a.err("kernel_shape", format!("{k:?} disagrees with the weight's {kernel:?}")));
    }
    Ok(())
}

pub(super) fn conv(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let (wshape, lifted) = weight(ctx, g, "convolution")?;
    let dims = if lifted.is_some() { 1 } else { 2 };
    let kernel = wshape[4 - dims..].to_vec();
    check_kernel_attr(ctx, &kernel)?;
    let w = Window::read(ctx, kernel)?;
    let group = ctx.attrs().int("group", 1)?;
    let group = usize::try_from(group).map_err(|_| ctx.attrs().err("group", "must be positive"))?;
    let pads = window_pads(ctx, g, &w)?;
    let op = Op::Conv(Conv {
        strides: w.two(&w.strides, 1),
        pads: w.pads2(&pads),
        dilations: w.two(&w.dilations, 1),
        group,
    });
    lower_windowed(ctx, &w, op, lifted, n_inputs(ctx))
}

/// Begin and end padding of one axis of a transposed convolution whose
/// output length is fixed (`output_shape`, or `auto_pad` SAME: input ×
/// stride): the cut from the full output split as ONNX says, the odd one
/// at the end for SAME_UPPER and at the beginning otherwise.
fn transpose_pads(
    ctx: &NodeCtx,
    full: usize,
    want: usize,
    upper: bool,
    axis: usize,
) -> Result<(usize, usize), ImportError> {
    let total = full.checked_sub(want).ok_or_else(|| {
        ctx.err(format!(
            "output length {want} of axis {axis} is longer than the {full} the kernel, strides and output_padding give"
        ))
    })?;
    let small = total / 2;
    Ok(if upper {
        (small, total - small)
    } else {
        (total - small, small)
    })
}

pub(super) fn conv_transpose(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    let (wshape, lifted) = weight(ctx, g, "transposed convolution")?;
    let dims = if lifted.is_some() { 1 } else { 2 };
    let kernel = wshape[4 - dims..].to_vec();
    check_kernel_attr(ctx, &kernel)?;
    let w = Window::read(ctx, kernel)?;
    let group = usize::try_from(a.int("group", 1)?).map_err(|_| a.err("group", "must be positive"))?;
    let output_padding = a.usizes("output_padding", &vec![0; dims], Some(dims))?;
    let x = spatial(ctx, g, dims)?;
    let auto = a.string("auto_pad", "NOTSET")?;
    let want: Option<Vec<usize>> = match (a.usizes("output_shape", &[], None)?, auto.as_str()) {
        (s, _) if !s.is_empty() => {
            let s = s[s.len().saturating_sub(dims)..].to_vec();
            if s.len() != dims {
                return Err(a.err("output_shape", format!("needs {dims} spatial lengths, got {s:?}")));
            }
            Some(s)
        }
        (_, "SAME_UPPER" | "SAME_LOWER") => {
            Some(x.iter().zip(&w.strides).map(|(&v, &s)| v.saturating_mul(s)).collect())
        }
        (_, "NOTSET" | "VALID") => None,
        (_, other) => return Err(a.err("auto_pad", format!("unknown value `{other}`"))),
    };
    let pads = match want {
        None if auto == "VALID" => vec![0; 2 * dims],
        None => a.usizes("pads", &vec![0; 2 * dims], Some(2 * dims))?,
        Some(want) => {
            let mut pads = vec![0; 2 * dims];
            let probe = ConvTranspose {
                strides: w.two(&w.strides, 1),
                pads: [0; 4],
                dilations: w.two(&w.dilations, 1),
                output_padding: w.two(&output_padding, 0),
                group,
            };
            let upper = auto == "SAME_UPPER";
            for i in 0..dims {
                let axis = 4 - dims + i;
                let full = probe.out_len(axis - 2, x[i], wshape[axis]).map_err(|e| ctx.err(e))?;
                (pads[i], pads[i + dims]) = transpose_pads(ctx, full, want[i], upper, axis)?;
            }
            pads
        }
    };
    let op = Op::ConvTranspose(ConvTranspose {
        strides: w.two(&w.strides, 1),
        pads: w.pads2(&pads),
        dilations: w.two(&w.dilations, 1),
        output_padding: w.two(&output_padding, 0),
        group,
    });
    lower_windowed(ctx, &w, op, lifted, n_inputs(ctx))
}

pub(super) fn pool(ctx: &NodeCtx, g: &Graph, kind: PoolKind) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    if ctx.proto.output.len() > 1 && !ctx.proto.output[1].is_empty() {
        return Err(ctx.err("the Indices output of MaxPool is not supported"));
    }
    let kernel = a.usizes("kernel_shape", &[], None)?;
    if kernel.is_empty() {
        return Err(a.err("kernel_shape", "is required"));
    }
    if kernel.len() > 2 {
        return Err(ctx.err(format!(
            "only 1-D and 2-D pooling is supported; kernel_shape {kernel:?} makes it {}-D",
            kernel.len()
        )));
    }
    let w = Window::read(ctx, kernel)?;
    spatial(ctx, g, w.dims)?;
    let pads = window_pads(ctx, g, &w)?;
    let kind = match kind {
        PoolKind::Max => PoolKind::Max,
        PoolKind::Average { .. } => PoolKind::Average {
            count_include_pad: a.int("count_include_pad", 0)? != 0,
        },
    };
    let op = Op::Pool(Pool {
        kind,
        kernel: w.two(&w.kernel, 1),
        strides: w.two(&w.strides, 1),
        pads: w.pads2(&pads),
        dilations: w.two(&w.dilations, 1),
        ceil_mode: a.int("ceil_mode", 0)? != 0,
    });
    lower_windowed(ctx, &w, op, None, 1)
}
