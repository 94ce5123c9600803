//! `engine`: the inference engines every part of stretch runs models on.
//!
//! An [`Engine`] compiles an ONNX model once into a [`Compiled`] model that
//! runs many times ([`engine`]); tract is built in ([`tract`]), onnxruntime
//! is loaded at run time with the `ort` feature ([`ort`]); a bundle's
//! LiteRT files run on tract through stretch's own reader ([`tflite`], an entry a runner adds; [`tflite_load`]). The
//! [`EngineRegistry`] is the one list of engines: configurations name an
//! engine by its registered name, and the runtime, the profiler and the
//! bundle runner make their engines from the registry they are given, so
//! an engine is added as one file plus one registry entry. [`host`] holds
//! what engines need of the machine: core sets, pinning, steal accounting.
//! The tensor pool at the engine boundary is [`pool`].

pub mod config;
pub mod engine;
pub mod error;
pub mod host;
#[cfg(feature = "ort")]
pub mod ort;
pub mod pool;
pub mod registry;
mod roots;
pub mod tflite;
mod tflite_io;
pub mod tflite_load;
#[cfg(feature = "onnx")]
pub mod tract;
mod tract_plan;

pub use config::{EngineConfig, Remote, Spin};
pub use engine::{Compiled, Engine, Value, values};
pub use error::EngineError;
pub use registry::{Builds, EngineEntry, EngineRegistry, ORT_BUILT};
pub use roots::search_roots;
#[cfg(feature = "onnx")]
pub use tract::{NodeTimed, PlanNode, TractEngine, tract_model};
pub use tract_plan::TRACT_VERSION;
