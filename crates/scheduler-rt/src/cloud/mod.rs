//! A real cloud worker (Splash §5): a server process that compiles and runs
//! subgraphs ([`server`]) and the engine that offloads to it over a shaped
//! link ([`client`]), speaking [`wire`].

pub mod client;
pub mod server;
pub mod wire;

pub use client::{Link, RemoteEngine};
pub use server::CloudServer;
