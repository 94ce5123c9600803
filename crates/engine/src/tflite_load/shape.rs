//! Operators that move values: RESHAPE, TRANSPOSE, CONCATENATION, PAD,
//! PADV2, SLICE, and the resizes.

use super::Loader;
use super::conv::dims;
use litert::schema::litert as fb;
use tract_core::internal::*;
use tract_core::ops::array::{Pad, PadMode, Slice, TypedConcat};
use tract_core::ops::change_axes::perm_to_ops;
use tract_core::ops::nn::{CoordTransformer, Interpolator, Nearest, Resize};

/// RESHAPE to the output tensor's shape.
pub(super) fn reshape(l: &mut Loader, name: &str, x: i32, y: i32) -> TractResult<OutletId> {
    let (from, to) = (l.shape(x)?, l.shape(y)?);
    ensure!(
        from.iter().product::<usize>() == to.iter().product::<usize>(),
        "reshapes {from:?} to {to:?}"
    );
    let w = l.float(x)?;
    if from == to {
        return Ok(w);
    }
    l.wire(name, AxisOp::Reshape(0, dims(&from), dims(&to)), &[w])
}

/// TRANSPOSE by the constant permutation `ins[1]`.
pub(super) fn transpose(l: &mut Loader, name: &str, ins: &[i32]) -> TractResult<OutletId> {
    let rank = l.shape(ins[0])?.len();
    let perm = l.ints(*ins.get(1).context("has no permutation input")?)?;
    let perm: Vec<usize> = perm.iter().filter_map(|p| usize::try_from(*p).ok()).collect();
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    ensure!(
        sorted == (0..rank).collect::<Vec<_>>(),
        "permutes a rank-{rank} tensor by {perm:?}"
    );
    let mut w = l.float(ins[0])?;
    for (k, op) in perm_to_ops(&perm).into_iter().enumerate() {
        w = l.wire(&format!("{name}.{k}"), op, &[w])?;
    }
    Ok(w)
}

fn axis(a: i64, rank: usize) -> TractResult<usize> {
    let r = rank as i64;
    let a = if a < 0 { a + r } else { a };
    ensure!((0..r).contains(&a), "names axis {a} of a rank-{rank} tensor");
    Ok(a as usize)
}

/// CONCATENATION along its axis, with its fused activation.
pub(super) fn concat(l: &mut Loader, name: &str, op: &fb::Operator, ins: &[i32]) -> TractResult<OutletId> {
    let o = op
        .builtin_options_as_concatenation_options()
        .context("has no ConcatenationOptions")?;
    let rank = l.shape(ins[0])?.len();
    let a = axis(o.axis() as i64, rank)?;
    let wires = ins.iter().map(|i| l.float(*i)).collect::<TractResult<Vec<_>>>()?;
    let w = l.wire(name, TypedConcat { axis: a }, &wires)?;
    l.activation(name, w, o.fused_activation_function())
}

/// PAD (zeros) and PADV2 (the constant value `ins[2]`) by the constant
/// paddings `ins[1]`, `[rank, 2]`.
pub(super) fn pad(l: &mut Loader, name: &str, ins: &[i32]) -> TractResult<OutletId> {
    let rank = l.shape(ins[0])?.len();
    let p = l.ints(*ins.get(1).context("has no paddings input")?)?;
    ensure!(p.len() == 2 * rank, "has {} paddings for a rank-{rank} tensor", p.len());
    let pads = p
        .chunks(2)
        .map(|c| Ok((usize::try_from(c[0])?, usize::try_from(c[1])?)))
        .collect::<TractResult<Vec<_>>>()
        .context("has a negative padding")?;
    let value = match ins.get(2).copied().filter(|v| *v >= 0) {
        Some(v) => {
            let t = l.float_const(v)?.context("pads with a value that is not a constant")?;
            ensure!(t.len() == 1, "pads with {} values", t.len());
            t.cast_to_scalar::<f32>()?
        }
        None => 0.0,
    };
    let w = l.float(ins[0])?;
    let op = Pad {
        pads,
        mode: PadMode::Constant(Arc::new(tensor0(value))),
    };
    l.wire(name, op, &[w])
}

/// SLICE from the constant `begin` (`ins[1]`) for the constant `size`
/// (`ins[2]`, −1 to the end).
pub(super) fn slice(l: &mut Loader, name: &str, ins: &[i32]) -> TractResult<OutletId> {
    let xs = l.shape(ins[0])?;
    let begin = l.ints(*ins.get(1).context("has no begin input")?)?;
    let size = l.ints(*ins.get(2).context("has no size input")?)?;
    ensure!(
        begin.len() == xs.len() && size.len() == xs.len(),
        "slices a rank-{} tensor from {begin:?} for {size:?}",
        xs.len()
    );
    let mut w = l.float(ins[0])?;
    for (a, (&b, &s)) in begin.iter().zip(&size).enumerate() {
        let start = usize::try_from(b).ok().filter(|b| *b <= xs[a]);
        let end = match s {
            -1 => start.map(|_| xs[a]),
            s => usize::try_from(s).ok().and_then(|s| start.map(|b| b + s)),
        };
        let (Some(start), Some(end)) = (start, end.filter(|e| *e <= xs[a])) else {
            bail!("slices axis {a} of length {} from {b} for {s}", xs[a]);
        };
        if start != 0 || end != xs[a] {
            w = l.wire(&format!("{name}.axis{a}"), Slice::new(a, start, end), &[w])?;
        }
    }
    Ok(w)
}

/// RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR of an NHWC tensor to the
/// constant size `ins[1]` (`[height, width]`), with their
/// coordinate flags.
pub(super) fn resize(
    l: &mut Loader,
    name: &str,
    code: fb::BuiltinOperator,
    op: &fb::Operator,
    ins: &[i32],
) -> TractResult<OutletId> {
    let xs = l.shape(ins[0])?;
    ensure!(xs.len() == 4, "resizes a rank-{} tensor (NHWC expected)", xs.len());
    let size = l.ints(*ins.get(1).context("has no size input")?)?;
    let [h, w] = size[..] else {
        bail!("resizes to {size:?}, not [height, width]");
    };
    let (h, w) = (usize::try_from(h)?, usize::try_from(w)?);
    let (coord, interpolator, nearest) = if code == fb::BuiltinOperator::RESIZE_BILINEAR {
        let o = op
            .builtin_options_as_resize_bilinear_options()
            .context("has no ResizeBilinearOptions")?;
        let coord = match (o.align_corners(), o.half_pixel_centers()) {
            (true, _) => CoordTransformer::AlignCorners,
            (_, true) => CoordTransformer::HalfPixel,
            _ => CoordTransformer::Asymmetric,
        };
        (coord, Interpolator::Linear, Nearest::Floor)
    } else {
        let o = op
            .builtin_options_as_resize_nearest_neighbor_options()
            .context("has no ResizeNearestNeighborOptions")?;
        match (o.align_corners(), o.half_pixel_centers()) {
            (true, _) => (
                CoordTransformer::AlignCorners,
                Interpolator::Nearest,
                Nearest::RoundPreferCeil,
            ),
            (_, true) => (
                CoordTransformer::TfHalfPixelForNn,
                Interpolator::Nearest,
                Nearest::Floor,
            ),
            _ => (CoordTransformer::Asymmetric, Interpolator::Nearest, Nearest::Floor),
        }
    };
    let x = l.float(ins[0])?;
    let sizes = l.konst(&format!("{name}.sizes"), tensor1(&dims(&[xs[0], h, w, xs[3]])))?;
    let op = Resize {
        coord_transformer: coord,
        interpolator,
        nearest,
        optional_scales_input: None,
        optional_sizes_input: Some(1),
    };
    l.wire(name, op, &[x, sizes])
}
