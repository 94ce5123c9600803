//! Where a sweep's jobs run: a trait the driver sees, implemented by the
//! local process pool and the Ray client (and by test doubles).

use std::time::Duration;

use crate::error::SweepError;
use crate::expand::Job;

/// A submitted job as its executor reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Accepted, not started (waiting for resources).
    Pending,
    Running,
    Succeeded,
    /// Ended in failure, with what the executor says about it.
    Failed(String),
    /// Stopped before it ended (by a user or the cluster).
    Stopped,
}

/// Runs jobs: submits them, reports their status, shows their logs and
/// stops them.
pub trait Executor {
    /// For messages: "a local pool of 2", "the Ray cluster at URL".
    fn describe(&self) -> String;
    /// Jobs in flight at most.
    fn slots(&self) -> usize;
    /// How often the driver polls.
    fn poll_interval(&self) -> Duration;
    /// Whether a submission of an earlier run (its handle) can still be
    /// followed, as on a cluster that outlives the sweep command.
    fn follows_handles(&self) -> bool;
    /// Starts attempt `attempt` (1-based) of `job`; returns its handle.
    fn submit(&mut self, job: &Job, attempt: u32) -> Result<String, SweepError>;
    fn status(&mut self, handle: &str) -> Result<Status, SweepError>;
    /// The last `lines` lines of the job's output (empty when unknown).
    fn log_tail(&mut self, handle: &str, lines: usize) -> String;
    fn stop(&mut self, handle: &str) -> Result<(), SweepError>;
    /// Keeps the ended attempt `attempt`'s output in `path` (the sweep
    /// directory's log of the job), where the executor does not write
    /// there itself.
    fn keep_log(&mut self, _handle: &str, _path: &std::path::Path, _attempt: u32) {}
}

/// Writes `text` to the log `path` (attempt 1) or appends it under an
/// attempt header; a log that cannot be written is left out.
pub fn append_log(path: &std::path::Path, attempt: u32, text: &str) {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let file = if attempt <= 1 {
        std::fs::File::create(path)
    } else {
        std::fs::OpenOptions::new().create(true).append(true).open(path)
    };
    if let Ok(mut f) = file {
        let header = if attempt <= 1 {
            String::new()
        } else {
            format!("--- attempt {attempt} ---\n")
        };
        let _ = write!(f, "{header}{text}");
    }
}

/// The last `lines` lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
