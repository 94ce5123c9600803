//! Where a sweep's jobs run: a trait the driver sees, implemented by the
//! local process pool and the Ray client (and by test doubles).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
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

/// What a stop request did.
#[derive(Debug, Clone, PartialEq)]
pub enum Stopped {
    /// The job has ended.
    Now,
    /// The executor ends the job later; why, for the user.
    Later(String),
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
    /// `log` is the job's log in the sweep directory: an executor whose
    /// jobs write their output as they run writes it there (see
    /// [`start_log`]).
    fn submit(&mut self, job: &Job, attempt: u32, log: &Path) -> Result<String, SweepError>;
    fn status(&mut self, handle: &str) -> Result<Status, SweepError>;
    fn stop(&mut self, handle: &str) -> Result<Stopped, SweepError>;
    /// Keeps the ended attempt `attempt`'s output in `path` (the sweep
    /// directory's log of the job), where the executor does not write
    /// there itself.
    fn keep_log(&mut self, _handle: &str, _path: &Path, _attempt: u32) {}
}

/// The log `path` opened for attempt `attempt`'s output, appended to
/// under an attempt header: every attempt's output is kept, an earlier
/// run's too.
pub fn start_log(path: &Path, attempt: u32) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    writeln!(f, "--- attempt {attempt} ---")?;
    Ok(f)
}

/// The last `lines` lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
