//! The local pool: each job's steps run as child processes of the
//! `stretch` binary, a bounded number of jobs at a time, each job's output
//! in the log the driver gives it.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::error::SweepError;
use crate::executor::{Executor, Status, Stopped, start_log};
use crate::expand::Job;

struct Running {
    job: Job,
    step: usize,
    child: Option<Child>,
    log: PathBuf,
    ended: Option<Status>,
}

/// Runs jobs as child processes of this one.
pub struct LocalPool {
    program: PathBuf,
    slots: usize,
    inherit: bool,
    running: HashMap<String, Running>,
}

impl LocalPool {
    /// A pool of `slots` jobs running `program` (the `stretch` binary).
    pub fn new(program: &Path, slots: usize) -> LocalPool {
        LocalPool {
            program: program.to_path_buf(),
            slots: slots.max(1),
            inherit: false,
            running: HashMap::new(),
        }
    }

    /// Jobs write to this process's stdout and stderr instead of their
    /// logs (a sweep run in front of its user); their failures then come
    /// without a log tail.
    pub fn inheriting_output(mut self) -> LocalPool {
        self.inherit = true;
        self
    }

    fn spawn(&self, r: &Running) -> Result<Child, SweepError> {
        let args = &r.job.steps[r.step];
        let mut command = self.command();
        if self.inherit {
            return command
                .args(args)
                .stdin(Stdio::null())
                .spawn()
                .map_err(|e| SweepError::Start {
                    job: r.job.id.clone(),
                    reason: format!("cannot run {}: {e}", self.program.display()),
                });
        }
        let io = |action, source| SweepError::Io {
            action,
            path: r.log.clone(),
            error: source,
        };
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&r.log)
            .map_err(|e| io("open", e))?;
        writeln!(log, "$ {} {}", self.program.display(), shell_words(args)).map_err(|e| io("write", e))?;
        let err = log.try_clone().map_err(|e| io("open", e))?;
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| SweepError::Start {
                job: r.job.id.clone(),
                reason: format!("cannot run {}: {e}", self.program.display()),
            })
    }

    /// The program, set to die with this process.
    fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe; the child dies with the
            // sweep instead of running on unobserved after it is killed.
            unsafe {
                command.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
        }
        command
    }
}

/// `args` as one line a shell would split back into them.
pub fn shell_words(args: &[String]) -> String {
    args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

/// `s` quoted for a POSIX shell when it needs to be.
pub fn quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

impl Executor for LocalPool {
    fn describe(&self) -> String {
        format!("a local pool of {} job(s) at a time", self.slots)
    }

    fn slots(&self) -> usize {
        self.slots
    }

    fn poll_interval(&self) -> Duration {
        Duration::from_millis(100)
    }

    fn follows_handles(&self) -> bool {
        false
    }

    fn submit(&mut self, job: &Job, attempt: u32, log: &Path) -> Result<String, SweepError> {
        if !self.inherit {
            start_log(log, attempt).map_err(|error| SweepError::Io {
                action: "write",
                path: log.to_path_buf(),
                error,
            })?;
        }
        let mut r = Running {
            job: job.clone(),
            step: 0,
            child: None,
            log: log.to_path_buf(),
            ended: None,
        };
        if job.steps.is_empty() {
            r.ended = Some(Status::Succeeded);
        } else {
            r.child = Some(self.spawn(&r)?);
        }
        let handle = format!("{}#{attempt}", job.id);
        self.running.insert(handle.clone(), r);
        Ok(handle)
    }

    fn status(&mut self, handle: &str) -> Result<Status, SweepError> {
        let Some(mut r) = self.running.remove(handle) else {
            return Ok(Status::Failed(format!("no job {handle} in this pool")));
        };
        if r.ended.is_none()
            && let Some(child) = &mut r.child
        {
            let waited = child.try_wait().map_err(|e| SweepError::Start {
                job: r.job.id.clone(),
                reason: format!("cannot wait for its process: {e}"),
            })?;
            if let Some(exit) = waited {
                if exit.success() {
                    r.step += 1;
                    if r.step == r.job.steps.len() {
                        r.ended = Some(Status::Succeeded);
                        r.child = None;
                    } else {
                        r.child = Some(self.spawn(&r)?);
                    }
                } else {
                    r.ended = Some(Status::Failed(format!(
                        "step {} of {} (`stretch {}`) {}",
                        r.step + 1,
                        r.job.steps.len(),
                        r.job.steps[r.step].first().map_or("", String::as_str),
                        match exit.code() {
                            Some(c) => format!("exited with status {c}"),
                            None => "was killed by a signal".to_string(),
                        }
                    )));
                    r.child = None;
                }
            }
        }
        let status = r.ended.clone().unwrap_or(Status::Running);
        self.running.insert(handle.to_string(), r);
        Ok(status)
    }

    fn stop(&mut self, handle: &str) -> Result<Stopped, SweepError> {
        if let Some(r) = self.running.get_mut(handle) {
            if let Some(child) = &mut r.child {
                let _ = child.kill();
                let _ = child.wait();
            }
            r.child = None;
            r.ended = Some(Status::Stopped);
        }
        Ok(Stopped::Now)
    }
}

impl Drop for LocalPool {
    fn drop(&mut self) {
        for r in self.running.values_mut() {
            if let Some(child) = &mut r.child {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
