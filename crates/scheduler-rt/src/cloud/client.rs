//! The engine of a cloud worker: subgraphs compile and run on a remote
//! [`super::server::CloudServer`], over a link the client shapes to a
//! chosen bandwidth and round-trip time.

use super::wire::{Message, decode, encode, read_message, write_message};
use crate::engine::{Compiled, Engine, Value};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;
use tract_onnx::prelude::TVec;

/// The emulated link: each request waits half the round trip plus its
/// bytes at `mbps` before it is sent, and the same for the reply.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    /// `None`: as fast as the socket goes.
    pub mbps: Option<f64>,
    pub rtt_ms: f64,
}

impl Link {
    fn delay(&self, bytes: usize) -> Duration {
        let wire = self.mbps.map_or(0.0, |m| bytes as f64 * 8.0 / (m * 1e3));
        Duration::from_secs_f64((self.rtt_ms / 2.0 + wire).max(0.0) / 1e3)
    }
}

/// Talks to the server at `address`.
pub struct RemoteEngine {
    address: SocketAddr,
    link: Link,
    timeout: Duration,
}

impl RemoteEngine {
    /// Resolves `address`; nothing is sent until the first compile.
    pub fn new(address: &str, link: Link, timeout: Duration) -> Result<RemoteEngine, String> {
        let address = address
            .to_socket_addrs()
            .map_err(|e| format!("cloud address '{address}': {e}"))?
            .next()
            .ok_or_else(|| format!("cloud address '{address}' resolves to nothing"))?;
        Ok(RemoteEngine { address, link, timeout })
    }

    /// The engine of a processor configured with `remote`.
    pub fn from_config(remote: &crate::config::Remote) -> Result<RemoteEngine, String> {
        let link = Link {
            mbps: remote.kbps.map(|k| k as f64 / 1e3),
            rtt_ms: remote.rtt_us as f64 / 1e3,
        };
        RemoteEngine::new(&remote.address, link, Duration::from_millis(remote.timeout_ms))
    }

    /// Whether the server accepts a connection now; the reason when not.
    pub fn reachable(&self) -> Result<(), String> {
        TcpStream::connect_timeout(&self.address, self.timeout)
            .map(|_| ())
            .map_err(|e| format!("cloud worker at {}: {e}", self.address))
    }
}

/// One request and its reply, with the link's delays around it.
fn call(address: SocketAddr, link: Link, timeout: Duration, path: &str, body: &[u8]) -> Result<Message, String> {
    std::thread::sleep(link.delay(body.len()));
    let mut s = TcpStream::connect_timeout(&address, timeout).map_err(|e| format!("cloud worker at {address}: {e}"))?;
    let _ = s.set_nodelay(true);
    s.set_read_timeout(Some(timeout))
        .and_then(|_| s.set_write_timeout(Some(timeout)))
        .map_err(|e| e.to_string())?;
    write_message(
        &mut s,
        &format!("POST {path} HTTP/1.1"),
        &[("Host", address.to_string())],
        body,
    )
    .map_err(|e| format!("cloud worker at {address}: {e}"))?;
    let reply = read_message(&mut s).map_err(|e| format!("cloud worker at {address}: no valid reply ({e})"))?;
    std::thread::sleep(link.delay(reply.body.len()));
    let status: u16 = reply
        .start
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("cloud worker at {address}: malformed status line '{}'", reply.start))?;
    if status != 200 {
        return Err(format!(
            "cloud worker at {address}: {status}: {}",
            String::from_utf8_lossy(&reply.body)
        ));
    }
    Ok(reply)
}

impl Engine for RemoteEngine {
    fn name(&self) -> &'static str {
        "cloud"
    }

    fn version(&self) -> &'static str {
        "stretch-cloud/1"
    }

    fn threads(&self) -> usize {
        1
    }

    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Compiled>, String> {
        let unshaped = Link {
            mbps: None,
            rtt_ms: 0.0,
        };
        let reply = call(
            self.address,
            unshaped,
            self.timeout.max(Duration::from_secs(60)),
            "/compile",
            onnx,
        )?;
        let id = String::from_utf8(reply.body).map_err(|_| "cloud worker: the model id is not text".to_string())?;
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!("cloud worker: malformed model id '{id}'"));
        }
        Ok(Box::new(RemoteCompiled {
            address: self.address,
            link: self.link,
            timeout: self.timeout,
            path: format!("/run/{id}"),
        }))
    }
}

/// A subgraph compiled on the server.
pub struct RemoteCompiled {
    address: SocketAddr,
    link: Link,
    timeout: Duration,
    path: String,
}

impl Compiled for RemoteCompiled {
    fn run(&self, inputs: TVec<Value>) -> Result<TVec<Value>, String> {
        let body = encode(&inputs)?;
        let reply = call(self.address, self.link, self.timeout, &self.path, &body)?;
        decode(&reply.body).map_err(|e| format!("cloud worker at {}: malformed reply: {e}", self.address))
    }
}
