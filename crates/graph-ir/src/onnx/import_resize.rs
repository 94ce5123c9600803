//! Lowering of ONNX `Resize` (opsets 10 to 19) and `Upsample` (7 and 9) to
//! a [`Resize`] of H and W with constant scales or sizes.

use super::ImportError;
use super::node_ctx::{Lowered, NodeCtx};
use crate::graph::Graph;
use crate::ops::*;

/// Scales or sizes given per axis (all axes, or those of the `axes`
/// attribute), checked to keep N and C, as a target over H and W.
fn target(
    ctx: &NodeCtx,
    g: &Graph,
    scales: Option<Vec<f32>>,
    sizes: Option<Vec<i64>>,
) -> Result<ResizeTarget, ImportError> {
    let x = g.fact(ctx.input(0)?).ok_or_else(|| ctx.err("input 0 has no shape"))?;
    if x.rank() != 4 {
        return Err(ctx.err(format!("only 4-D [N, C, H, W] inputs can be resized, got {x}")));
    }
    let axes: Vec<usize> = match ctx.attrs().ints("axes")? {
        None => (0..4).collect(),
        Some(v) => v
            .iter()
            .map(|&a| resolve_axis(a, 4).map_err(|e| ctx.attrs().err("axes", e)))
            .collect::<Result<_, _>>()?,
    };
    let full = |given: usize, what: &str| -> Result<(), ImportError> {
        if given != axes.len() {
            return Err(ctx.err(format!("{given} {what} for {} axes", axes.len())));
        }
        Ok(())
    };
    if let Some(s) = scales.filter(|s| !s.is_empty()) {
        full(s.len(), "scales")?;
        let mut all = [1.0f32; 4];
        for (&a, &v) in axes.iter().zip(&s) {
            all[a] = v;
        }
        if all[0] != 1.0 || all[1] != 1.0 {
            return Err(ctx.err(format!("scales {s:?} resize N or C; only H and W can be resized")));
        }
        return Ok(ResizeTarget::Scales([all[2], all[3]]));
    }
    let s = sizes.ok_or_else(|| ctx.err("needs scales or sizes"))?;
    full(s.len(), "sizes")?;
    let mut all: Vec<i64> = x.shape.iter().map(|&d| d as i64).collect();
    for (&a, &v) in axes.iter().zip(&s) {
        all[a] = v;
    }
    if all[0] != x.shape[0] as i64 || all[1] != x.shape[1] as i64 {
        return Err(ctx.err(format!("sizes {s:?} resize N or C of {x}; only H and W can be resized")));
    }
    let hw = |v: i64| usize::try_from(v).ok().filter(|&v| v > 0);
    match (hw(all[2]), hw(all[3])) {
        (Some(h), Some(w)) => Ok(ResizeTarget::Sizes([h, w])),
        _ => Err(ctx.err(format!("sizes {s:?} must be positive"))),
    }
}

fn const_floats(ctx: &NodeCtx, g: &Graph, i: usize) -> Result<Option<Vec<f32>>, ImportError> {
    match ctx.const_input(g, i)? {
        None => Ok(None),
        Some(t) => t
            .to_f64_vec()
            .map(|v| Some(v.into_iter().map(|x| x as f32).collect()))
            .ok_or_else(|| ctx.err(format!("input {i} must hold floats"))),
    }
}

/// Nearest mode of the opset-10 Resize and of Upsample: the floor of the
/// asymmetric coordinate when enlarging, its ceiling when shrinking.
fn simple_nearest(ctx: &NodeCtx, t: ResizeTarget) -> Result<NearestMode, ImportError> {
    match t {
        ResizeTarget::Scales(s) if s.iter().all(|&v| v >= 1.0) => Ok(NearestMode::Floor),
        ResizeTarget::Scales(s) if s.iter().all(|&v| v <= 1.0) => Ok(NearestMode::Ceil),
        _ => Err(ctx.err(format!(
            "opset {} nearest resizing that enlarges one axis and shrinks another is not supported",
            ctx.opset
        ))),
    }
}

fn mode_name(ctx: &NodeCtx) -> Result<String, ImportError> {
    let a = ctx.attrs();
    let mode = a.string("mode", "nearest")?;
    match mode.as_str() {
        "nearest" | "linear" | "bilinear" | "cubic" => Ok(mode),
        other => Err(a.err(
            "mode",
            format!("`{other}` is not supported (nearest, linear and cubic are)"),
        )),
    }
}

pub(super) fn upsample(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let scales = if ctx.opset < 9 {
        ctx.attrs().floats("scales")?
    } else {
        const_floats(ctx, g, 1)?
    };
    asymmetric(ctx, g, Some(scales.ok_or_else(|| ctx.err("scales are required"))?))
}

/// Upsample and the opset-10 Resize: asymmetric coordinates, the nearest
/// mode of [`simple_nearest`], scales only.
fn asymmetric(ctx: &NodeCtx, g: &Graph, scales: Option<Vec<f32>>) -> Result<Lowered, ImportError> {
    let target = target(ctx, g, scales, None)?;
    let mode = match mode_name(ctx)?.as_str() {
        "nearest" => ResizeMode::Nearest(simple_nearest(ctx, target)?),
        "cubic" => return Err(ctx.err(format!("opset {} has no cubic resizing", ctx.opset))),
        _ => ResizeMode::Linear,
    };
    let op = Resize {
        mode,
        coord: CoordMode::Asymmetric,
        target,
    };
    Ok(Lowered::Op(Op::Resize(op), ctx.data_inputs(1)?))
}

pub(super) fn resize(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    if ctx.opset < 11 {
        return asymmetric(ctx, g, const_floats(ctx, g, 1)?);
    }
    if a.int("antialias", 0)? != 0 {
        return Err(a.err("antialias", "antialiased resizing is not supported"));
    }
    let exclude_outside = a.int("exclude_outside", 0)? != 0;
    let policy = a.string("keep_aspect_ratio_policy", "stretch")?;
    if policy != "stretch" {
        return Err(a.err(
            "keep_aspect_ratio_policy",
            format!("`{policy}` is not supported (stretch is)"),
        ));
    }
    let coord_name = a.string("coordinate_transformation_mode", "half_pixel")?;
    let coord = CoordMode::from_onnx(&coord_name).ok_or_else(|| {
        a.err(
            "coordinate_transformation_mode",
            format!(
                "`{coord_name}` is not supported (half_pixel, pytorch_half_pixel, align_corners and asymmetric are)"
            ),
        )
    })?;
    let mode = match mode_name(ctx)?.as_str() {
        "nearest" => {
            let n = a.string("nearest_mode", "round_prefer_floor")?;
            ResizeMode::Nearest(
                NearestMode::from_onnx(&n).ok_or_else(|| a.err("nearest_mode", format!("unknown value `{n}`")))?,
            )
        }
        "cubic" => ResizeMode::Cubic {
            a: a.float("cubic_coeff_a", -0.75)?,
            exclude_outside,
        },
        _ => ResizeMode::Linear,
    };
    if exclude_outside && !matches!(mode, ResizeMode::Cubic { .. }) {
        return Err(a.err("exclude_outside", "is supported with cubic resizing only"));
    }
    let target = target(ctx, g, const_floats(ctx, g, 2)?, ctx.const_ints(g, 3)?)?;
    let op = Resize { mode, coord, target };
    Ok(Lowered::Op(Op::Resize(op), ctx.data_inputs(1)?))
}
