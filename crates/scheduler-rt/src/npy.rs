//! NumPy `.npy` files of float32 tensors (little-endian, C order).
//!
//! Reads format versions 1.0 to 3.0 and writes 1.0. Other dtypes and
//! Fortran order are rejected with the header's own words.

use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum NpyError {
    /// The I/O error is in the message and is not returned by `source()`.
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error(transparent)]
    File(#[from] graph_ir::plain_file::PlainFileError),
    #[error("{path}: not a .npy file: {reason}")]
    Format { path: String, reason: String },
    #[error("{path}: dtype '{descr}' is not supported (only float32 little-endian, '<f4')")]
    DType { path: String, descr: String },
    #[error("{path}: Fortran-order arrays are not supported (save with C order)")]
    Fortran { path: String },
}

/// A float32 array: shape and values in C order.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

fn field<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    Some(header[at..].trim_start().strip_prefix(':')?.trim_start())
}

/// `n` values uniform in [-1, 1) from `seed` (a 64-bit LCG): the inputs of
/// `stretch run --random`, `stretch bench` and the runtime's tests.
pub fn random_values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Parses `.npy` bytes; `path` names the file in errors.
pub fn parse(bytes: &[u8], path: &str) -> Result<Array, NpyError> {
    let bad = |reason: &str| NpyError::Format {
        path: path.to_string(),
        reason: reason.to_string(),
    };
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("missing the \\x93NUMPY magic"));
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(&format!("unsupported format version {v}"))),
    };
    let header = bytes
        .get(start..start + len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| bad("truncated or non-text header"))?;
    let descr = field(header, "descr")
        .and_then(|d| d.strip_prefix('\''))
        .and_then(|d| d.split('\'').next())
        .ok_or_else(|| bad("header has no 'descr'"))?;
    if descr != "<f4" {
        return Err(NpyError::DType {
            path: path.to_string(),
            descr: descr.to_string(),
        });
    }
    if field(header, "fortran_order").is_some_and(|f| f.starts_with("True")) {
        return Err(NpyError::Fortran { path: path.to_string() });
    }
    let shape_text = field(header, "shape")
        .and_then(|s| s.strip_prefix('('))
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| bad("header has no 'shape' tuple"))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| bad(&format!("bad dimension '{s}'"))))
        .collect::<Result<Vec<_>, _>>()?;
    let n = shape
        .iter()
        .try_fold(1usize, |a, d| a.checked_mul(*d))
        .ok_or_else(|| bad("shape too large"))?;
    let body = &bytes[start + len..];
    if Some(body.len()) != n.checked_mul(4) {
        return Err(bad(&format!(
            "{} data bytes for shape {shape:?} ({n} float32)",
            body.len()
        )));
    }
    let data = body
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(Array { shape, data })
}

/// The largest `.npy` file read.
pub const MAX_NPY_BYTES: u64 = 4 << 30;

/// Reads a `.npy` file: a plain file of at most [`MAX_NPY_BYTES`].
pub fn read(path: &Path) -> Result<Array, NpyError> {
    use graph_ir::plain_file::{Links, read_plain};
    let bytes = read_plain(path, MAX_NPY_BYTES, Links::Follow)?;
    parse(&bytes, &path.display().to_string())
}

/// Serializes as a version 1.0 `.npy` file.
pub fn to_bytes(a: &Array) -> Vec<u8> {
    let dims: Vec<String> = a.shape.iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in &a.data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Writes a `.npy` file.
pub fn write(path: &Path, a: &Array) -> Result<(), NpyError> {
    std::fs::write(path, to_bytes(a)).map_err(|error| NpyError::Io {
        path: path.display().to_string(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_aligns_the_header() {
        for shape in [vec![], vec![3], vec![1, 3, 2, 2]] {
            let n = shape.iter().product();
            let a = Array {
                shape,
                data: (0..n).map(|i| i as f32 * 0.5 - 1.0).collect(),
            };
            let b = to_bytes(&a);
            assert_eq!((b.len() - 4 * n) % 64, 0);
            assert_eq!(parse(&b, "t.npy").unwrap(), a);
        }
    }

    #[test]
    fn rejects_other_dtypes_and_orders_naming_them() {
        let a = to_bytes(&Array {
            shape: vec![2],
            data: vec![1.0, 2.0],
        });
        let swap = |from: &[u8], to: &[u8]| {
            let mut b = a.clone();
            let at = b.windows(from.len()).position(|w| w == from).unwrap();
            b[at..at + to.len()].copy_from_slice(to);
            b
        };
        let text = swap(b"<f4", b"<f8");
        let e = parse(&text, "x.npy").unwrap_err().to_string();
        assert!(e.contains("x.npy") && e.contains("'<f8'"), "{e}");
        let text = swap(b"False", b"True ");
        assert!(parse(&text, "x.npy").unwrap_err().to_string().contains("Fortran"));
        let e = parse(&a[..a.len() - 1], "x.npy").unwrap_err().to_string();
        assert!(e.contains("7 data bytes"), "{e}");
        assert!(
            parse(b"hello world!", "x.npy")
                .unwrap_err()
                .to_string()
                .contains("magic")
        );
    }
}
