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

use scheduler_rt::{EngineEntry, EngineRegistry};

/// The registry's cloud engine: a processor with `remote = ADDR`.
pub const ENGINE: EngineEntry = EngineEntry {
    kind: "cloud",
    builds: |c| c.remote.is_some(),
    make: |c| {
        let remote = c
            .remote
            .as_ref()
            .ok_or_else(|| scheduler_rt::RuntimeError::EngineUnavailable {
                engine: "cloud",
                reason: format!("processor '{}' has no remote address", c.name),
            })?;
        RemoteEngine::from_config(remote)
            .map(|e| Box::new(e) as Box<dyn scheduler_rt::Engine>)
            .map_err(|reason| scheduler_rt::RuntimeError::EngineUnavailable {
                engine: "cloud",
                reason,
            })
    },
};

/// scheduler-rt's engines and the cloud engine.
pub fn engines() -> EngineRegistry {
    EngineRegistry::builtin().with(ENGINE)
}
