//! Errors of the profiling harness.

use engine::EngineError;
use engine::host::HostError;
use std::path::PathBuf;
use thiserror::Error;

/// An error from profiling kernels: settings, cores, the CSV store, building
/// a kernel's graph or running it on the engine.
#[derive(Debug, Error)]
pub enum ProfilerError {
    /// Cores that do not parse, are not available or cannot be pinned to.
    #[error(transparent)]
    Host(#[from] HostError),
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
