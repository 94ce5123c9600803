//! Errors reading, checking and writing bundles.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum BundleError {
    /// The I/O error is in the message and is not returned by `source()`.
    #[error("cannot {action} {}: {error}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: not a bundle manifest: {reason}", path.display())]
    Manifest { path: PathBuf, reason: String },
    #[error("{}: schema `{found}`; this build reads `{}` ({hint})", path.display(), crate::SCHEMA)]
    Schema {
        path: PathBuf,
        found: String,
        hint: &'static str,
    },
    #[error("{}: sha256 {found}, the manifest says {want}: the file was altered or replaced", path.display())]
    Hash { path: PathBuf, want: String, found: String },
    #[error(
        "manifest entry `{entry}` names `{file}`, which {reason}; a bundle names only plain files inside its directory"
    )]
    Entry {
        entry: String,
        file: String,
        reason: String,
    },
    #[error(
        "manifest: subgraph `{subgraph}` reads tensor `{tensor}`, which no model input or earlier subgraph produces"
    )]
    Unconnected { subgraph: String, tensor: String },
    #[error("manifest: {what}")]
    Inconsistent { what: String },
    #[error("{}: {reason}", path.display())]
    Model { path: PathBuf, reason: String },
    #[error("export: {reason}")]
    Export { reason: String },
    #[error("exporting {model}")]
    Exporting {
        model: String,
        #[source]
        source: Box<BundleError>,
    },
    #[error("onnxruntime's .ort conversion in {} failed ({what}): {message}", dir.display())]
    OrtConversion {
        dir: PathBuf,
        what: String,
        message: String,
    },
    #[error("LiteRT file: {0}")]
    LiteRt(#[from] litert::LiteRtError),
    #[error("the model has no input with a channel dimension to normalise")]
    NoChannels,
    #[error(
        "input normalisation from {from} has {mean} mean and {std} std values; the model's input has {channels} channels"
    )]
    NormalisationLength {
        from: String,
        mean: usize,
        std: usize,
        channels: usize,
    },
    #[error("input normalisation from {from}: {value} is not a usable value (std must be positive, both finite)")]
    NormalisationValue { from: String, value: f32 },
}

impl BundleError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, error: std::io::Error) -> BundleError {
        BundleError::Io {
            action,
            path: path.into(),
            error,
        }
    }
}
