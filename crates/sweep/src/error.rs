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
    #[error(
        "Ray cluster at {address}: each job asks for {cpus} CPU(s) and {gpus} GPU(s) on one node, and the largest of its {nodes} alive node(s) has {node_cpus} CPU(s) and {node_gpus} GPU(s); lower --cpus-per-job or --gpus-per-job, or add a larger node"
    )]
    TooLarge {
        address: String,
        cpus: f64,
        gpus: f64,
        node_cpus: f64,
        node_gpus: f64,
        nodes: usize,
    },
    #[error("{} is in use by another `stretch sweep` ({}); wait for it to end or stop it", dir.display(), match pid { Some(p) => format!("pid {p}"), None => "pid unknown".to_string() })]
    Locked { dir: PathBuf, pid: Option<u32> },
    #[error("interrupted: {stopped} running job(s) stopped; rerun the same command to finish the rest")]
    Interrupted { stopped: usize },
}
