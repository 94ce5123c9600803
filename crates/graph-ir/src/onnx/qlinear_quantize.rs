//! A float `QuantizeLinear` as onnxruntime computes it.
//!
//! onnxruntime divides by the scale in float32 (`x / s`), tract multiplies
//! by its reciprocal (`x · (1/s)`), and the two round a few values in a
//! million to different integers. The rewrite divides first, in float64
//! cast to float32 (the correctly rounded float32 quotient but in cases
//! rarer than one in 10⁸), and quantizes the quotient at scale 1.

use super::qlinear_view::{self as qlinear, View, eight_bit, scalar};
use crate::tensor::DType;
use onnx_ir::{NodeProto, TensorProto};

/// The nodes and constants replacing the per-tensor `QuantizeLinear` at
/// `index`, or `None` when it is not one, its scale is 1 (nothing to
/// divide) or its names are taken.
pub(super) fn rewrite(view: &View, index: usize) -> Option<(Vec<NodeProto>, Vec<TensorProto>)> {
    let q = view.node(index);
    if q.input.len() != 3 || q.output.len() != 1 {
        return None;
    }
    let (scale, zero) = (view.constant(&q.input[1])?, view.constant(&q.input[2])?);
    if scale.0 != DType::F32 || scale.1.len() != 1 || scale.1[0] == 1.0 || zero.1.len() != 1 || !eight_bit(zero.0) {
        return None;
    }
    let v = view.fresh(
        &format!("{}.qdiv", q.output[0]),
        ["scale", "one", "x", "quotient", "x32"],
    )?;
    let [scale64, one, x64, quotient, x32] = std::array::from_fn(|i| v[i].as_str());
    let initializers = vec![
        scalar(scale64, DType::F64, &scale.1[0].to_le_bytes()),
        scalar(one, DType::F32, &1f32.to_le_bytes()),
    ];
    let op = |op: &str, inputs: &[&str], output: &str| qlinear::node(op, inputs, output, q);
    let cast = |input: &str, to: DType, output: &str| qlinear::cast(input, to, output, q);
    let mut last = q.clone();
    last.input = vec![x32.to_string(), one.to_string(), q.input[2].clone()];
    let nodes = vec![
        cast(&q.input[0], DType::F64, x64),
        op("Div", &[x64, scale64], quotient),
        cast(quotient, DType::F32, x32),
        last,
    ];
    Some((nodes, initializers))
}
