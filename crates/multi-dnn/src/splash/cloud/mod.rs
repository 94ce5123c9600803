//! A real cloud worker (Splash §5): a server process that compiles and runs
//! subgraphs ([`server`]) and the engine that offloads to it over a shaped
//! link ([`client`]), speaking [`wire`], learning how long a call takes
//! ([`latency`]).

pub mod client;
pub mod latency;
pub mod report;
pub mod server;
pub mod wire;

pub use client::{Link, Prober, RemoteEngine};
pub use latency::{CloudCall, CloudLatencyModel, LinkFit, PredictionErrors};
pub use server::CloudServer;

use engine::{Builds, EngineEntry, EngineError, EngineRegistry};

/// The registry's cloud engine: a processor with `remote = ADDR`.
pub const ENGINE: EngineEntry = EngineEntry {
    name: "cloud",
    aliases: &[],
    summary: "a `stretch worker` server reached over a shaped link",
    builds: Builds::When(|c| c.remote.is_some()),
    make: |c| {
        let remote = c.remote.as_ref().ok_or_else(|| EngineError::Unavailable {
            engine: "cloud",
            reason: format!("processor '{}' has no remote address", c.processor),
        })?;
        RemoteEngine::from_config(remote)
            .map(|e| Box::new(e) as Box<dyn engine::Engine>)
            .map_err(|reason| EngineError::Unavailable {
                engine: "cloud",
                reason,
            })
    },
};

/// The built-in engines and the cloud engine.
pub fn engines() -> EngineRegistry {
    EngineRegistry::builtin().with(ENGINE)
}
