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

/// The smallest scale used, so a range of zero width still quantizes
/// (every value maps to the zero point).
pub const MIN_SCALE: f32 = 1e-8;

/// uint8 parameters of an activation whose values lie in `[lo, hi]`: the
/// range is widened to contain 0 (so zero is exact, as padding needs), then
/// spread over 0..=255.
pub fn activation(lo: f32, hi: f32) -> QParams {
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let scale = ((hi - lo) / 255.0).max(MIN_SCALE);
    let zero = (-lo / scale).round_ties_even().clamp(0.0, 255.0) as i32;
    QParams { scale, zero }
}

/// int8 symmetric scale of one weight channel with largest magnitude `amax`.
pub fn weight_scale(amax: f32) -> f32 {
    (amax / 127.0).max(MIN_SCALE)
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
        assert_eq!(quantize(0.0, flat, 0, 255), 0);
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
