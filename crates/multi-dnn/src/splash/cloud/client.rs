//! The engine of a cloud worker: subgraphs compile and run on a remote
//! [`crate::splash::cloud::server::CloudServer`], over a link the client shapes to a
//! chosen bandwidth and round-trip time.

use crate::splash::cloud::latency::{CloudCall, CloudLatencyModel};
use crate::splash::cloud::wire::{Message, decode, encode, read_message, write_message};
use engine::{Compiled, Engine, EngineError, Value};

const CLOUD: &str = "cloud";
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tract_onnx::prelude::TVec;

/// Whether a remote engine's server answers now; the reason when not.
pub type Prober = Box<dyn Fn() -> Result<(), String> + Send>;

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

/// Talks to the server at `address`; every run teaches the latency model
/// that [`RemoteEngine::latency_model`] shares.
pub struct RemoteEngine {
    address: SocketAddr,
    link: Link,
    timeout: Duration,
    latency: Arc<Mutex<CloudLatencyModel>>,
}

impl RemoteEngine {
    /// Resolves `address`; nothing is sent until the first compile.
    pub fn new(address: &str, link: Link, timeout: Duration) -> Result<RemoteEngine, String> {
        let address = address
            .to_socket_addrs()
            .map_err(|e| format!("cloud address '{address}': {e}"))?
            .next()
            .ok_or_else(|| format!("cloud address '{address}' resolves to nothing"))?;
        Ok(RemoteEngine {
            address,
            link,
            timeout,
            latency: Arc::default(),
        })
    }

    /// The remote engine behind `engine`, if it is one.
    pub fn of(engine: &dyn Engine) -> Option<&RemoteEngine> {
        engine.as_any()?.downcast_ref::<RemoteEngine>()
    }

    /// The latency model its runs teach, shared.
    pub fn latency_model(&self) -> Arc<Mutex<CloudLatencyModel>> {
        self.latency.clone()
    }

    /// A check, to run off the scheduling thread, that the server accepts
    /// connections (it may wait up to the engine's timeout).
    pub fn prober(&self) -> Prober {
        let (address, timeout) = (self.address, self.timeout);
        Box::new(move || answers(address, timeout))
    }

    /// The engine of a processor configured with `remote`.
    pub fn from_config(remote: &engine::Remote) -> Result<RemoteEngine, String> {
        let link = Link {
            mbps: remote.kbps.map(|k| k as f64 / 1e3),
            rtt_ms: remote.rtt_us as f64 / 1e3,
        };
        RemoteEngine::new(&remote.address, link, Duration::from_millis(remote.timeout_ms))
    }

    /// Whether a server answers at the address now (`GET /health`: any
    /// reply counts, so that a server speaking garbage is found out by its
    /// first real request); the reason when not: refused, or no reply
    /// within the timeout.
    pub fn reachable(&self) -> Result<(), String> {
        answers(self.address, self.timeout)
    }
}

fn answers(address: SocketAddr, timeout: Duration) -> Result<(), String> {
    exchange(address, timeout, "GET /health HTTP/1.1", &[])
        .map(|_| ())
        .map_err(|e| match e {
            Exchange::Send(e) => e,
            Exchange::Reply(e) => format!("cloud worker at {address}: no reply ({e})"),
        })
}

/// Where an [`exchange`] failed.
enum Exchange {
    /// Connecting or sending (the message names the address).
    Send(String),
    /// Reading the reply (the reader's reason).
    Reply(String),
}

/// One connection: sends `start` and `body`, reads the reply, each way
/// within `timeout`.
fn exchange(address: SocketAddr, timeout: Duration, start: &str, body: &[u8]) -> Result<Message, Exchange> {
    let send = |e: String| Exchange::Send(format!("cloud worker at {address}: {e}"));
    let mut s = TcpStream::connect_timeout(&address, timeout).map_err(|e| send(e.to_string()))?;
    let _ = s.set_nodelay(true);
    s.set_read_timeout(Some(timeout))
        .and_then(|_| s.set_write_timeout(Some(timeout)))
        .map_err(|e| send(e.to_string()))?;
    write_message(&mut s, start, &[("Host", address.to_string())], body).map_err(send)?;
    let sent = std::time::Instant::now();
    read_message(&mut s).map_err(|e| {
        let waited = sent.elapsed();
        if waited >= timeout.mul_f64(0.9) {
            Exchange::Reply(format!(
                "timed out: nothing came back within {:.0} ms",
                waited.as_secs_f64() * 1e3
            ))
        } else {
            Exchange::Reply(e)
        }
    })
}

/// One request and its reply, with the link's delays around it.
fn call(address: SocketAddr, link: Link, timeout: Duration, path: &str, body: &[u8]) -> Result<Message, String> {
    call_status(address, link, timeout, path, body).map_err(|(_, e)| e)
}

/// [`call`], with the reply's status where the server gave one.
fn call_status(
    address: SocketAddr,
    link: Link,
    timeout: Duration,
    path: &str,
    body: &[u8],
) -> Result<Message, (Option<u16>, String)> {
    let fail = |e: String| (None, e);
    std::thread::sleep(link.delay(body.len()));
    let reply = exchange(address, timeout, &format!("POST {path} HTTP/1.1"), body).map_err(|e| match e {
        Exchange::Send(e) => fail(e),
        Exchange::Reply(e) => fail(format!("cloud worker at {address}: no valid reply ({e})")),
    })?;
    std::thread::sleep(link.delay(reply.body.len()));
    let status: u16 = reply
        .start
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| {
            fail(format!(
                "cloud worker at {address}: malformed status line '{}'",
                reply.start
            ))
        })?;
    if status != 200 {
        return Err((
            Some(status),
            format!(
                "cloud worker at {address}: {status}: {}",
                String::from_utf8_lossy(&reply.body)
            ),
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

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Compiled>, EngineError> {
        let id = compile_on(self.address, self.timeout, onnx)
            .map_err(|reason| EngineError::Load { engine: CLOUD, reason })?;
        Ok(Box::new(RemoteCompiled {
            address: self.address,
            link: self.link,
            timeout: self.timeout,
            path: format!("/run/{id}"),
            id,
            onnx: onnx.to_vec(),
            latency: self.latency.clone(),
        }))
    }
}

/// Sends `onnx` to the server (not shaped: models travel once, before a
/// run); returns its id there.
fn compile_on(address: SocketAddr, timeout: Duration, onnx: &[u8]) -> Result<String, String> {
    let unshaped = Link {
        mbps: None,
        rtt_ms: 0.0,
    };
    let reply = call(
        address,
        unshaped,
        timeout.max(Duration::from_secs(60)),
        "/compile",
        onnx,
    )?;
    let id = String::from_utf8(reply.body).map_err(|_| "cloud worker: the model id is not text".to_string())?;
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("cloud worker: malformed model id '{id}'"));
    }
    Ok(id)
}

/// A subgraph compiled on the server; compiled there again when the
/// server no longer knows it (a server restarted after a failure).
pub struct RemoteCompiled {
    address: SocketAddr,
    link: Link,
    timeout: Duration,
    path: String,
    id: String,
    onnx: Vec<u8>,
    latency: Arc<Mutex<CloudLatencyModel>>,
}

impl Compiled for RemoteCompiled {
    fn run(&self, inputs: TVec<Value>) -> Result<TVec<Value>, EngineError> {
        self.call(inputs)
            .map_err(|reason| EngineError::Run { engine: CLOUD, reason })
    }
}

impl RemoteCompiled {
    /// One run on the server, recompiling there when it lost the model.
    fn call(&self, inputs: TVec<Value>) -> Result<TVec<Value>, String> {
        let mut t = Instant::now();
        let body = encode(&inputs)?;
        let reply = match call_status(self.address, self.link, self.timeout, &self.path, &body) {
            Err((Some(404), _)) => {
                let id = compile_on(self.address, self.timeout, &self.onnx)?;
                if id != self.id {
                    return Err(format!(
                        "cloud worker at {}: the model's id changed from {} to {id} on recompiling",
                        self.address, self.id
                    ));
                }
                t = Instant::now();
                call(self.address, self.link, self.timeout, &self.path, &body)?
            }
            other => other.map_err(|(_, e)| e)?,
        };
        let out = decode(&reply.body).map_err(|e| format!("cloud worker at {}: malformed reply: {e}", self.address))?;
        let compute_ms = reply
            .header("X-Compute-Ms")
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| {
                format!(
                    "cloud worker at {}: malformed reply: no valid X-Compute-Ms header",
                    self.address
                )
            })?;
        if let Ok(mut m) = self.latency.lock() {
            m.observe(CloudCall {
                model: self.id.clone(),
                bytes_in: body.len(),
                bytes_out: reply.body.len(),
                total_ms: t.elapsed().as_secs_f64() * 1e3,
                compute_ms,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::splash::cloud::CloudServer;
    use engine::TractEngine;
    use tract_onnx::prelude::{IntoTValue, Tensor};

    /// A real server on localhost behind a 13 Mbit/s link with an 8 ms
    /// round trip: models of four input sizes, each run a few times; the
    /// fitted link recovers the shaper's round trip and bandwidth (its
    /// ms per MB, plus what encoding and decoding cost per byte), and the
    /// latency model predicts each call within a quarter on average.
    #[test]
    fn the_latency_model_recovers_the_shaped_link() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = Arc::new(CloudServer::new(Box::new(TractEngine::new(1).unwrap())));
        std::thread::spawn(move || server.serve(listener));
        let link = Link {
            mbps: Some(13.0),
            rtt_ms: 8.0,
        };
        let engine = RemoteEngine::new(&addr, link, Duration::from_secs(10)).unwrap();
        let latency = engine.latency_model();
        for round in 0..4 {
            for side in [8, 24, 40, 56] {
                let g = scheduler_rt::testing::sequential_sized(4, 1, side).unwrap();
                let onnx = graph_ir::onnx::export_bytes(&g).unwrap();
                let compiled = engine.compile(&onnx).unwrap();
                let n = 3 * side * side;
                let x = Tensor::from_shape(&[1, 3, side, side], &vec![0.5f32; n]).unwrap();
                let out = compiled.run(std::iter::once(x.into_tvalue()).collect()).unwrap();
                assert_eq!(out[0].shape(), &[1, 10], "round {round}, side {side}");
            }
        }
        let m = latency.lock().unwrap();
        let fit = m.fit().unwrap();
        let shaped = 8.0 * 1e3 / 13.0;
        // Encoding and decoding run on the test's cores, so they add to the
        // shaped cost per MB and to the round trip, more when other
        // processes load those cores: the bounds leave room for that.
        assert!(
            fit.ms_per_mb_in > shaped && fit.ms_per_mb_in < 1.5 * shaped,
            "{fit:?}: the link costs {shaped:.0} ms/MB, serializing a little more"
        );
        assert!(fit.fixed_ms > 8.0 && fit.fixed_ms < 14.0, "{fit:?}");
        // On this link calls of the four sizes differ severalfold, so one
        // fixed figure for all of them would be far off; the bound leaves
        // room for scheduling jitter when other tests load the same cores.
        let e = m.errors();
        assert!(e.calls >= 8 && e.model_mape < 0.25, "{e:?}");
    }
}
