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
