//! Errors of engines: making one, loading a model, binding its inputs,
//! running it.

use thiserror::Error;

/// An error from an inference engine. `engine` is the engine's registered
/// name (`tract`, `ort`, `cloud`, ...).
#[derive(Debug, Error)]
pub enum EngineError {
    #[error("{engine}: --threads must be at least 1")]
    ZeroThreads { engine: &'static str },
    /// The engine cannot be made here: not in this build, its library
    /// missing, or no registered engine builds the configuration.
    #[error("engine {engine} is not available: {reason}")]
    Unavailable { engine: &'static str, reason: String },
    /// A configuration names an engine the registry does not hold;
    /// `known` lists the registered names.
    #[error("unknown engine '{name}' ({known})")]
    Unknown { name: String, known: String },
    #[error("{engine} cannot load the model: {reason}")]
    Load { engine: &'static str, reason: String },
    #[error("{engine} rejects input {index}: {reason}")]
    Input {
        engine: &'static str,
        index: usize,
        reason: String,
    },
    #[error("{engine} failed to run the model: {reason}")]
    Run { engine: &'static str, reason: String },
}

impl EngineError {
    /// The engine's own words, without the engine's name: what a caller
    /// that names the engine, subgraph and processor itself reports.
    pub fn reason(&self) -> String {
        match self {
            EngineError::Unavailable { reason, .. }
            | EngineError::Load { reason, .. }
            | EngineError::Input { reason, .. }
            | EngineError::Run { reason, .. } => reason.clone(),
            other => other.to_string(),
        }
    }
}
