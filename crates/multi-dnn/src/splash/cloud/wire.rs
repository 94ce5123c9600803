//! The cloud worker's protocol: HTTP/1.1, one request per connection.
//!
//! - `POST /compile` with an ONNX model as the body: `200` and the
//!   model's id (text) once the server has compiled it.
//! - `POST /run/ID` with the inputs as the body: `200`, the outputs as the
//!   body and the server's compute time in the `X-Compute-Ms` header.
//! - `GET /health`: `200` and `ok` (the runtime's check that a server
//!   answers, at start-up and after a failure).
//! - Anything else, or a failure: a `4xx`/`5xx` status with the reason as
//!   the body.
//!
//! Tensors travel as `u32` count, then per tensor `u8` type (0 = f32, 1 =
//! i64), `u32` rank, `u64` dims and the elements, all little-endian.
//!
//! HTTP over the standard library's sockets rather than gRPC: it needs no
//! new dependency (no protobuf code generation, nothing to download on an
//! offline machine), `curl` can talk to it, and a request per inference is
//! the same shape as Splash's `RequestInference` call.

use engine::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use tract_onnx::prelude::*;

/// Largest body either side accepts (1 GiB).
pub const MAX_BODY: usize = 1 << 30;

/// Serializes `values`; only f32 and i64 tensors travel.
pub fn encode(values: &[Value]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        let (code, bytes): (u8, Vec<u8>) = match v.datum_type() {
            DatumType::F32 => (
                0,
                v.to_plain_array_view::<f32>()
                    .map_err(|e| e.to_string())?
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .collect(),
            ),
            DatumType::I64 => (
                1,
                v.to_plain_array_view::<i64>()
                    .map_err(|e| e.to_string())?
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .collect(),
            ),
            other => {
                return Err(format!(
                    "a {other:?} tensor cannot travel to the cloud worker (f32, i64)"
                ));
            }
        };
        out.push(code);
        out.extend_from_slice(&(v.rank() as u32).to_le_bytes());
        for d in v.shape() {
            out.extend_from_slice(&(*d as u64).to_le_bytes());
        }
        out.extend_from_slice(&bytes);
    }
    Ok(out)
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.0.len() < n {
            return Err(format!(
                "tensor data ends early: {n} bytes wanted, {} left",
                self.0.len()
            ));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().map_err(|_| "short u32")?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().map_err(|_| "short u64")?))
    }
}

/// Parses what [`encode`] wrote; the error says what is malformed.
pub fn decode(bytes: &[u8]) -> Result<TVec<Value>, String> {
    let mut c = Cursor(bytes);
    let n = c.u32()? as usize;
    if n > 4096 {
        return Err(format!("{n} tensors is not a plausible count"));
    }
    let mut out = TVec::new();
    for i in 0..n {
        let code = c.take(1)?[0];
        let rank = c.u32()? as usize;
        if rank > 16 {
            return Err(format!("tensor {i}: rank {rank} is not plausible"));
        }
        let dims: Vec<usize> = (0..rank)
            .map(|_| c.u64().map(|d| d as usize))
            .collect::<Result<_, _>>()?;
        let count = dims
            .iter()
            .try_fold(1usize, |a, d| a.checked_mul(*d))
            .filter(|n| n * 8 <= MAX_BODY)
            .ok_or_else(|| format!("tensor {i}: shape {dims:?} is too large"))?;
        let t = match code {
            0 => {
                let data: Vec<f32> = c
                    .take(count * 4)?
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                Tensor::from_shape(&dims, &data)
            }
            1 => {
                let data: Vec<i64> = c
                    .take(count * 8)?
                    .chunks_exact(8)
                    .map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                    .collect();
                Tensor::from_shape(&dims, &data)
            }
            other => return Err(format!("tensor {i}: unknown type code {other}")),
        }
        .map_err(|e| format!("tensor {i}: {e}"))?;
        out.push(t.into_tvalue());
    }
    if !c.0.is_empty() {
        return Err(format!("{} bytes after the last tensor", c.0.len()));
    }
    Ok(out)
}

/// One HTTP message's head and body.
pub struct Message {
    /// The request line or the status line.
    pub start: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Message {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one message (head, then `Content-Length` bytes of body).
pub fn read_message(stream: &mut TcpStream) -> Result<Message, String> {
    let mut r = BufReader::new(stream);
    let mut start = String::new();
    r.read_line(&mut start).map_err(|e| format!("reading: {e}"))?;
    if start.is_empty() {
        return Err("the connection closed before a message".into());
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).map_err(|e| format!("reading headers: {e}"))?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (k, v) = line
            .split_once(':')
            .ok_or_else(|| format!("malformed header line '{line}'"))?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
        if headers.len() > 64 {
            return Err("too many headers".into());
        }
    }
    let m = Message {
        start: start.trim_end().to_string(),
        headers,
        body: Vec::new(),
    };
    let len: usize = match m.header("content-length") {
        Some(v) => v.parse().map_err(|_| format!("bad Content-Length '{v}'"))?,
        None => 0,
    };
    if len > MAX_BODY {
        return Err(format!("a body of {len} bytes is larger than {MAX_BODY}"));
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body)
        .map_err(|e| format!("reading a body of {len} bytes: {e}"))?;
    Ok(Message { body, ..m })
}

/// Writes `start`, the headers, `Content-Length` and the body.
pub fn write_message(
    stream: &mut TcpStream,
    start: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Result<(), String> {
    let mut head = format!("{start}\r\n");
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    head += &format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    stream
        .write_all(head.as_bytes())
        .and_then(|_| stream.write_all(body))
        .and_then(|_| stream.flush())
        .map_err(|e| format!("writing: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensors_round_trip_and_garbage_is_named() {
        let a = Tensor::from_shape(&[2, 3], &[1.0f32, -2.0, 3.5, 0.0, 1e-3, 7.0]).unwrap();
        let b = Tensor::from_shape(&[1], &[42i64]).unwrap();
        let bytes = encode(&[a.clone().into_tvalue(), b.clone().into_tvalue()]).unwrap();
        let back = decode(&bytes).unwrap();
        assert_eq!(*back[0], a);
        assert_eq!(*back[1], b);
        assert!(decode(&bytes[..bytes.len() - 3]).unwrap_err().contains("ends early"));
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(decode(&extra).unwrap_err().contains("after the last tensor"));
        let mut bad = bytes;
        bad[4] = 9;
        assert!(decode(&bad).unwrap_err().contains("unknown type code 9"));
    }
}
