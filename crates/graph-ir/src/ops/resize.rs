//! Spatial resampling of `[N, C, H, W]` values (ONNX `Resize`, and the
//! older `Upsample`, imported as a `Resize`).

use super::{Cost, OpSpec, expect_inputs, expect_rank};
use crate::tensor::Fact;

/// How an output coordinate maps back onto the input axis (ONNX
/// `coordinate_transformation_mode`; `scale` is output / input length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoordMode {
    /// `(x + 0.5) / scale − 0.5`.
    HalfPixel,
    /// As `HalfPixel`, but 0 where the output axis has length 1.
    PytorchHalfPixel,
    /// `x · (in − 1) / (out − 1)`.
    AlignCorners,
    /// `x / scale`.
    Asymmetric,
}

impl CoordMode {
    /// The ONNX attribute value.
    pub fn onnx_name(self) -> &'static str {
        match self {
            CoordMode::HalfPixel => "half_pixel",
            CoordMode::PytorchHalfPixel => "pytorch_half_pixel",
            CoordMode::AlignCorners => "align_corners",
            CoordMode::Asymmetric => "asymmetric",
        }
    }

    /// Parses an ONNX attribute value; `None` for modes not supported.
    pub fn from_onnx(s: &str) -> Option<CoordMode> {
        Some(match s {
            "half_pixel" => CoordMode::HalfPixel,
            "pytorch_half_pixel" => CoordMode::PytorchHalfPixel,
            "align_corners" => CoordMode::AlignCorners,
            "asymmetric" => CoordMode::Asymmetric,
            _ => return None,
        })
    }
}

/// How a fractional input coordinate picks one input value (ONNX `nearest_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

impl NearestMode {
    /// The ONNX attribute value.
    pub fn onnx_name(self) -> &'static str {
        match self {
            NearestMode::RoundPreferFloor => "round_prefer_floor",
            NearestMode::RoundPreferCeil => "round_prefer_ceil",
            NearestMode::Floor => "floor",
            NearestMode::Ceil => "ceil",
        }
    }

    /// Parses an ONNX attribute value.
    pub fn from_onnx(s: &str) -> Option<NearestMode> {
        Some(match s {
            "round_prefer_floor" => NearestMode::RoundPreferFloor,
            "round_prefer_ceil" => NearestMode::RoundPreferCeil,
            "floor" => NearestMode::Floor,
            "ceil" => NearestMode::Ceil,
            _ => return None,
        })
    }
}

/// Interpolation between input values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ResizeMode {
    Nearest(NearestMode),
    /// Bilinear over H and W.
    Linear,
    /// Bicubic over H and W with Keys' kernel of coefficient `a` (ONNX
    /// `cubic_coeff_a`, −0.75 by default); with `exclude_outside`, taps
    /// outside the input get weight 0 and the rest are renormalised,
    /// else they read the nearest edge value.
    Cubic {
        a: f32,
        exclude_outside: bool,
    },
}

/// The output size, as ONNX gives it: per-axis scales (output length
/// `floor(input · scale)`, and the scale itself in the coordinate mapping)
/// or exact sizes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ResizeTarget {
    Scales([f32; 2]),
    Sizes([usize; 2]),
}

/// Resampling of H and W of `X[N, C, H, W]`; N and C are kept.
#[derive(Clone, Debug, PartialEq)]
pub struct Resize {
    pub mode: ResizeMode,
    pub coord: CoordMode,
    pub target: ResizeTarget,
}

impl Resize {
    /// Output `[H, W]` for an input of `[H, W]`.
    pub fn out_hw(&self, hw: [usize; 2]) -> Result<[usize; 2], String> {
        match self.target {
            ResizeTarget::Sizes(s) => Ok(s),
            ResizeTarget::Scales(s) => {
                let mut out = [0; 2];
                for i in 0..2 {
                    let v = (hw[i] as f64 * s[i] as f64).floor();
                    if !(s[i] > 0.0 && v.is_finite() && v <= (1u64 << 32) as f64) {
                        return Err(format!(
                            "scale {} of axis {} is not a usable positive factor",
                            s[i],
                            2 + i
                        ));
                    }
                    out[i] = v as usize;
                }
                Ok(out)
            }
        }
    }
}

impl OpSpec for Resize {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        let x = inputs[0];
        expect_rank(x, 4, "input X")?;
        let [h, w] = self.out_hw([x.shape[2], x.shape[3]])?;
        if h == 0 || w == 0 {
            return Err(format!("resizing {x} gives an empty {h}x{w} map"));
        }
        Ok(vec![Fact::new(x.dtype, [x.shape[0], x.shape[1], h, w])])
    }

    /// A copy per element for nearest; four weighted reads for bilinear,
    /// sixteen for bicubic.
    fn cost(&self, _inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        let per = match self.mode {
            ResizeMode::Nearest(_) => 1,
            ResizeMode::Linear => 8,
            ResizeMode::Cubic { .. } => 32,
        };
        Cost::elementwise(per, &outputs[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resize(target: ResizeTarget) -> Resize {
        Resize {
            mode: ResizeMode::Nearest(NearestMode::Floor),
            coord: CoordMode::Asymmetric,
            target,
        }
    }

    #[test]
    fn scales_floor_and_sizes_are_exact() {
        let x = Fact::f32([1, 3, 7, 10]);
        let up = resize(ResizeTarget::Scales([2.0, 0.5])).infer(&[&x]).unwrap();
        assert_eq!(up[0].shape, [1, 3, 14, 5]);
        let odd = resize(ResizeTarget::Scales([0.3, 1.0])).infer(&[&x]).unwrap();
        assert_eq!(odd[0].shape, [1, 3, 2, 10]);
        let sized = resize(ResizeTarget::Sizes([4, 9])).infer(&[&x]).unwrap();
        assert_eq!(sized[0].shape, [1, 3, 4, 9]);
    }

    #[test]
    fn rejects_empty_and_bad_scales() {
        let x = Fact::f32([1, 3, 2, 2]);
        assert!(resize(ResizeTarget::Scales([0.1, 1.0])).infer(&[&x]).is_err());
        let err = resize(ResizeTarget::Scales([f32::NAN, 1.0])).infer(&[&x]).unwrap_err();
        assert!(err.contains("scale NaN"), "{err}");
        assert!(
            resize(ResizeTarget::Scales([1.0, 1.0]))
                .infer(&[&Fact::f32([3, 2, 2])])
                .is_err()
        );
    }
}
