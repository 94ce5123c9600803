//! `scheduler-rt`: runs a branched model with its branches in parallel on
//! different processors (NN-Stretch §5, Algorithm 1).
//!
//! A model annotated with [`graph_ir::keys::PROCESSOR`] is cut into
//! processor-level [`Subgraph`]s ([`partition`]); each subgraph is compiled
//! once by the [`Engine`] of every processor (tract, or onnxruntime with the
//! `ort` feature; [`EngineKind`]); a [`Runtime`] then serves requests from
//! any number of client threads, dispatching subgraphs to pinned pool
//! threads and in-order queue threads ([`WorkerKind`]) and running the
//! scheduling thread's own subgraphs inline, joining at meeting points.
//! Processors come from specs or a TOML file ([`RuntimeConfig`]). A
//! [`policy::PlacementPolicy`] such as [`AdaptivePolicy`] may move
//! subgraphs between processors as their observed latencies change.

pub mod adaptive;
pub mod affinity;
pub mod bench;
pub mod config;
pub mod engine;
pub mod engine_registry;
pub mod error;
pub mod extract;
mod load_checks;
pub mod memory;
pub mod npy;
#[cfg(feature = "ort")]
mod ort_engine;
pub mod partition;
pub mod policy;
pub mod pool;
pub mod priority;
pub mod probe;
pub mod queue;
mod roots;
mod runtime;
mod runtime_config;
pub mod spin;
pub mod support;
pub mod testing;
pub mod timing;
mod trace;
pub mod worker;

pub use adaptive::{AdaptiveParams, AdaptivePolicy};
pub use config::{EngineKind, ProcessorConfig, Remote, Spin, Wait, WorkerKind};
pub use engine::{Compiled, Engine, EngineFactory, TRACT_VERSION, TractEngine, Value, default_factory, make_engine};
pub use engine_registry::{EngineEntry, EngineRegistry};
pub use error::RuntimeError;
pub use extract::{extract, extract_onnx, value_name};
#[cfg(feature = "ort")]
pub use ort_engine::{OrtEngine, WHEEL_DIR, dylib_path};
pub use partition::{Partition, Subgraph, partition};
pub use roots::search_roots;
pub use runtime::{LATENCY_EMA_ALPHA, Runtime};
pub use runtime_config::{RuntimeConfig, toml_line};
pub use spin::POLL_BEFORE_BLOCKING;
pub use trace::{Moved, Span, Trace};
