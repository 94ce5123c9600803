//! Errors of the runtime, with the subgraph, processor or value at fault.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error("node '{node}' is annotated processor '{processor}', which is not configured (configured: {configured})")]
    UnknownProcessor {
        node: String,
        processor: String,
        configured: String,
    },
    #[error("no processor is configured")]
    NoProcessors,
    #[error(
        "processor '{processor}' is configured to compute in {configured}, but the model computes its nodes in {model} ({source_of}); quantize it for this device (stretch quantize --device) or change the configuration"
    )]
    Precision {
        processor: String,
        configured: String,
        model: String,
        source_of: String,
    },
    #[error("processor '{processor}' is configured twice")]
    DuplicateProcessor { processor: String },
    /// `key` empty: the file as a whole (it cannot be read).
    #[error("{file}: {}{reason}", key_prefix(.key))]
    Config { file: String, key: String, reason: String },
    #[error("bad processor spec '{spec}': {reason}")]
    BadSpec { spec: String, reason: String },
    #[error("processor '{processor}' cannot be pinned: {reason}")]
    Pin { processor: String, reason: String },
    #[error("graph: {0}")]
    Graph(graph_ir::GraphError),
    #[error("subgraph {subgraph} cannot be exported: {reason}")]
    Export { subgraph: String, reason: String },
    #[error("probing the values of {graph}: {reason}")]
    Probe { graph: String, reason: String },
    #[error("engine {engine} cannot compile subgraph {subgraph} for processor '{processor}': {reason}")]
    Compile {
        engine: &'static str,
        subgraph: String,
        processor: String,
        reason: String,
    },
    #[error("subgraph {subgraph} on processor '{processor}' failed: {reason}")]
    Run {
        subgraph: String,
        processor: String,
        reason: String,
    },
    #[error("input {index} ('{name}'): expected {expected}, got {got}")]
    Input {
        index: usize,
        name: String,
        expected: String,
        got: String,
    },
    #[error("the model has {expected} inputs, {got} given")]
    InputCount { expected: usize, got: usize },
    #[error("every processor is disabled")]
    AllDisabled,
    /// An engine cannot be made (not in this build, its library missing,
    /// no registered engine builds the processor).
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    #[error("model '{model}': {reason}")]
    Units { model: String, reason: String },
    #[error("scheduling policy: {reason}")]
    Policy { reason: String },
    #[error("worker of processor '{processor}' has stopped")]
    WorkerGone { processor: String },
    #[error(
        "value `{value}` is {fact}, {need_gb:.3} GB, more than the {available_gb:.3} GB of memory available: the model cannot run here"
    )]
    TooLarge {
        value: String,
        fact: String,
        need_gb: f64,
        available_gb: f64,
    },
    #[error(
        "the model's values alive at once need at least {need_gb:.3} GB (after node `{node}`, run node by node), more than the {available_gb:.3} GB of memory available: the model cannot run here"
    )]
    TooLargeTogether {
        node: String,
        need_gb: f64,
        available_gb: f64,
    },
}

/// The cause is in this error's message, so it is not also its `source()`.
impl From<graph_ir::GraphError> for RuntimeError {
    fn from(error: graph_ir::GraphError) -> Self {
        RuntimeError::Graph(error)
    }
}

/// `"KEY: "`, or nothing for an error about a whole file (empty key).
pub fn key_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    }
}
