//! burn options for the upsampling ops (Resize, ConvTranspose), or why a
//! node's ONNX semantics have no exact burn counterpart.

use burn::tensor::ops::{ConvTransposeOptions, InterpolateMode, InterpolateOptions};
use graph_ir::ops::{ConvTranspose, CoordMode, NearestMode, Resize, ResizeMode, ResizeTarget};

/// The interpolation that computes `r` from `[h, w]` to `out`, exactly as
/// ONNX defines it. burn's nearest mode takes the floor of the asymmetric
/// coordinate, and its bilinear mode uses half-pixel (or corner-aligned)
/// coordinates with the output/input ratio as the scale.
pub(crate) fn interpolate(r: &Resize, input: [usize; 2], out: [usize; 2]) -> Result<InterpolateOptions, String> {
    if let ResizeTarget::Scales(s) = r.target {
        for i in 0..2 {
            if (input[i] as f64 * s[i] as f64) != out[i] as f64 {
                return Err(format!(
                    "scale {} of axis {} is not output / input length ({}/{}), which training uses",
                    s[i],
                    2 + i,
                    out[i],
                    input[i]
                ));
            }
        }
    }
    let integer_upsampling = (0..2).all(|i| out[i].is_multiple_of(input[i]));
    let half = matches!(r.coord, CoordMode::HalfPixel | CoordMode::PytorchHalfPixel);
    let mode = match (r.mode, r.coord) {
        (ResizeMode::Nearest(NearestMode::Floor), CoordMode::Asymmetric) => InterpolateMode::Nearest,
        (ResizeMode::Nearest(NearestMode::RoundPreferFloor | NearestMode::RoundPreferCeil), _)
            if half && integer_upsampling =>
        {
            InterpolateMode::Nearest
        }
        (ResizeMode::Linear, CoordMode::AlignCorners) => {
            return Ok(InterpolateOptions::new(InterpolateMode::Bilinear)
                .with_align_corners(true)
                .with_output_size(out));
        }
        (ResizeMode::Linear, _) if half && out.iter().all(|&o| o > 1) => InterpolateMode::Bilinear,
        (mode, coord) => {
            return Err(format!(
                "{mode:?} resizing with {} coordinates from {input:?} to {out:?} has no exact trainable kernel",
                coord.onnx_name()
            ));
        }
    };
    Ok(InterpolateOptions::new(mode)
        .with_align_corners(false)
        .with_output_size(out))
}

/// burn's transposed convolution pads both ends of an axis alike.
pub(crate) fn conv_transpose(c: &ConvTranspose) -> Result<ConvTransposeOptions<2>, String> {
    if c.pads[0] != c.pads[2] || c.pads[1] != c.pads[3] {
        return Err(format!("uneven pads {:?} cannot be trained", c.pads));
    }
    Ok(ConvTransposeOptions::new(
        c.strides,
        [c.pads[0], c.pads[1]],
        c.output_padding,
        c.dilations,
        c.group,
    ))
}

/// Bicubic resizing as two weight matrices (ONNX's definition: Keys'
/// kernel over the four nearest input positions, edge values beyond the
/// border, or zero weights there renormalised with `exclude_outside`):
/// the `[out_h, in_h]` and `[out_w, in_w]` matrices, row-major.
pub(crate) fn cubic(r: &Resize, input: [usize; 2], output: [usize; 2]) -> (Vec<f32>, Vec<f32>) {
    let ResizeMode::Cubic { a, exclude_outside } = r.mode else {
        unreachable!("called for cubic resizing only")
    };
    let axis = |i: usize| {
        let scale = match r.target {
            ResizeTarget::Scales(s) => s[i] as f64,
            ResizeTarget::Sizes(_) => output[i] as f64 / input[i] as f64,
        };
        cubic_weights(r.coord, a as f64, exclude_outside, scale, input[i], output[i])
    };
    (axis(0), axis(1))
}

/// The `[output, input]` weights of cubic resampling along one axis
/// (`align_corners` maps the corners of the integer output length, as
/// the ONNX text and onnxruntime do).
fn cubic_weights(coord: CoordMode, a: f64, exclude_outside: bool, scale: f64, input: usize, output: usize) -> Vec<f32> {
    let mut m = vec![0.0f64; output * input];
    let out_len = output as f64;
    for o in 0..output {
        let x = o as f64;
        let src = match coord {
            CoordMode::AlignCorners if out_len == 1.0 => 0.0,
            CoordMode::AlignCorners => x * (input as f64 - 1.0) / (out_len - 1.0),
            CoordMode::Asymmetric => x / scale,
            CoordMode::PytorchHalfPixel if out_len == 1.0 => -0.5,
            CoordMode::PytorchHalfPixel | CoordMode::HalfPixel => (x + 0.5) / scale - 0.5,
        };
        let (base, ratio) = if src == src.floor() {
            (src - 1.0, 1.0)
        } else {
            (src.floor(), src - src.floor())
        };
        let coeffs = keys(ratio, a);
        let taps: Vec<i64> = (0..4).map(|k| base as i64 - 1 + k).collect();
        let inside = |t: i64| t >= 0 && t < input as i64;
        let total: f64 = if exclude_outside {
            taps.iter()
                .zip(coeffs)
                .filter(|(t, _)| inside(**t))
                .map(|(_, c)| c)
                .sum()
        } else {
            1.0
        };
        for (&t, c) in taps.iter().zip(coeffs) {
            if exclude_outside && !inside(t) {
                continue;
            }
            let at = t.clamp(0, input as i64 - 1) as usize;
            m[o * input + at] += c / total;
        }
    }
    m.into_iter().map(|v| v as f32).collect()
}

/// Keys' cubic weights of the taps at `-1, 0, 1, 2` from the position
/// left of a point, `ratio` (in `(0, 1]`) past it: a point on a sample
/// has that sample at `1`.
fn keys(ratio: f64, a: f64) -> [f64; 4] {
    let far = |d: f64| ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a;
    let near = |d: f64| ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0;
    [far(ratio + 1.0), near(ratio), near(1.0 - ratio), far(2.0 - ratio)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cubic_weights_interpolate_exactly_on_samples_and_sum_to_one() {
        let same = cubic_weights(CoordMode::AlignCorners, -0.75, false, 1.0, 5, 5);
        for o in 0..5 {
            for i in 0..5 {
                assert_eq!(same[o * 5 + i], if o == i { 1.0 } else { 0.0 }, "{o} {i}");
            }
        }
        for exclude in [false, true] {
            let up = cubic_weights(CoordMode::HalfPixel, -0.5, exclude, 2.0, 4, 8);
            for row in up.chunks(4) {
                assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6, "{row:?}");
            }
        }
        let clamped = cubic_weights(CoordMode::HalfPixel, -0.75, false, 2.0, 4, 8);
        let excluded = cubic_weights(CoordMode::HalfPixel, -0.75, true, 2.0, 4, 8);
        assert_ne!(
            clamped[0], excluded[0],
            "taps beyond the border read the edge, or are dropped"
        );
    }
}
