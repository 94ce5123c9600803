//! Runs a sweep's jobs on an executor: skips what an earlier run finished,
//! keeps the executor's slots busy, starts a job only after the jobs it
//! needs, retries failures up to a limit, records every change in the
//! sweep directory, and stops what runs when asked to.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::SweepError;
use crate::executor::{Executor, Status, Stopped, tail};
use crate::expand::Job;
use crate::state::{Phase, State};

/// Jobs by phase, for a progress display.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub done: usize,
    /// Jobs their executor reports running.
    pub running: usize,
    /// Jobs submitted that their executor has not started (queued by the
    /// cluster for resources).
    pub queued: usize,
    /// Jobs not submitted yet.
    pub pending: usize,
    pub failed: usize,
}

/// What the driver tells its user.
pub trait Observer {
    fn counts(&mut self, counts: Counts);
    fn say(&mut self, line: String);
}

/// How a run ended.
#[derive(Debug)]
pub struct Outcome {
    /// Jobs an earlier run had finished (not run again).
    pub skipped: usize,
    /// Jobs this run finished.
    pub ran: usize,
    /// Jobs that failed after their retries, with why.
    pub failed: Vec<(String, String)>,
}

/// Lines of a failed job's log kept with its error.
const LOG_TAIL: usize = 15;
/// Polls in a row that may fail (a network blip) before the attempt does.
const POLL_ERRORS: u32 = 10;

/// Runs `jobs` on `exec`, each failed attempt retried up to `retries`
/// times. Returns when every job has succeeded or failed, or with
/// [`SweepError::Interrupted`] once `stop` is set (the jobs in flight are
/// stopped and recorded as such).
pub fn run(
    jobs: &[Job],
    state: &mut State,
    exec: &mut dyn Executor,
    retries: u32,
    obs: &mut dyn Observer,
    stop: &AtomicBool,
) -> Result<Outcome, SweepError> {
    let skipped = state.reconcile(jobs, exec.follows_handles());
    state.save()?;
    let in_flight: Vec<(usize, u32)> = jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| state.phase(&j.id) == Phase::Running)
        .map(|(i, _)| (i, 0))
        .collect();
    for &(i, _) in &in_flight {
        obs.say(format!("following {} from an earlier run", jobs[i].id));
    }
    let mut d = Driver {
        jobs,
        state,
        exec,
        retries,
        obs,
        in_flight,
        started: BTreeSet::new(),
        outcome: Outcome {
            skipped,
            ran: 0,
            failed: Vec::new(),
        },
    };
    loop {
        if stop.load(Ordering::SeqCst) {
            let stopped = d.stop_all();
            d.state.save()?;
            return Err(SweepError::Interrupted { stopped });
        }
        let mut changed = d.start()?;
        changed |= d.poll()?;
        if changed {
            d.state.save()?;
        }
        d.obs.counts(counts(d.jobs, d.state, &d.started));
        let waiting = d.jobs.iter().any(|j| d.state.phase(&j.id) == Phase::Pending);
        if d.in_flight.is_empty() && !waiting {
            return Ok(d.outcome);
        }
        std::thread::sleep(d.exec.poll_interval());
    }
}

/// A run in progress: the jobs, their recorded state, the executor, and
/// the jobs in flight (by index, with the status reads that failed in a
/// row), those their executor reported started, and the outcome so far.
struct Driver<'a> {
    jobs: &'a [Job],
    state: &'a mut State,
    exec: &'a mut dyn Executor,
    retries: u32,
    obs: &'a mut dyn Observer,
    in_flight: Vec<(usize, u32)>,
    started: BTreeSet<usize>,
    outcome: Outcome,
}

impl Driver<'_> {
    /// Stops every job in flight; returns how many are recorded stopped.
    fn stop_all(&mut self) -> usize {
        let mut stopped = 0;
        for &(i, _) in &self.in_flight {
            let s = self.state.get_mut(&self.jobs[i].id);
            match s.handle.clone().map(|h| self.exec.stop(&h)) {
                Some(Err(e)) => self.obs.say(format!(
                    "{}: cannot stop it ({e}); a rerun follows it where it still runs",
                    self.jobs[i].id
                )),
                Some(Ok(Stopped::Later(why))) => {
                    self.obs.say(format!("{}: {why}", self.jobs[i].id));
                    s.phase = Phase::Stopped;
                    stopped += 1;
                }
                _ => {
                    s.phase = Phase::Stopped;
                    stopped += 1;
                }
            }
        }
        stopped
    }

    /// Submits pending jobs whose prerequisites succeeded while slots are
    /// free; fails those whose prerequisites failed. Returns whether the
    /// state changed.
    fn start(&mut self) -> Result<bool, SweepError> {
        let mut changed = false;
        for (i, job) in self.jobs.iter().enumerate() {
            if self.state.phase(&job.id) != Phase::Pending {
                continue;
            }
            if let Some(dep) = job
                .after
                .iter()
                .find(|d| matches!(self.state.phase(d), Phase::Failed | Phase::Stopped))
            {
                let why = format!("not run: it needs {dep}, which failed");
                let s = self.state.get_mut(&job.id);
                s.phase = Phase::Failed;
                s.error = Some(why.clone());
                self.obs.say(format!("{}: {why}", job.id));
                self.outcome.failed.push((job.id.clone(), why));
                changed = true;
                continue;
            }
            if self.in_flight.len() >= self.exec.slots()
                || !job.after.iter().all(|d| self.state.phase(d) == Phase::Succeeded)
            {
                continue;
            }
            submit(job, self.state, self.exec)?;
            self.in_flight.push((i, 0));
            changed = true;
        }
        Ok(changed)
    }

    /// Reads the status of every job in flight and records those that
    /// ended. Returns whether the state changed.
    fn poll(&mut self) -> Result<bool, SweepError> {
        let mut changed = false;
        let mut still = Vec::with_capacity(self.in_flight.len());
        for (i, errors) in std::mem::take(&mut self.in_flight) {
            changed |= self.poll_one(i, errors, &mut still)?;
        }
        self.in_flight = still;
        Ok(changed)
    }

    /// Job `i`'s status after `errors` failed reads in a row: kept in
    /// `still` while it runs or is retried, else recorded. Returns whether
    /// the state changed.
    fn poll_one(&mut self, i: usize, errors: u32, still: &mut Vec<(usize, u32)>) -> Result<bool, SweepError> {
        let job = &self.jobs[i];
        let handle = self.state.jobs[&job.id].handle.clone().unwrap_or_default();
        let status = match self.exec.status(&handle) {
            Ok(s) => s,
            Err(e) if errors + 1 < POLL_ERRORS => {
                if errors == 0 {
                    self.obs
                        .say(format!("{}: cannot read its status ({e}); trying again", job.id));
                }
                still.push((i, errors + 1));
                return Ok(false);
            }
            Err(e) => Status::Failed(format!(
                "its status could not be read {POLL_ERRORS} times in a row: {e}"
            )),
        };
        if !matches!(status, Status::Pending | Status::Running) {
            let attempt = self.state.jobs[&job.id].attempts;
            self.exec.keep_log(&handle, &self.state.log_path(&job.id), attempt);
        }
        if status == Status::Running {
            self.started.insert(i);
        } else {
            self.started.remove(&i);
        }
        let why = match status {
            Status::Pending | Status::Running => {
                still.push((i, 0));
                return Ok(false);
            }
            Status::Succeeded => match job.outputs().into_iter().find(|p| !p.is_file()) {
                None => {
                    let s = self.state.get_mut(&job.id);
                    s.phase = Phase::Succeeded;
                    s.error = None;
                    self.outcome.ran += 1;
                    return Ok(true);
                }
                Some(missing) => format!(
                    "it ended without writing {} (is the sweep directory on a filesystem every node shares?)",
                    missing.display()
                ),
            },
            Status::Failed(why) => why,
            Status::Stopped => "it was stopped on the executor".to_string(),
        };
        self.failed(i, why, still)
    }

    /// A failed attempt of job `i`: retried while attempts remain (the job
    /// stays in flight, in `still`), else recorded as failed with its log's
    /// tail.
    fn failed(&mut self, i: usize, why: String, still: &mut Vec<(usize, u32)>) -> Result<bool, SweepError> {
        let job = &self.jobs[i];
        let attempts = self.state.jobs[&job.id].attempts;
        let log = std::fs::read_to_string(self.state.log_path(&job.id))
            .map(|text| tail(&text, LOG_TAIL))
            .unwrap_or_default();
        if attempts <= self.retries {
            self.obs.say(format!(
                "{}: attempt {attempts} of {} failed: {why}; retrying",
                job.id,
                self.retries + 1
            ));
            submit(job, self.state, self.exec)?;
            still.push((i, 0));
            return Ok(true);
        }
        let error = if log.trim().is_empty() {
            why.clone()
        } else {
            format!("{why}\n{log}")
        };
        self.obs
            .say(format!("{}: failed after {attempts} attempt(s): {why}", job.id));
        let s = self.state.get_mut(&job.id);
        s.phase = Phase::Failed;
        s.error = Some(error.clone());
        self.outcome.failed.push((job.id.clone(), error));
        Ok(true)
    }
}

fn submit(job: &Job, state: &mut State, exec: &mut dyn Executor) -> Result<(), SweepError> {
    let attempt = state.jobs[&job.id].attempts + 1;
    for dir in &job.dirs {
        std::fs::create_dir_all(dir).map_err(|error| SweepError::Io {
            action: "create",
            path: dir.clone(),
            error,
        })?;
    }
    let handle = exec.submit(job, attempt, &state.log_path(&job.id))?;
    let s = state.get_mut(&job.id);
    s.attempts = attempt;
    s.handle = Some(handle);
    s.phase = Phase::Running;
    Ok(())
}

/// Jobs by phase; a job in flight counts as running once its executor
/// reported it running (`started` holds their indices), else as queued.
fn counts(jobs: &[Job], state: &State, started: &BTreeSet<usize>) -> Counts {
    let mut c = Counts::default();
    for (i, j) in jobs.iter().enumerate() {
        match state.phase(&j.id) {
            Phase::Succeeded => c.done += 1,
            Phase::Running if started.contains(&i) => c.running += 1,
            Phase::Running => c.queued += 1,
            Phase::Pending => c.pending += 1,
            Phase::Failed | Phase::Stopped => c.failed += 1,
        }
    }
    c
}
