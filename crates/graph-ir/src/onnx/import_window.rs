//! Lowering of windowed ONNX nodes: Conv, ConvTranspose and the pools,
//! 2-D directly and 1-D as the 2-D op over a height of 1 (a Reshape to
//! `[N, C, 1, L]` before and back to `[N, C', L']` after).

use super::ImportError;
use super::node_ctx::{Lowered, NodeCtx, Src, Step};
use crate::graph::{Graph, Outlet};
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

/// `total` padding as (begin, end): the odd one at the end when `upper`
/// (ONNX SAME_UPPER), at the beginning otherwise.
fn split_pad(total: usize, upper: bool) -> (usize, usize) {
    let small = total / 2;
    if upper {
        (small, total - small)
    } else {
        (total - small, small)
    }
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
                (pads[i], pads[i + n]) = split_pad(reach.saturating_sub(x[i]), auto == "SAME_UPPER");
            }
            Ok(pads)
        }
        other => Err(a.err("auto_pad", format!("unknown value `{other}`"))),
    }
}

/// The node as `op` reading `inputs`, wrapped for a 1-D window: input 0
/// reshaped to `[N, C, 1, L]`, `weight` (already 2-D) replacing input 1,
/// and the output reshaped back to rank 3.
fn lower_windowed(w: &Window, op: Op, inputs: Vec<Outlet>, weight: Option<Tensor>) -> Lowered {
    if w.dims == 2 {
        return Lowered::Op(op, inputs);
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
    Lowered::Chain(vec![
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
    ])
}

/// What Conv and ConvTranspose read alike: the weight (input 1) as 2-D
/// dims, the constant lifted to 2-D for a 1-D window, the window's
/// attributes (`kernel_shape` checked against the weight) and `group`.
struct Weighted {
    wshape: Vec<usize>,
    lifted: Option<Tensor>,
    window: Window,
    group: usize,
}

impl Weighted {
    fn read(ctx: &NodeCtx, g: &Graph, op: &str) -> Result<Weighted, ImportError> {
        let a = ctx.attrs();
        let w = g
            .fact(ctx.input(1)?)
            .cloned()
            .ok_or_else(|| ctx.err("the weight has no shape"))?;
        let (wshape, lifted) = match w.rank() {
            4 => (w.shape.clone(), None),
            3 => {
                let t = g
                    .const_tensor(ctx.input(1)?)
                    .ok_or_else(|| ctx.err(format!("a 1-D {op} needs a constant weight")))?;
                let s = vec![w.shape[0], w.shape[1], 1, w.shape[2]];
                let lifted = t
                    .reshaped(s.clone())
                    .ok_or_else(|| ctx.err(format!("cannot lift the weight {w} to 2-D")))?;
                (s, Some(lifted))
            }
            r => {
                return Err(ctx.err(format!(
                    "only 1-D and 2-D {op} are supported; the weight {w} makes it {}-D",
                    r.saturating_sub(2)
                )));
            }
        };
        let dims = if lifted.is_some() { 1 } else { 2 };
        let kernel = wshape[4 - dims..].to_vec();
        if let Some(k) = a.ints("kernel_shape")?
            && k.iter().map(|&v| v as usize).collect::<Vec<_>>() != kernel
        {
            return Err(a.err("kernel_shape", format!("{k:?} disagrees with the weight's {kernel:?}")));
        }
        let group = usize::try_from(a.int("group", 1)?).map_err(|_| a.err("group", "must be positive"))?;
        Ok(Weighted {
            wshape,
            lifted,
            window: Window::read(ctx, kernel)?,
            group,
        })
    }
}

pub(super) fn conv(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let Weighted {
        lifted,
        window: w,
        group,
        ..
    } = Weighted::read(ctx, g, "convolution")?;
    let pads = window_pads(ctx, g, &w)?;
    let op = Op::Conv(Conv {
        strides: w.two(&w.strides, 1),
        pads: w.pads2(&pads),
        dilations: w.two(&w.dilations, 1),
        group,
    });
    Ok(lower_windowed(&w, op, ctx.inputs_with_bias()?, lifted))
}

pub(super) fn conv_transpose(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    let Weighted {
        wshape,
        lifted,
        window: w,
        group,
    } = Weighted::read(ctx, g, "transposed convolution")?;
    let dims = w.dims;
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
    let mut ct = ConvTranspose {
        strides: w.two(&w.strides, 1),
        pads: [0; 4],
        dilations: w.two(&w.dilations, 1),
        output_padding: w.two(&output_padding, 0),
        group,
    };
    let pads = match want {
        None if auto == "VALID" => vec![0; 2 * dims],
        None => a.usizes("pads", &vec![0; 2 * dims], Some(2 * dims))?,
        Some(want) => {
            let mut pads = vec![0; 2 * dims];
            for i in 0..dims {
                let axis = 4 - dims + i;
                let full = ct.out_len(axis - 2, x[i], wshape[axis]).map_err(|e| ctx.err(e))?;
                let total = full.checked_sub(want[i]).ok_or_else(|| {
                    ctx.err(format!(
                        "output length {} of axis {axis} is longer than the {full} the kernel, strides and output_padding give",
                        want[i]
                    ))
                })?;
                (pads[i], pads[i + dims]) = split_pad(total, auto == "SAME_UPPER");
            }
            pads
        }
    };
    ct.pads = w.pads2(&pads);
    Ok(lower_windowed(
        &w,
        Op::ConvTranspose(ct),
        ctx.inputs_with_bias()?,
        lifted,
    ))
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
    Ok(lower_windowed(&w, op, ctx.data_inputs(1)?, None))
}
