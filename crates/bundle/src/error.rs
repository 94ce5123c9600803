//! Errors reading, checking and writing bundles.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum BundleError {
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a bundle manifest: {reason}", path.display())]
    Manifest { path: PathBuf, reason: String },
    #[error("{}: schema `{found}`; this build reads `{}` (a newer stretch wrote it?)", path.display(), crate::SCHEMA)]
    Schema { path: PathBuf, found: String },
    #[error("{}: sha256 {found}, the manifest says {want}: the file was altered or replaced", path.display())]
    Hash { path: PathBuf, want: String, found: String },
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
}
