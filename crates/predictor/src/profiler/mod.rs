//! The profiling harness: measures kernels on a real engine to train
//! per-kernel regressors (nn-Meter).
//!
//! Configurations of each kernel class ([`KernelKind`]) are sampled from the
//! shapes real CNNs use plus random ones ([`space`]), each is built as a tiny
//! graph and exported to ONNX ([`kernel_graph`]), compiled once on an
//! [`Engine`] and timed after warm-up ([`timing`]) on a thread pinned to
//! chosen cores ([`affinity`]). Rows go to a CSV as they are measured
//! ([`csv`]); a rerun into the same file skips what it holds. Adaptive rounds
//! then add neighbours of the configurations a quick predictor gets wrong by
//! more than 10% ([`adaptive`]). [`Profiler`] drives it all.

pub mod adaptive;
pub mod affinity;
pub mod csv;
pub mod engine;
mod error;
pub mod fusion;
pub mod host;
pub mod in_model;
pub mod kernel_graph;
pub mod link;
mod run;
pub mod space;
pub mod steal;
pub mod timing;

pub use affinity::CoreSet;
pub use engine::{Engine, NodeTimed, PlanNode, Runnable, TRACT_VERSION, TractEngine, tract_model, tract_values};
pub use error::{EngineError, ProfilerError};
pub use run::{ClassCounts, ClassRound, Event, Profiler, Settings, Summary};
pub use space::{KernelConfig, KernelKind, Origin};
