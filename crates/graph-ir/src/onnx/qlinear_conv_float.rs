//! A QDQ convolution (or `Gemm`) computed exactly on float kernels.
//!
//! onnxruntime's integer convolution accumulates `Σ (x − zx)·w + b` in
//! int32 and requantizes `float32(acc) · m` (`m = sx · sw / sy`). A float
//! convolution of the integer values themselves (`x − zx` and `w` as
//! floats) computes the same sum exactly whenever no partial sum reaches
//! 2²⁴, whatever its summation order; the product by `m` is taken in
//! float64 (exact for two float32 factors) and rounded once to float32, as
//! onnxruntime's float32 product is, behind a cast no engine folds into the
//! convolution's weights.

use super::qlinear_view::{self as qlinear, Fusion, Quantized, View, lowest, scalar};
use crate::tensor::DType;

/// The float form of the convolution or `Gemm` (`transB` = 1: weights laid
/// out per output channel, as a convolution's) `conv` reading `xq` (zero point
/// `x_zero`, the constant `x_zero_name`, of 8-bit type `x_type`) with int8 weights `wq`, int32 bias
/// `bq` and per-channel (or one) requantization `multipliers`, quantized
/// by `out`; `None` when a partial sum could reach 2²⁴ (the weights' and
/// bias's magnitudes bound it) or a name is taken.
#[allow(clippy::too_many_arguments)]
pub(super) fn fusion(
    view: &View,
    conv: usize,
    xq: &str,
    x_type: DType,
    x_zero: f64,
    x_zero_name: &str,
    wq: &str,
    bq: Option<&str>,
    multipliers: &[f32],
    out: &Quantized,
) -> Option<Fusion> {
    let c = view.node(conv);
    let dims = view.dims(wq)?;
    let w = view.constant(wq)?.1;
    let channels = usize::try_from(*dims.first()?).ok()?;
    if channels == 0 || w.len() % channels != 0 || dims.len() < 2 {
        return None;
    }
    let b = match bq {
        Some(b) => view.constant(b)?.1,
        None => vec![0.0; channels],
    };
    let x_max = (lowest(x_type) - x_zero)
        .abs()
        .max((lowest(x_type) + 255.0 - x_zero).abs());
    let per = w.len() / channels;
    let exact = b.len() == channels
        && (0..channels).all(|o| {
            let sum: f64 = w[o * per..(o + 1) * per].iter().map(|v| v.abs()).sum();
            sum * x_max + b[o].abs() < f64::from(1u32 << 24)
        });
    if !exact {
        return None;
    }
    let y = &out.node.output[0];
    let v = view.fresh(
        &format!("{y}.qconvf"),
        ["one", "xc", "w", "b", "conv", "conv64", "m", "scaled64", "scaled"],
    )?;
    let [one, xc, wf, bf, conv_out, conv64, m, scaled64, scaled] = std::array::from_fn(|i| v[i].as_str());
    let f32_bytes = |values: &[f64]| {
        values
            .iter()
            .flat_map(|v| (*v as f32).to_le_bytes())
            .collect::<Vec<u8>>()
    };
    let mut weights = scalar(wf, DType::F32, &f32_bytes(&w));
    weights.dims = dims.clone();
    let mut bias = scalar(bf, DType::F32, &f32_bytes(&b));
    bias.dims = vec![channels as i64];
    let m_bytes: Vec<u8> = multipliers.iter().flat_map(|v| f64::from(*v).to_le_bytes()).collect();
    let mut requant = scalar(m, DType::F64, &m_bytes);
    if multipliers.len() > 1 {
        requant.dims = [1, channels as i64]
            .into_iter()
            .chain(dims[2..].iter().map(|_| 1))
            .collect();
    }
    let initializers = vec![scalar(one, DType::F32, &1f32.to_le_bytes()), weights, bias, requant];
    let op = |op: &str, inputs: &[&str], output: &str| qlinear::node(op, inputs, output, c);
    let cast = |input: &str, to: DType, output: &str| qlinear::cast(input, to, output, c);
    let mut float_conv = op(&c.op_type, &[xc, wf, bf], conv_out);
    float_conv.name = c.name.clone();
    float_conv.attribute = c.attribute.clone();
    let nodes = vec![
        op("DequantizeLinear", &[xq, one, x_zero_name], xc),
        float_conv,
        cast(conv_out, DType::F64, conv64),
        op("Mul", &[conv64, m], scaled64),
        cast(scaled64, DType::F32, scaled),
        op("QuantizeLinear", &[scaled, one, &out.node.input[2]], y),
    ];
    Some(Fusion {
        removed: [conv].into_iter().chain(out.activation).collect(),
        quantize: out.index,
        nodes,
        initializers,
    })
}
