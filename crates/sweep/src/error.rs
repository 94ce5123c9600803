//! Errors of reading a sweep file, keeping its directory and running its jobs.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SweepError {
    #[error("cannot {action} {}: {error}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: {reason}", path.display())]
    Spec { path: PathBuf, reason: String },
    #[error("{}: not a sweep state file: {reason}", path.display())]
    State { path: PathBuf, reason: String },
    #[error("cannot start job `{job}`: {reason}")]
    Start { job: String, reason: String },
    #[error("Ray cluster at {address}: {reason}")]
    Ray { address: String, reason: String },
    #[error("interrupted: {stopped} running job(s) stopped; rerun the same command to finish the rest")]
    Interrupted { stopped: usize },
}
