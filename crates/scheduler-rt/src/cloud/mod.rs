//! A real cloud worker (Splash §5): a server process that compiles and runs
//! subgraphs ([`server`]) and the engine that offloads to it over a shaped
//! link ([`client`]), speaking [`wire`], learning how long a call takes
//! ([`latency`]).

pub mod client;
pub mod latency;
pub mod server;
pub mod wire;

pub use client::{Link, RemoteEngine};
pub use latency::{CloudCall, CloudLatencyModel, LinkFit, PredictionErrors};
pub use server::CloudServer;
