//! Timing subgraphs on a runtime configuration's processors, for the
//! commands that measure instead of predicting: pinned timing threads
//! ([`piece`]), the database of measured subgraph times ([`cost_db`]),
//! `plan --measure-on`'s latency model ([`plan_model`]), and `bench`'s
//! interleaved timing loop ([`interleave`]) with its outside load
//! ([`load`]).

pub mod cost_db;
pub mod interleave;
pub mod load;
pub mod piece;
pub mod plan_model;

use std::path::PathBuf;

/// Why a measurement could not be made or kept.
#[derive(Debug, thiserror::Error)]
pub enum TimingError {
    #[error("{}: not a cost database (delete it to start afresh): {reason}", .path.display())]
    CostDb { path: PathBuf, reason: String },
    #[error("cannot write {}: {reason}", .path.display())]
    Write { path: PathBuf, reason: String },
    #[error(
        "{runtime}: processor `{processor}` is not in device `{device}`'s profile (it has {known}), which gives the hand-offs between processors"
    )]
    UnknownProcessor {
        runtime: String,
        processor: String,
        device: String,
        known: String,
    },
    #[error("bad --interference '{spec}': {reason}")]
    LoadSpec { spec: String, reason: String },
    #[error("--interference: {reason}")]
    Load { reason: String },
    #[error("cannot pin the timing thread: {reason}")]
    Pin { reason: String },
    #[error("cannot load {label} on {on}: {error}")]
    LoadModel {
        label: String,
        /// The runtime, or every processor (adaptive placement).
        on: &'static str,
        error: Box<crate::RuntimeError>,
    },
    #[error("the original has no input")]
    NoInput,
    #[error("cannot make the benchmark's input: {reason}")]
    Input { reason: String },
    #[error(transparent)]
    Runtime(Box<crate::RuntimeError>),
}

impl From<crate::RuntimeError> for TimingError {
    fn from(e: crate::RuntimeError) -> Self {
        TimingError::Runtime(Box::new(e))
    }
}
