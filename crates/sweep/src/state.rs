//! The sweep directory's record of every job (`state.json`): what ran, how
//! often, where (a cluster's submission id) and how it ended, so that a
//! rerun finishes only what is missing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::SweepError;
use crate::expand::Job;

pub const SCHEMA: &str = "stretch.sweep-state/1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Stopped,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobState {
    pub phase: Phase,
    /// Submissions so far (retries included).
    pub attempts: u32,
    /// The executor's handle of the last submission (a Ray submission id).
    pub handle: Option<String>,
    /// Why the last attempt failed, with its log's tail.
    pub error: Option<String>,
    /// The command lines the job ran: a job whose lines change is rerun.
    pub steps: Vec<Vec<String>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct File {
    schema: String,
    jobs: BTreeMap<String, JobState>,
}

/// The state of every job of a sweep directory.
#[derive(Debug)]
pub struct State {
    path: PathBuf,
    pub jobs: BTreeMap<String, JobState>,
}

/// The lock of a sweep directory (`DIR/sweep.lock`, an exclusive
/// `flock` holding its holder's pid): one sweep runs in a directory at a
/// time. Released when dropped or when the holder dies.
#[derive(Debug)]
pub struct Lock {
    _file: std::fs::File,
}

impl Lock {
    /// Takes the lock of `dir` (created if missing), or fails naming the
    /// directory and the pid of the sweep holding it.
    pub fn acquire(dir: &Path) -> Result<Lock, SweepError> {
        use std::io::{Read, Seek, Write};
        use std::os::fd::AsRawFd;
        std::fs::create_dir_all(dir).map_err(|error| SweepError::Io {
            action: "create",
            path: dir.to_path_buf(),
            error,
        })?;
        let path = dir.join("sweep.lock");
        let io = |action, error| SweepError::Io {
            action,
            path: path.clone(),
            error,
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| io("open", e))?;
        // SAFETY: flock(2) on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::WouldBlock {
                return Err(io("lock", e));
            }
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            return Err(SweepError::Locked {
                dir: dir.to_path_buf(),
                pid: text.trim().parse().ok(),
            });
        }
        file.set_len(0).map_err(|e| io("write", e))?;
        file.rewind().map_err(|e| io("write", e))?;
        writeln!(file, "{}", std::process::id()).map_err(|e| io("write", e))?;
        file.flush().map_err(|e| io("write", e))?;
        Ok(Lock { _file: file })
    }
}

impl State {
    /// The state kept in `dir` (created if missing); empty for a new sweep.
    pub fn open(dir: &Path) -> Result<State, SweepError> {
        std::fs::create_dir_all(dir).map_err(|error| SweepError::Io {
            action: "create",
            path: dir.to_path_buf(),
            error,
        })?;
        let path = dir.join("state.json");
        let jobs = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let file: File = serde_json::from_str(&text).map_err(|e| SweepError::State {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
                if file.schema != SCHEMA {
                    return Err(SweepError::State {
                        path,
                        reason: format!("schema `{}`, this build reads `{SCHEMA}`", file.schema),
                    });
                }
                file.jobs
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => {
                return Err(SweepError::Io {
                    action: "read",
                    path,
                    error: source,
                });
            }
        };
        Ok(State { path, jobs })
    }

    /// Writes the state (to a temporary file renamed over the old one, so
    /// a killed sweep leaves the last complete state).
    pub fn save(&self) -> Result<(), SweepError> {
        let file = File {
            schema: SCHEMA.into(),
            jobs: self.jobs.clone(),
        };
        let text = serde_json::to_string_pretty(&file).expect("state serialises") + "\n";
        let tmp = self.path.with_extension("json.tmp");
        let io = |action, source| SweepError::Io {
            action,
            path: self.path.clone(),
            error: source,
        };
        std::fs::write(&tmp, text).map_err(|e| io("write", e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| io("replace", e))
    }

    /// Whether `job` finished in an earlier run: it succeeded with the same
    /// command lines and its files are still there.
    pub fn finished(&self, job: &Job) -> bool {
        self.jobs.get(&job.id).is_some_and(|s| {
            s.phase == Phase::Succeeded && s.steps == job.steps && job.outputs().iter().all(|p| p.is_file())
        })
    }

    /// Brings the record in line with `jobs`: finished jobs are kept,
    /// every other job becomes pending (attempts reset) unless it is
    /// running on an executor that can follow it (`keep_running`) with the
    /// same command lines. Returns how many jobs had already finished.
    pub fn reconcile(&mut self, jobs: &[Job], keep_running: bool) -> usize {
        let mut finished = 0;
        for job in jobs {
            if self.finished(job) {
                finished += 1;
                continue;
            }
            let follow = keep_running
                && self
                    .jobs
                    .get(&job.id)
                    .is_some_and(|s| s.phase == Phase::Running && s.handle.is_some() && s.steps == job.steps);
            if !follow {
                self.jobs.insert(
                    job.id.clone(),
                    JobState {
                        phase: Phase::Pending,
                        attempts: 0,
                        handle: None,
                        error: None,
                        steps: job.steps.clone(),
                    },
                );
            }
        }
        self.jobs.retain(|id, _| jobs.iter().any(|j| &j.id == id));
        finished
    }

    /// Where the job `id`'s output is kept.
    pub fn log_path(&self, id: &str) -> PathBuf {
        self.path.with_file_name("logs").join(format!("{id}.log"))
    }

    pub fn phase(&self, id: &str) -> Phase {
        self.jobs.get(id).map_or(Phase::Pending, |s| s.phase)
    }

    pub fn get_mut(&mut self, id: &str) -> &mut JobState {
        self.jobs.get_mut(id).expect("reconcile records every job")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locked_sweep_directory_is_refused_naming_its_holder() {
        let dir = std::env::temp_dir().join(format!("sweep-lock-{}", std::process::id()));
        let held = Lock::acquire(&dir).expect("first");
        let err = Lock::acquire(&dir).expect_err("second").to_string();
        assert!(
            err.contains(&dir.display().to_string()) && err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(held);
        Lock::acquire(&dir).expect("free again");
        std::fs::remove_dir_all(&dir).ok();
    }
}
