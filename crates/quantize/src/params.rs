//! Quantization parameters, in the convention onnxruntime's
//! `quantize_static` and TFLite delegates accept: activations uint8
//! asymmetric per tensor, weights int8 symmetric per output channel
//! (range [-127, 127], zero point 0), biases int32 at the product of the
//! input's and the weight's scales.

/// Scale and zero point of one quantized tensor (or channel).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QParams {
    pub scale: f32,
    pub zero: i32,
}

/// uint8 parameters of an activation whose values lie in `[lo, hi]`, by
/// `quantize_static`'s rule: the range is widened to contain 0 (so zero is
/// exact, as padding needs) and spread over 0..=255, the scale computed in
/// float64 and stored as float32; a scale below float32's smallest normal
/// (a range of no width) becomes 1 with zero point 0.
pub fn activation(lo: f32, hi: f32) -> QParams {
    let (lo, hi) = (f64::from(lo.min(0.0)), f64::from(hi.max(0.0)));
    let scale = (hi - lo) / 255.0;
    if scale < f64::from(f32::MIN_POSITIVE) {
        return QParams { scale: 1.0, zero: 0 };
    }
    let zero = (-lo / scale).round_ties_even().clamp(0.0, 255.0) as i32;
    QParams {
        scale: scale as f32,
        zero,
    }
}

/// int8 symmetric scale of one weight channel with largest magnitude
/// `amax` (`quantize_static`'s rule: `amax / 127` in float64, 1 where that
/// is below float32's smallest normal).
pub fn weight_scale(amax: f32) -> f32 {
    let scale = f64::from(amax) / 127.0;
    if scale < f64::from(f32::MIN_POSITIVE) {
        1.0
    } else {
        scale as f32
    }
}

/// `round_half_even(x / scale) + zero`, saturated to `lo..=hi`.
pub fn quantize(x: f32, p: QParams, lo: i32, hi: i32) -> i32 {
    let q = (x / p.scale).round_ties_even() as i64 + p.zero as i64;
    q.clamp(lo as i64, hi as i64) as i32
}

/// `(q − zero) · scale`.
pub fn dequantize(q: i32, p: QParams) -> f32 {
    (q - p.zero) as f32 * p.scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activations_contain_zero_exactly() {
        let p = activation(0.5, 6.0);
        assert_eq!(p.zero, 0);
        assert!((p.scale - 6.0 / 255.0).abs() < 1e-9);
        let p = activation(-1.0, 3.0);
        assert_eq!(dequantize(quantize(0.0, p, 0, 255), p), 0.0);
        assert_eq!(p.zero, 64);
        let flat = activation(0.0, 0.0);
        assert_eq!(
            (flat.scale, flat.zero),
            (1.0, 0),
            "quantize_static's scale for no range"
        );
        assert_eq!(quantize(0.0, flat, 0, 255), 0);
        let tiny = activation(0.0, 6.65e-9 * 255.0);
        assert!(
            (tiny.scale / 6.65e-9 - 1.0).abs() < 1e-6,
            "no floor above float32's: {}",
            tiny.scale
        );
        assert_eq!(weight_scale(0.0), 1.0);
    }

    #[test]
    fn rounding_is_half_to_even_and_saturates() {
        let p = QParams { scale: 1.0, zero: 0 };
        assert_eq!(quantize(2.5, p, -127, 127), 2);
        assert_eq!(quantize(3.5, p, -127, 127), 4);
        assert_eq!(quantize(1e6, p, -127, 127), 127);
        assert_eq!(quantize(-1e6, p, 0, 255), 0);
    }
}
