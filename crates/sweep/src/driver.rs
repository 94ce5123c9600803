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
    let mut in_flight: Vec<(usize, u32)> = jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| state.phase(&j.id) == Phase::Running)
        .map(|(i, _)| (i, 0))
        .collect();
    for &(i, _) in &in_flight {
        obs.say(format!("following {} from an earlier run", jobs[i].id));
    }
    let mut started = BTreeSet::new();
    let mut outcome = Outcome {
        skipped,
        ran: 0,
        failed: Vec::new(),
    };
    loop {
        if stop.load(Ordering::SeqCst) {
            let mut stopped = 0;
            for &(i, _) in &in_flight {
                let s = state.get_mut(&jobs[i].id);
                match s.handle.clone().map(|h| exec.stop(&h)) {
                    Some(Err(e)) => obs.say(format!(
                        "{}: cannot stop it ({e}); a rerun follows it where it still runs",
                        jobs[i].id
                    )),
                    Some(Ok(Stopped::Later(why))) => {
                        obs.say(format!("{}: {why}", jobs[i].id));
                        s.phase = Phase::Stopped;
                        stopped += 1;
                    }
                    _ => {
                        s.phase = Phase::Stopped;
                        stopped += 1;
                    }
                }
            }
            state.save()?;
            return Err(SweepError::Interrupted { stopped });
        }
        let mut changed = start(jobs, state, exec, &mut in_flight, obs, &mut outcome)?;
        let mut still = Vec::with_capacity(in_flight.len());
        for (i, errors) in std::mem::take(&mut in_flight) {
            let job = &jobs[i];
            let handle = state.jobs[&job.id].handle.clone().unwrap_or_default();
            let status = match exec.status(&handle) {
                Ok(s) => s,
                Err(e) if errors + 1 < POLL_ERRORS => {
                    if errors == 0 {
                        obs.say(format!("{}: cannot read its status ({e}); trying again", job.id));
                    }
                    still.push((i, errors + 1));
                    continue;
                }
                Err(e) => Status::Failed(format!(
                    "its status could not be read {POLL_ERRORS} times in a row: {e}"
                )),
            };
            if !matches!(status, Status::Pending | Status::Running) {
                let attempt = state.jobs[&job.id].attempts;
                exec.keep_log(&handle, &state.log_path(&job.id), attempt);
            }
            if status == Status::Running {
                started.insert(i);
            } else {
                started.remove(&i);
            }
            let why = match status {
                Status::Pending | Status::Running => {
                    still.push((i, 0));
                    continue;
                }
                Status::Succeeded => match job.outputs().into_iter().find(|p| !p.is_file()) {
                    None => {
                        let s = state.get_mut(&job.id);
                        s.phase = Phase::Succeeded;
                        s.error = None;
                        outcome.ran += 1;
                        changed = true;
                        continue;
                    }
                    Some(missing) => format!(
                        "it ended without writing {} (is the sweep directory on a filesystem every node shares?)",
                        missing.display()
                    ),
                },
                Status::Failed(why) => why,
                Status::Stopped => "it was stopped on the executor".to_string(),
            };
            let retry = Retry {
                retries,
                outcome: &mut outcome,
                in_flight: &mut still,
                index: i,
            };
            changed |= failed(job, why, state, exec, obs, retry)?;
        }
        in_flight = still;
        if changed {
            state.save()?;
        }
        obs.counts(counts(jobs, state, &started));
        let waiting = jobs.iter().any(|j| state.phase(&j.id) == Phase::Pending);
        if in_flight.is_empty() && !waiting {
            return Ok(outcome);
        }
        std::thread::sleep(exec.poll_interval());
    }
}

/// Submits pending jobs whose prerequisites succeeded while slots are
/// free; fails those whose prerequisites failed. Returns whether the
/// state changed.
fn start(
    jobs: &[Job],
    state: &mut State,
    exec: &mut dyn Executor,
    in_flight: &mut Vec<(usize, u32)>,
    obs: &mut dyn Observer,
    outcome: &mut Outcome,
) -> Result<bool, SweepError> {
    let mut changed = false;
    for (i, job) in jobs.iter().enumerate() {
        if state.phase(&job.id) != Phase::Pending {
            continue;
        }
        if let Some(dep) = job
            .after
            .iter()
            .find(|d| matches!(state.phase(d), Phase::Failed | Phase::Stopped))
        {
            let why = format!("not run: it needs {dep}, which failed");
            let s = state.get_mut(&job.id);
            s.phase = Phase::Failed;
            s.error = Some(why.clone());
            obs.say(format!("{}: {why}", job.id));
            outcome.failed.push((job.id.clone(), why));
            changed = true;
            continue;
        }
        if in_flight.len() >= exec.slots() || !job.after.iter().all(|d| state.phase(d) == Phase::Succeeded) {
            continue;
        }
        submit(job, state, exec)?;
        in_flight.push((i, 0));
        changed = true;
    }
    Ok(changed)
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

/// Where a failed attempt's job goes: back in flight (`in_flight`, at
/// `index`) while retries remain, else into `outcome`.
struct Retry<'a> {
    retries: u32,
    outcome: &'a mut Outcome,
    in_flight: &'a mut Vec<(usize, u32)>,
    index: usize,
}

/// A failed attempt: retried while attempts remain (the job stays in
/// flight), else recorded as failed with its log's tail.
fn failed(
    job: &Job,
    why: String,
    state: &mut State,
    exec: &mut dyn Executor,
    obs: &mut dyn Observer,
    r: Retry,
) -> Result<bool, SweepError> {
    let attempts = state.jobs[&job.id].attempts;
    let log = std::fs::read_to_string(state.log_path(&job.id))
        .map(|text| tail(&text, LOG_TAIL))
        .unwrap_or_default();
    if attempts <= r.retries {
        obs.say(format!(
            "{}: attempt {attempts} of {} failed: {why}; retrying",
            job.id,
            r.retries + 1
        ));
        submit(job, state, exec)?;
        r.in_flight.push((r.index, 0));
        return Ok(true);
    }
    let error = if log.trim().is_empty() {
        why.clone()
    } else {
        format!("{why}\n{log}")
    };
    obs.say(format!("{}: failed after {attempts} attempt(s): {why}", job.id));
    let s = state.get_mut(&job.id);
    s.phase = Phase::Failed;
    s.error = Some(error.clone());
    r.outcome.failed.push((job.id.clone(), error));
    Ok(true)
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
