//! `stretch worker`: the server side of a cloud worker (Splash §5).

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use engine::EngineRegistry;
use multi_dnn::splash::cloud::CloudServer;
use std::net::TcpListener;
use std::sync::Arc;

/// Serve as a cloud worker: runtimes whose processor list has
/// `NAME=pool,remote=HOST:PORT` send this process the subgraphs to compile
/// (`POST /compile`, an ONNX model) and then their inputs (`POST /run/ID`),
/// and get the outputs back with the compute time in `X-Compute-Ms`. HTTP
/// over plain sockets: see scheduler-rt's `cloud::wire` for the format.
/// Runs until killed.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Address to listen on, e.g. 127.0.0.1:7000 (port 0 picks a free one;
    /// the address is printed on the first line of stdout).
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: String,

    /// Engine that runs the models: ort (onnxruntime, the default where
    /// this build has it) or tract.
    #[arg(long, value_parser = engine_name)]
    pub engine: Option<String>,

    /// Intra-op threads of the engine.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
}

/// A registered engine's name, as a configuration spells it.
fn engine_name(s: &str) -> Result<String, String> {
    EngineRegistry::builtin()
        .canonical(s)
        .map(str::to_string)
        .map_err(|e| e.to_string())
}

pub fn run(a: Args) -> Result<()> {
    let default = if engine::ORT_BUILT { "ort" } else { "tract" };
    let name = a.engine.as_deref().unwrap_or(default);
    let engine = EngineRegistry::builtin()
        .local("cloud", name, a.threads.max(1))
        .context("cannot start the worker's engine")?;
    let listener = TcpListener::bind(&a.listen).with_context(|| format!("cannot listen on {}", a.listen))?;
    let addr = listener.local_addr()?;
    println!("listening on {addr}");
    eprintln!(
        "cloud worker: {} {} with {} thread(s); stop with Ctrl-C",
        engine.name(),
        engine.version(),
        engine.threads()
    );
    let server = Arc::new(CloudServer::new(engine));
    server.serve(listener).with_context(|| format!("serving on {addr}"))
}
