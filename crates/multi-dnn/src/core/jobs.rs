//! What the scheduler and its policies see: jobs and their map, tasks,
//! the workers' states (with a render task's slot), the policy's
//! [`View`], its assignments and what the scheduler hands back.

use crate::ProcSet;
use crate::core::estimator::Estimator;
use crate::core::units::ModelUnits;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use thiserror::Error;

pub type JobId = u64;

/// The jobs by id. Ids are consecutive integers and policies look a job
/// up for every queued task at every decision, so the map hashes an id
/// with one multiplication ([`IdHasher`]) rather than SipHash; nothing
/// iterates it, so decisions do not depend on the hasher.
pub type JobMap<V> = HashMap<JobId, V, BuildHasherDefault<IdHasher>>;

/// Fibonacci hashing of integer keys: the key times 2⁶⁴/φ, whose high
/// bits (the map's control bytes) and low bits (its buckets) both vary
/// with consecutive keys.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A request: what to run, when it came, and its deadline.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// Index of the app (workload entry) that sent it.
    pub app: usize,
    /// Index of the model in the scheduler's models.
    pub model: usize,
    pub arrival_ms: f64,
    /// Service-level objective: the job should finish by `arrival + slo`.
    pub slo_ms: Option<f64>,
    /// The camera frame of a frame-driven workload.
    pub frame: Option<u64>,
    /// How much the app's input changed since its previous request (mean
    /// absolute luminance difference, percent of the range; Heimdall Eq. 4),
    /// 0 when the app declares no frame source.
    pub content: f64,
}

/// A request in the system and the units it has done.
#[derive(Clone, Debug)]
pub struct Job {
    pub id: JobId,
    pub spec: JobSpec,
    /// Units finished in each region.
    pub done: Vec<usize>,
    /// Regions with a subgraph running or waiting in a worker's queue.
    pub running: Vec<bool>,
}

impl Job {
    /// Job `id` of `spec`, of model `m`, with nothing run yet.
    pub fn unstarted(id: JobId, spec: JobSpec, m: &ModelUnits) -> Job {
        Job {
            id,
            done: vec![0; m.regions.len()],
            running: vec![false; m.regions.len()],
            spec,
        }
    }

    /// The first unit of region `r` not yet run.
    pub fn next_unit(&self, m: &ModelUnits, r: usize) -> usize {
        m.regions[r].units.start + self.done[r]
    }

    pub fn region_complete(&self, m: &ModelUnits, r: usize) -> bool {
        self.done[r] == m.regions[r].units.len()
    }

    /// Not complete, not running, and every region it reads is complete.
    pub fn region_ready(&self, m: &ModelUnits, r: usize) -> bool {
        !self.running[r]
            && !self.region_complete(m, r)
            && m.regions[r].preds.iter().all(|p| self.region_complete(m, *p))
    }

    pub fn complete(&self, m: &ModelUnits) -> bool {
        (0..m.regions.len()).all(|r| self.region_complete(m, r))
    }

    /// Absolute deadline, if the job has an SLO.
    pub fn deadline_ms(&self) -> Option<f64> {
        self.spec.slo_ms.map(|s| self.spec.arrival_ms + s)
    }
}

/// A ready region of a job: what sits in the global queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Task {
    pub job: JobId,
    pub region: usize,
}

/// A subgraph given to a worker.
#[derive(Clone, Debug, PartialEq)]
pub struct Running {
    pub seq: u64,
    pub task: Task,
    pub model: usize,
    pub candidate: usize,
    /// When it started; `None` while it waits in the worker's own queue.
    pub start_ms: Option<f64>,
    pub expected_ms: f64,
}

/// What a policy sees of a worker.
#[derive(Clone, Debug)]
pub struct WorkerState {
    pub name: String,
    /// False during an outage.
    pub available: bool,
    pub running: Option<Running>,
    /// Subgraphs assigned to this worker that wait for it (device-queue policies).
    pub local: VecDeque<Running>,
    /// The rendering task this worker runs first at every frame, if any.
    pub render: Option<RenderSlot>,
}

/// A periodic rendering task pinned to one worker (Heimdall §6.1): at every
/// tick (`period_ms` apart) a frame of `render_ms` must run before any DNN
/// work waiting there; a running subgraph is never preempted. A frame that
/// has not started when the next tick comes is dropped (the display shows
/// the newer one).
#[derive(Clone, Debug, PartialEq)]
pub struct RenderSlot {
    pub period_ms: f64,
    /// Expected time of one frame.
    pub render_ms: f64,
    /// When the next frame is due.
    pub next_tick_ms: f64,
    /// The tick of a frame that is due and has not started.
    pub pending: Option<f64>,
    /// The frame running now: (dispatch seq, tick, start).
    pub running: Option<(u64, f64, f64)>,
    /// A frame finished and no subgraph has started here since: the
    /// longest stretch until the next frame is now (Heimdall's scheduling
    /// event after each render).
    pub fresh: bool,
}

impl RenderSlot {
    /// No frame due or running.
    pub fn quiet(&self) -> bool {
        self.pending.is_none() && self.running.is_none()
    }

    /// Expected ms from `now` until a DNN could hold the worker, counting a
    /// due or running frame.
    pub fn blocked_ms(&self, now: f64) -> f64 {
        let running = self
            .running
            .map_or(0.0, |(_, _, start)| (start + self.render_ms - now).max(0.0));
        running + if self.pending.is_some() { self.render_ms } else { 0.0 }
    }

    /// Ms from `now` to the next tick.
    pub fn until_tick_ms(&self, now: f64) -> f64 {
        (self.next_tick_ms - now).max(0.0)
    }
}

/// A finished frame.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Frame {
    pub worker: usize,
    pub tick_ms: f64,
    pub start_ms: f64,
    pub end_ms: f64,
}

impl WorkerState {
    /// Available, running nothing, with nothing waiting and no frame due.
    pub fn idle(&self) -> bool {
        self.available
            && self.running.is_none()
            && self.local.is_empty()
            && self.render.as_ref().is_none_or(|r| r.quiet())
    }

    /// Expected ms from `now` until the worker could start new work
    /// (Band's published waiting time); infinite while unavailable.
    pub fn wait_ms(&self, now: f64) -> f64 {
        if !self.available {
            return f64::INFINITY;
        }
        let running = self
            .running
            .as_ref()
            .map_or(0.0, |r| (r.start_ms.unwrap_or(now) + r.expected_ms - now).max(0.0));
        running
            + self.local.iter().map(|r| r.expected_ms).sum::<f64>()
            + self.render.as_ref().map_or(0.0, |r| r.blocked_ms(now))
    }
}

/// The most queued tasks a policy sees at one decision: the queue's first
/// this many, head first. A policy's work per decision is therefore bounded
/// by this window whatever the backlog (every built-in policy is at most
/// quadratic in the tasks it sees), and so is the scheduler's own (it
/// finds and removes an assigned task within the window); a run of N
/// requests makes O(N) decisions. Tasks further back wait their turn: the
/// queue is then deep enough that every one of them is late behind the
/// window's work anyway.
pub const QUEUE_WINDOW: usize = 256;

/// Everything a policy may look at; no clock, no threads.
pub struct View<'a> {
    pub now_ms: f64,
    /// The global queue's first [`QUEUE_WINDOW`] tasks, head first.
    pub queue: &'a [Task],
    pub jobs: &'a JobMap<Job>,
    pub models: &'a [ModelUnits],
    pub workers: &'a [WorkerState],
    pub estimator: &'a Estimator,
    /// Predicted temperature rises, where the run models the device's heat.
    pub thermal: Option<&'a dyn crate::core::hooks::ThermalOracle>,
}

impl View<'_> {
    pub fn job(&self, id: JobId) -> &Job {
        &self.jobs[&id]
    }

    pub fn model_of(&self, task: Task) -> &ModelUnits {
        &self.models[self.jobs[&task.job].spec.model]
    }

    /// Expected ms of a candidate on a worker; infinite if the worker cannot run it now.
    pub fn estimate(&self, model: usize, candidate: usize, worker: usize) -> f64 {
        let c = &self.models[model].candidates[candidate];
        if !c.support.contains(worker) || !self.workers[worker].available {
            return f64::INFINITY;
        }
        self.estimator.estimate(model, candidate, worker)
    }

    /// Workers that are available.
    pub fn available(&self) -> ProcSet {
        ProcSet::from_iter((0..self.workers.len()).filter(|w| self.workers[*w].available))
    }

    /// Idle workers.
    pub fn idle(&self) -> Vec<usize> {
        (0..self.workers.len()).filter(|w| self.workers[*w].idle()).collect()
    }
}

/// A policy's decision: run `candidate` (which must start at the task's
/// next unit) of `task` on `worker`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub task: Task,
    pub candidate: usize,
    pub worker: usize,
}

/// Where the rest of a job goes back in the queue after a subgraph finishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requeue {
    Head,
    Tail,
}

/// A subgraph to start now.
#[derive(Clone, Debug, PartialEq)]
pub struct Dispatch {
    pub seq: u64,
    pub worker: usize,
    /// `Some(tick)`: a frame of the rendering task, not a subgraph (`job`,
    /// `app`, `model` and `candidate` are then 0).
    pub render: Option<f64>,
    pub job: JobId,
    pub app: usize,
    pub model: usize,
    pub candidate: usize,
    pub expected_ms: f64,
}

/// A finished job.
#[derive(Clone, Debug, PartialEq)]
pub struct Completed {
    pub job: JobId,
    pub spec: JobSpec,
    pub finish_ms: f64,
}

impl Completed {
    pub fn latency_ms(&self) -> f64 {
        self.finish_ms - self.spec.arrival_ms
    }

    /// Finished by its deadline (true without an SLO).
    pub fn met_slo(&self) -> bool {
        self.spec.slo_ms.is_none_or(|s| self.latency_ms() <= s)
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum SchedError {
    #[error("policy {policy} made an invalid assignment ({what}): {assignment:?}")]
    BadAssignment {
        policy: &'static str,
        what: &'static str,
        assignment: Assignment,
    },
    /// The extension that models the device's heat failed.
    #[error("thermal emulator: {0}")]
    Thermal(String),
}
