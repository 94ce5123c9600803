//! Errors of lowering, data loading, training and checkpoints.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum TrainError {
    /// A node the lowering cannot turn into burn operations.
    #[error("node '{node}' ({op}): {reason}")]
    Unsupported {
        node: String,
        op: &'static str,
        reason: String,
    },
    /// The graph as a whole does not fit training (inputs, outputs, dtypes).
    #[error("model: {0}")]
    Model(String),
    /// A dataset file is missing or not in the expected format.
    #[error("{}: {reason}", path.display())]
    Dataset { path: PathBuf, reason: String },
    /// The model's classifier does not produce one score per dataset class.
    #[error(
        "the model outputs {model} scores per image but the dataset has {dataset} classes; pass --replace-head to put a fresh {dataset}-way classifier on the model"
    )]
    ClassMismatch { model: usize, dataset: usize },
    /// The loss stopped being finite.
    #[error("loss is {value} at epoch {epoch}, batch {batch}: training stopped (lower --lr?); {checkpoint}")]
    NonFinite {
        value: f32,
        epoch: usize,
        batch: usize,
        checkpoint: String,
    },
    /// A checkpoint that cannot be read, or that belongs to another model or recipe.
    #[error("checkpoint {}: {reason}", path.display())]
    Checkpoint { path: PathBuf, reason: String },
    /// An option value out of range.
    #[error("{key}: {reason}")]
    Option { key: &'static str, reason: String },
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
    #[error(transparent)]
    Graph(#[from] graph_ir::GraphError),
}

impl TrainError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> TrainError {
        TrainError::Io {
            path: path.into(),
            error: source,
        }
    }

    pub(crate) fn dataset(path: impl Into<PathBuf>, reason: impl Into<String>) -> TrainError {
        TrainError::Dataset {
            path: path.into(),
            reason: reason.into(),
        }
    }
}
