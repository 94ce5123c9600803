//! `TensorProto` to [`Tensor`] and back.

use super::ImportError;
use crate::tensor::{DType, Fact, Tensor};
use bytes::Bytes;
use onnx_ir::TensorProto;

/// Reads a tensor. Data comes from `raw_data` (zero-copy) or the typed
/// fields; a tensor with dims but no data at all becomes a structure-only
/// tensor. External data is refused with a message saying so.
pub(super) fn tensor_from_proto(t: &TensorProto) -> Result<Tensor, ImportError> {
    let bad = |reason: String| ImportError::BadTensor {
        name: t.name.clone(),
        reason,
    };
    let dtype =
        DType::from_onnx(t.data_type).ok_or_else(|| bad(format!("data type {} is not supported", t.data_type)))?;
    if !t.external_data.is_empty() || t.data_location.value() == 1 {
        return Err(bad(
            "external data files are not supported; save the model with weights inside".into(),
        ));
    }
    let shape = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| bad(format!("negative dimension in {:?}", t.dims))))
        .collect::<Result<Vec<_>, _>>()?;
    let fact = Fact::new(dtype, shape);
    let expected = fact
        .checked_bytes()
        .ok_or_else(|| bad(format!("dims {:?} describe more bytes than can be addressed", t.dims)))?;
    let length_error = |actual: usize| ImportError::WeightLength {
        name: t.name.clone(),
        dims: t.dims.clone(),
        dtype: dtype.to_string(),
        expected,
        actual,
    };
    let data: Option<Bytes> = if !t.raw_data.is_empty() {
        Some(t.raw_data.clone())
    } else {
        typed_bytes(t, dtype)
    };
    match data {
        Some(d) => Tensor::from_bytes(fact.clone(), d).map_err(|e| length_error(e.actual)),
        None if fact.volume() == 0 => Tensor::from_bytes(fact, Bytes::new()).map_err(|e| length_error(e.actual)),
        None => Ok(Tensor::without_data(fact)),
    }
}

/// Little-endian bytes from the typed data fields, `None` when they are empty.
fn typed_bytes(t: &TensorProto, dtype: DType) -> Option<Bytes> {
    let bytes: Vec<u8> = match dtype {
        DType::F32 if !t.float_data.is_empty() => t.float_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::F64 if !t.double_data.is_empty() => t.double_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::I64 if !t.int64_data.is_empty() => t.int64_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::I32 if !t.int32_data.is_empty() => t.int32_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::F16 if !t.int32_data.is_empty() => t.int32_data.iter().flat_map(|v| (*v as u16).to_le_bytes()).collect(),
        DType::I8 | DType::U8 | DType::Bool if !t.int32_data.is_empty() => {
            t.int32_data.iter().map(|v| *v as u8).collect()
        }
        _ => return None,
    };
    Some(Bytes::from(bytes))
}

/// Writes a tensor; a structure-only tensor is written with dims and no data.
pub(super) fn tensor_to_proto(name: &str, t: &Tensor) -> TensorProto {
    let mut p = TensorProto::new();
    p.name = name.to_string();
    p.data_type = t.dtype().onnx_code();
    p.dims = t.shape().iter().map(|&d| d as i64).collect();
    if let Some(raw) = t.raw() {
        p.raw_data = raw.clone();
    }
    p
}
