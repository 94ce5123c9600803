//! `scheduler-rt`: runs a branched model with its branches in parallel on
//! different processors (NN-Stretch §5, Algorithm 1).
//!
//! A model annotated with [`graph_ir::keys::PROCESSOR`] is cut into
//! processor-level [`Subgraph`]s ([`partition`]); each subgraph is compiled
//! once by the [`engine::Engine`] of every processor, made by an
//! [`EngineFactory`] from an [`engine::EngineRegistry`] (tract, or
//! onnxruntime with the `ort` feature); a [`Runtime`] then serves requests from
//! any number of client threads, dispatching subgraphs to pinned pool
//! threads and in-order queue threads ([`WorkerKind`]) and running the
//! scheduling thread's own subgraphs inline, joining at meeting points.
//! Processors come from specs or a TOML file ([`RuntimeConfig`]). A
//! [`policy::PlacementPolicy`] such as [`AdaptivePolicy`] may move
//! subgraphs between processors as their observed latencies change.

pub mod adaptive;
pub mod bench;
pub mod config;
pub mod error;
pub mod extract;
pub mod factory;
mod load_checks;
pub mod memory;
pub mod npy;
pub mod partition;
pub mod policy;
pub mod priority;
#[cfg(feature = "onnx")]
pub mod probe;
pub mod queue;
mod runtime;
mod runtime_config;
pub mod spin;
pub mod support;
pub mod testing;
pub mod timing;
mod trace;
pub mod worker;

pub use adaptive::{AdaptiveParams, AdaptivePolicy};
pub use config::{ProcessorConfig, Wait, WorkerKind};
pub use error::RuntimeError;
pub use extract::{extract, extract_onnx, value_name};
pub use factory::{EngineFactory, default_factory, factory};
pub use partition::{Partition, Subgraph, partition};
pub use runtime::{LATENCY_EMA_ALPHA, Runtime};
pub use runtime_config::{RuntimeConfig, toml_line};
pub use spin::POLL_BEFORE_BLOCKING;
pub use trace::{Moved, Span, Trace};
