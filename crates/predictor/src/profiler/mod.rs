//! The profiling harness: measures kernels on a real engine to train
//! per-kernel regressors (nn-Meter).
//!
//! Configurations of each kernel class ([`KernelKind`]) are sampled from the
//! shapes real CNNs use plus random ones ([`space`]), each is built as a tiny
//! graph and exported to ONNX ([`kernel_graph`]), compiled once on an
//! [`engine::Engine`], its inputs bound ([`timing::Bound`]), and timed after
//! warm-up ([`timing`]) on a thread pinned to chosen cores
//! ([`engine::host`]). Rows go to a CSV as they are measured
//! ([`csv`]); a rerun into the same file skips what it holds. Adaptive rounds
//! then add neighbours of the configurations a quick predictor gets wrong by
//! more than 10% ([`adaptive`]). [`Profiler`] drives it all.

pub mod adaptive;
pub mod csv;
mod error;
pub mod fusion;
pub mod host;
#[cfg(feature = "onnx")]
pub mod in_model;
pub mod kernel_graph;
pub mod link;
mod run;
pub mod space;
pub mod timing;

pub use error::ProfilerError;
pub use run::{ClassCounts, ClassRound, Event, Profiler, Settings, Summary};
pub use space::{KernelConfig, KernelKind, Origin};
