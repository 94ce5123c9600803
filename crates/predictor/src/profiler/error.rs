//! Errors of the profiling harness.

use std::path::PathBuf;
use thiserror::Error;

/// An error from an inference engine: loading a kernel's model, binding its
/// inputs or running it.
#[derive(Debug, Error)]
pub enum EngineError {
    #[error("{engine}: --threads must be at least 1")]
    ZeroThreads { engine: &'static str },
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

/// An error from profiling kernels: settings, cores, the CSV store, building
/// a kernel's graph or running it on the engine.
#[derive(Debug, Error)]
pub enum ProfilerError {
    #[error("cores `{spec}`: {reason} (write cores as `0`, `0,2` or `0-3`)")]
    CoreSpec { spec: String, reason: String },
    #[error("core {core} is not available to this process (it may run on cores {available})")]
    CoreUnavailable { core: usize, available: String },
    #[error("cannot pin a thread to cores {cores}: {error}")]
    Affinity { cores: String, error: std::io::Error },
    #[error("pinning threads to cores is only supported on Linux")]
    AffinityUnsupported,
    #[error("--threads {threads} needs at least {threads} cores in --cores, got {cores}")]
    ThreadsExceedCores { threads: usize, cores: String },
    #[error("setting `{name}`: {reason}")]
    Setting { name: &'static str, reason: String },
    #[error("cannot {action} {}: {error}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: header is `{found}`, this version writes `{expected}`; use a new --out directory", path.display())]
    Header {
        path: PathBuf,
        found: String,
        expected: String,
    },
    #[error("{}:{line}: malformed row: {reason}", path.display())]
    MalformedRow { path: PathBuf, line: usize, reason: String },
    #[error(
        "{}:{line}: row was measured with {field} `{found}`, this run uses `{expected}`; \
         profile into a new --out directory or repeat the earlier settings",
        path.display()
    )]
    Mismatch {
        path: PathBuf,
        line: usize,
        field: &'static str,
        found: String,
        expected: String,
    },
    #[error("kernel {kernel}: cannot build its graph: {error}")]
    Build {
        kernel: String,
        error: Box<graph_ir::GraphError>,
    },
    #[error("kernel {kernel}: cannot export it to ONNX: {error}")]
    Export {
        kernel: String,
        error: Box<graph_ir::onnx::ExportError>,
    },
    #[error("kernel {kernel}: fusion rules split its graph into `{found}`, not one `{expected}` kernel")]
    Detection {
        kernel: String,
        found: String,
        expected: String,
    },
    #[error("kernel {kernel}: {error}")]
    Engine { kernel: String, error: EngineError },
    #[error("class {class}: cannot fit the adaptive-sampling predictor: {error}")]
    Fit {
        class: String,
        error: crate::forest::ForestError,
    },
}
