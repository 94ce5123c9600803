//! Tensors (weights and constants owned by a graph) and facts (what is known
//! about a value flowing along an edge: element type and static shape).

use bytes::Bytes;
use serde::Serialize;
use std::fmt;

/// Element types the IR carries. Values are the ONNX `TensorProto.DataType` codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F64,
    F16,
    I64,
    I32,
    I8,
    U8,
    Bool,
}

impl DType {
    /// The dtype for an ONNX data type code, or `None` for types the IR does not carry.
    pub fn from_onnx(code: i32) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            6 => DType::I32,
            7 => DType::I64,
            9 => DType::Bool,
            10 => DType::F16,
            11 => DType::F64,
            _ => return None,
        })
    }

    /// The ONNX data type code.
    pub fn onnx_code(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// Whether the type is a floating-point type (weights are floats).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::Bool => "bool",
        };
        f.write_str(s)
    }
}

/// What is known about a value: its element type and its static shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Fact {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl Fact {
    pub fn new(dtype: DType, shape: impl Into<Vec<usize>>) -> Fact {
        Fact {
            dtype,
            shape: shape.into(),
        }
    }

    pub fn f32(shape: impl Into<Vec<usize>>) -> Fact {
        Fact::new(DType::F32, shape)
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn volume(&self) -> usize {
        self.shape.iter().product()
    }

    /// Size in bytes, or `None` if it does not fit in `usize`.
    pub fn checked_bytes(&self) -> Option<usize> {
        self.shape.iter().try_fold(self.dtype.size(), |b, &d| b.checked_mul(d))
    }

    /// Size in bytes of one value of this fact.
    pub fn bytes(&self) -> usize {
        self.volume() * self.dtype.size()
    }
}

impl fmt::Display for Fact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str("x")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// A constant tensor owned by a graph.
///
/// Data is kept as little-endian bytes (shared, zero-copy from the file it was
/// read from). A tensor of a structure-only model has no data: its fact is
/// known but its values are not, until [`crate::Graph::fill_missing_weights`]
/// fills it.
#[derive(Clone, PartialEq)]
pub struct Tensor {
    fact: Fact,
    data: Option<Bytes>,
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor({}, {})",
            self.fact,
            if self.data.is_some() { "data" } else { "no data" }
        )
    }
}

/// Why raw bytes could not become a tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataLengthMismatch {
    pub expected: usize,
    pub actual: usize,
}

impl fmt::Display for DataLengthMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes of data where {} are needed", self.actual, self.expected)
    }
}

impl Tensor {
    /// A tensor from little-endian bytes; fails if the length disagrees with the fact.
    pub fn from_bytes(fact: Fact, data: Bytes) -> Result<Tensor, DataLengthMismatch> {
        if data.len() != fact.bytes() {
            return Err(DataLengthMismatch {
                expected: fact.bytes(),
                actual: data.len(),
            });
        }
        Ok(Tensor { fact, data: Some(data) })
    }

    /// A tensor whose values are unknown (structure-only models).
    pub fn without_data(fact: Fact) -> Tensor {
        Tensor { fact, data: None }
    }

    pub fn from_f32(shape: impl Into<Vec<usize>>, values: &[f32]) -> Tensor {
        let fact = Fact::f32(shape);
        assert_eq!(fact.volume(), values.len(), "shape and value count differ");
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Tensor {
            fact,
            data: Some(Bytes::from(bytes)),
        }
    }

    pub fn from_i64(shape: impl Into<Vec<usize>>, values: &[i64]) -> Tensor {
        let fact = Fact::new(DType::I64, shape);
        assert_eq!(fact.volume(), values.len(), "shape and value count differ");
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Tensor {
            fact,
            data: Some(Bytes::from(bytes)),
        }
    }

    pub fn fact(&self) -> &Fact {
        &self.fact
    }

    pub fn dtype(&self) -> DType {
        self.fact.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.fact.shape
    }

    pub fn volume(&self) -> usize {
        self.fact.volume()
    }

    pub fn has_data(&self) -> bool {
        self.data.is_some()
    }

    /// Raw little-endian bytes, `None` for a structure-only tensor.
    pub fn raw(&self) -> Option<&Bytes> {
        self.data.as_ref()
    }

    /// Values as f32 (`None` without data or for a non-f32 tensor).
    pub fn to_f32_vec(&self) -> Option<Vec<f32>> {
        if self.fact.dtype != DType::F32 {
            return None;
        }
        let data = self.data.as_ref()?;
        Some(
            data.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
    }

    /// Values widened to i64 for integer tensors (`None` without data or for a float tensor).
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        let data = self.data.as_ref()?;
        Some(match self.fact.dtype {
            DType::I64 => data
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
            DType::I32 => data
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
            DType::I8 => data.iter().map(|&b| b as i8 as i64).collect(),
            DType::U8 | DType::Bool => data.iter().map(|&b| b as i64).collect(),
            _ => return None,
        })
    }

    /// Values as f64 for any numeric tensor (`None` without data or for f16).
    pub fn to_f64_vec(&self) -> Option<Vec<f64>> {
        match self.fact.dtype {
            DType::F32 => self.to_f32_vec().map(|v| v.into_iter().map(f64::from).collect()),
            DType::F64 => Some(
                self.data
                    .as_ref()?
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect(),
            ),
            DType::F16 => None,
            _ => self.to_i64_vec().map(|v| v.into_iter().map(|x| x as f64).collect()),
        }
    }

    /// The same data seen with another shape of equal volume.
    pub fn reshaped(&self, shape: Vec<usize>) -> Option<Tensor> {
        let fact = Fact::new(self.fact.dtype, shape);
        (fact.volume() == self.fact.volume()).then(|| Tensor {
            fact,
            data: self.data.clone(),
        })
    }
}
