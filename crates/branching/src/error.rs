//! Errors of planning and branching.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum BranchError {
    #[error(transparent)]
    Graph(#[from] graph_ir::GraphError),
    #[error("stage analysis: {0}")]
    Analysis(graph_ir::analysis::AnalysisError),
    #[error(transparent)]
    Predict(#[from] predictor::PredictError),
    #[error("stage {stage}: node `{node}` ({op}) cannot be duplicated and scaled: {reason}")]
    Unsupported {
        stage: usize,
        node: String,
        op: &'static str,
        reason: String,
    },
    #[error("`--{name}` is {value}; it must be in (0, 1]")]
    Bound { name: &'static str, value: f64 },
    #[error("option `{name}`: {reason}")]
    Option { name: &'static str, reason: String },
    #[error("unknown processor `{name}`; the device `{device}` has: {available}")]
    UnknownProcessor {
        name: String,
        device: String,
        available: String,
    },
    #[error("processor `{name}` is named more than once; each processor takes at most one branch of a stage")]
    DuplicateProcessor { name: String },
    #[error("plan {path}: {reason}")]
    PlanFile { path: String, reason: String },
    #[error("the plan does not match the model: {reason}")]
    Mismatch { reason: String },
}

/// The cause is in this error's message, so it is not also its `source()`.
impl From<graph_ir::analysis::AnalysisError> for BranchError {
    fn from(error: graph_ir::analysis::AnalysisError) -> Self {
        BranchError::Analysis(error)
    }
}
