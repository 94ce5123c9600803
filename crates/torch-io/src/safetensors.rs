//! The safetensors format, as far as stretch writes and reads it: an
//! 8-byte little-endian header length, a JSON header (per tensor its
//! `dtype`, `shape` and `data_offsets` into the data; `__metadata__`
//! strings), then the tensors' bytes, little endian. F32 and I64 tensors
//! are written; F32, F16, BF16, F64 and I64 are read, floats as f32.

use crate::TorchError;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// A tensor of a safetensors file.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub shape: Vec<usize>,
    pub data: Data,
}

/// The bytes of a safetensors file holding `tensors` (in key order) and
/// `metadata`.
pub fn write(tensors: &BTreeMap<String, Entry>, metadata: &BTreeMap<String, String>) -> Vec<u8> {
    let mut header = Map::new();
    if !metadata.is_empty() {
        header.insert("__metadata__".into(), json!(metadata));
    }
    let mut data = Vec::new();
    for (key, e) in tensors {
        let start = data.len();
        let dtype = match &e.data {
            Data::F32(v) => {
                v.iter().for_each(|x| data.extend_from_slice(&x.to_le_bytes()));
                "F32"
            }
            Data::I64(v) => {
                v.iter().for_each(|x| data.extend_from_slice(&x.to_le_bytes()));
                "I64"
            }
        };
        header.insert(
            key.clone(),
            json!({"dtype": dtype, "shape": e.shape, "data_offsets": [start, data.len()]}),
        );
    }
    let mut h = serde_json::to_vec(&Value::Object(header)).expect("a JSON object serialises");
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + h.len() + data.len());
    out.extend_from_slice(&(h.len() as u64).to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(&data);
    out
}

/// A safetensors file read back: its tensors by key and its metadata.
pub struct File {
    pub tensors: BTreeMap<String, Entry>,
    pub metadata: BTreeMap<String, String>,
}

/// Reads the safetensors bytes `bytes` (named `file` in errors).
pub fn read(bytes: &[u8], file: &str) -> Result<File, TorchError> {
    let bad = |reason: String| TorchError::Safetensors {
        file: file.to_string(),
        reason,
    };
    let (len, rest) = bytes
        .split_first_chunk::<8>()
        .ok_or_else(|| bad("shorter than its 8-byte header length".into()))?;
    let len = usize::try_from(u64::from_le_bytes(*len)).map_err(|_| bad("header length too large".into()))?;
    if len > rest.len() {
        return Err(bad(format!(
            "truncated: the header says {len} bytes, the file has {} after it",
            rest.len()
        )));
    }
    let header: Map<String, Value> =
        serde_json::from_slice(&rest[..len]).map_err(|e| bad(format!("header is not a JSON object: {e}")))?;
    let data = &rest[len..];
    let mut tensors = BTreeMap::new();
    let mut metadata = BTreeMap::new();
    for (key, v) in header {
        if key == "__metadata__" {
            for (k, s) in v.as_object().into_iter().flatten() {
                metadata.insert(k.clone(), s.as_str().unwrap_or_default().to_string());
            }
            continue;
        }
        let at = |reason: &str| bad(format!("tensor `{key}`: {reason}"));
        let dtype = v["dtype"].as_str().ok_or_else(|| at("no dtype"))?;
        let shape: Vec<usize> = v["shape"]
            .as_array()
            .ok_or_else(|| at("no shape"))?
            .iter()
            .map(|d| d.as_u64().map(|d| d as usize))
            .collect::<Option<_>>()
            .ok_or_else(|| at("a dimension is not a count"))?;
        let offsets: Vec<usize> = v["data_offsets"]
            .as_array()
            .ok_or_else(|| at("no data_offsets"))?
            .iter()
            .map(|d| d.as_u64().map(|d| d as usize))
            .collect::<Option<_>>()
            .ok_or_else(|| at("an offset is not a count"))?;
        let [start, end] = offsets[..] else {
            return Err(at("data_offsets is not [start, end]"));
        };
        if start > end || end > data.len() {
            return Err(at(&format!(
                "data_offsets [{start}, {end}] outside the {} data bytes (truncated?)",
                data.len()
            )));
        }
        let raw = &data[start..end];
        let count: usize = shape.iter().product();
        let width = match dtype {
            "F32" => 4,
            "F16" | "BF16" => 2,
            "F64" | "I64" => 8,
            other => return Err(at(&format!("dtype {other}, which stretch does not read"))),
        };
        if raw.len() != count * width {
            return Err(at(&format!("{} bytes for {count} values of {dtype}", raw.len())));
        }
        let data = match dtype {
            "F32" => Data::F32(
                raw.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            "F16" => Data::F32(
                raw.chunks_exact(2)
                    .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                    .collect(),
            ),
            "BF16" => Data::F32(
                raw.chunks_exact(2)
                    .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
                    .collect(),
            ),
            "F64" => Data::F32(
                raw.chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32)
                    .collect(),
            ),
            _ => Data::I64(
                raw.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect(),
            ),
        };
        tensors.insert(key, Entry { shape, data });
    }
    Ok(File { tensors, metadata })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_reads_back_and_a_truncated_one_is_refused() {
        let mut t = BTreeMap::new();
        t.insert(
            "a.weight".to_string(),
            Entry {
                shape: vec![2, 2],
                data: Data::F32(vec![1.0, -2.5, 3.25, 0.0]),
            },
        );
        t.insert(
            "a.num_batches_tracked".to_string(),
            Entry {
                shape: vec![],
                data: Data::I64(vec![7]),
            },
        );
        let meta = BTreeMap::from([("fingerprint".to_string(), "abc".to_string())]);
        let bytes = write(&t, &meta);
        assert_eq!(u64::from_le_bytes(bytes[..8].try_into().unwrap()) % 8, 0);
        let back = read(&bytes, "w.safetensors").unwrap();
        assert_eq!(back.tensors, t);
        assert_eq!(back.metadata, meta);
        let e = read(&bytes[..bytes.len() - 3], "w.safetensors")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("w.safetensors") && e.contains("truncated"), "{e}");
    }
}
