//! The cloud worker's server (`stretch worker --listen`): compiles the
//! models clients send and runs their requests with its own engine.

use crate::splash::cloud::wire::{Message, decode, encode, read_message, write_message};
use engine::{Compiled, Engine};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the server answers, for the errors that list it.
const ENDPOINTS: &str = "POST /compile, POST /run/ID, GET /health";

/// The models compiled so far, by id.
pub struct CloudServer {
    engine: Box<dyn Engine>,
    models: Mutex<HashMap<String, Arc<dyn Compiled>>>,
}

impl CloudServer {
    pub fn new(engine: Box<dyn Engine>) -> CloudServer {
        CloudServer {
            engine,
            models: Mutex::new(HashMap::new()),
        }
    }

    /// Accepts connections for ever, one thread per connection; returns
    /// only when accepting fails.
    pub fn serve(self: &Arc<Self>, listener: TcpListener) -> std::io::Result<()> {
        for stream in listener.incoming() {
            let stream = stream?;
            let me = Arc::clone(self);
            std::thread::spawn(move || me.handle(stream));
        }
        Ok(())
    }

    fn handle(&self, mut stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
        let reply = match read_message(&mut stream) {
            Ok(m) => self.answer(&m),
            Err(e) => Err((400, e)),
        };
        let _ = match reply {
            Ok((headers, body)) => write_message(&mut stream, "HTTP/1.1 200 OK", &headers, &body),
            Err((code, reason)) => write_message(
                &mut stream,
                &format!(
                    "HTTP/1.1 {code} {}",
                    if code < 500 { "Bad Request" } else { "Server Error" }
                ),
                &[],
                reason.as_bytes(),
            ),
        };
    }

    #[allow(clippy::type_complexity)]
    fn answer(&self, m: &Message) -> Result<(Vec<(&'static str, String)>, Vec<u8>), (u16, String)> {
        let mut parts = m.start.split_whitespace();
        let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if method == "GET" && path == "/health" {
            return Ok((Vec::new(), b"ok".to_vec()));
        }
        if method != "POST" {
            return Err((405, format!("{method} {path}: only {ENDPOINTS}")));
        }
        if path == "/compile" {
            let mut h = DefaultHasher::new();
            m.body.hash(&mut h);
            let id = format!("{:016x}", h.finish());
            let known = self
                .models
                .lock()
                .map_err(|_| (500, "model table poisoned".into()))?
                .contains_key(&id);
            if !known {
                let c = self
                    .engine
                    .compile(&m.body)
                    .map_err(|e| (422, format!("cannot compile: {}", e.reason())))?;
                self.models
                    .lock()
                    .map_err(|_| (500, "model table poisoned".to_string()))?
                    .insert(id.clone(), Arc::from(c));
            }
            return Ok((Vec::new(), id.into_bytes()));
        }
        let Some(id) = path.strip_prefix("/run/") else {
            return Err((404, format!("no such endpoint {path} ({ENDPOINTS})")));
        };
        let c = self
            .models
            .lock()
            .map_err(|_| (500, "model table poisoned".to_string()))?
            .get(id)
            .cloned()
            .ok_or_else(|| (404, format!("no model '{id}' (compile it first)")))?;
        let inputs = decode(&m.body).map_err(|e| (400, format!("inputs: {e}")))?;
        let t = Instant::now();
        let outputs = c.run(inputs).map_err(|e| (500, format!("run: {}", e.reason())))?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let body = encode(&outputs).map_err(|e| (500, e))?;
        Ok((vec![("X-Compute-Ms", format!("{ms:.4}"))], body))
    }
}
