//! Jobs, the global queue and the workers' states: the part of the
//! scheduler that is the same under real workers and in the simulator.
//!
//! A driver (the runtime or the simulator) calls [`Scheduler::submit`] when
//! a request arrives, [`Scheduler::finish`] when a worker finishes a
//! subgraph and [`Scheduler::set_available`] when a processor goes away or
//! comes back; after each it calls [`Scheduler::schedule`], which asks the
//! policy for assignments (Band's `GetNextJob`) and returns the subgraphs
//! to start now. Times are ms on the driver's clock; the scheduler never
//! reads a clock itself except to time its own policy calls.

use crate::core::estimator::Estimator;
use crate::core::policy::Policy;
use crate::core::units::ModelUnits;
use std::collections::VecDeque;
use std::time::Instant;

use super::jobs::*;

/// The queue, the jobs, the workers' states, the estimator and the policy.
pub struct Scheduler {
    models: Vec<ModelUnits>,
    workers: Vec<WorkerState>,
    queue: VecDeque<Task>,
    jobs: JobMap<Job>,
    next_job: JobId,
    next_seq: u64,
    policy: Box<dyn Policy>,
    pub estimator: Estimator,
    /// Microseconds of each policy call that had work to decide on.
    pub decision_us: Vec<f64>,
    drop_late: bool,
    dropped: Vec<Dropped>,
}

/// A job dropped before it finished because it could no longer meet its SLO.
#[derive(Clone, Debug, PartialEq)]
pub struct Dropped {
    pub job: JobId,
    pub spec: JobSpec,
    pub at_ms: f64,
}

impl Dropped {
    /// The job as finished when dropped, for arrivals that wait on it
    /// (closed loops, frames); never counted as completed.
    pub fn as_finished(&self) -> Completed {
        Completed {
            job: self.job,
            spec: self.spec.clone(),
            finish_ms: self.at_ms,
        }
    }
}

impl Scheduler {
    pub fn new(
        models: Vec<ModelUnits>,
        workers: &[String],
        policy: Box<dyn Policy>,
        estimator: Estimator,
    ) -> Scheduler {
        Scheduler {
            models,
            workers: workers
                .iter()
                .map(|n| WorkerState {
                    name: n.clone(),
                    available: true,
                    running: None,
                    local: VecDeque::new(),
                    render: None,
                })
                .collect(),
            queue: VecDeque::new(),
            jobs: JobMap::default(),
            next_job: 0,
            next_seq: 0,
            policy,
            estimator,
            decision_us: Vec::new(),
            drop_late: false,
            dropped: Vec::new(),
        }
    }

    /// Lets the policy drop jobs that can no longer meet their SLO
    /// ([`crate::core::Policy::drops`]), as the workload's `drop_late` says.
    pub fn set_drop_late(&mut self, on: bool) {
        self.drop_late = on;
    }

    /// The jobs dropped since the last call.
    pub fn take_dropped(&mut self) -> Vec<Dropped> {
        std::mem::take(&mut self.dropped)
    }

    pub fn models(&self) -> &[ModelUnits] {
        &self.models
    }

    pub fn workers(&self) -> &[WorkerState] {
        &self.workers
    }

    /// Models the policy moved between processors: (ms, model, worker).
    pub fn policy_moves(&self) -> Vec<(f64, usize, usize)> {
        self.policy.moves().to_vec()
    }

    /// What the policy reports about its decisions ([`Policy::notes`]).
    pub fn policy_notes(&self) -> Vec<String> {
        self.policy.notes()
    }

    /// Gives the rendering task of `workload` (if any) to its processor,
    /// first frame due at 0. Returns the worker, `None` without a render
    /// task or when its processor is not one of the workers.
    pub fn set_render_from(&mut self, workload: &crate::core::workload::Workload) -> Option<usize> {
        let r = workload.render.as_ref()?;
        let w = self.workers.iter().position(|x| x.name == r.processor)?;
        self.set_render(w, 1e3 / r.fps, r.render_ms, 0.0);
        Some(w)
    }

    pub fn job(&self, id: JobId) -> Option<&Job> {
        self.jobs.get(&id)
    }

    /// Jobs submitted and not finished.
    pub fn in_system(&self) -> usize {
        self.jobs.len()
    }

    pub fn queue(&self) -> impl Iterator<Item = &Task> {
        self.queue.iter()
    }

    /// Gives `worker` a rendering task: a frame of `render_ms` every
    /// `period_ms`, the first due at `first_tick_ms`.
    pub fn set_render(&mut self, worker: usize, period_ms: f64, render_ms: f64, first_tick_ms: f64) {
        self.workers[worker].render = Some(RenderSlot {
            period_ms,
            render_ms,
            next_tick_ms: first_tick_ms,
            pending: None,
            running: None,
            fresh: false,
        });
    }

    /// Ends the rendering tasks: no frame is due any more (a frame due or
    /// running still runs).
    pub fn stop_render(&mut self) {
        for w in &mut self.workers {
            if let Some(slot) = w.render.as_mut() {
                slot.next_tick_ms = f64::INFINITY;
            }
        }
    }

    /// The earliest next frame tick of any worker.
    pub fn next_tick_ms(&self) -> Option<f64> {
        self.workers
            .iter()
            .filter_map(|w| w.render.as_ref().map(|r| r.next_tick_ms))
            .min_by(f64::total_cmp)
    }

    /// Makes every frame due at or before `now` pending; returns the ticks
    /// of frames dropped because a newer one became due before they started.
    pub fn render_ticks(&mut self, now: f64) -> Vec<f64> {
        let mut dropped = Vec::new();
        for w in &mut self.workers {
            let Some(slot) = w.render.as_mut() else { continue };
            while slot.next_tick_ms <= now {
                if let Some(old) = slot.pending.replace(slot.next_tick_ms) {
                    dropped.push(old);
                }
                slot.next_tick_ms += slot.period_ms;
            }
        }
        dropped
    }

    /// The frame of dispatch `seq` on `worker` finished at `now` after
    /// `measured_ms`; the worker's expected frame time follows it (EMA with
    /// the estimator's α). A stale `seq` is ignored.
    pub fn finish_render(&mut self, now: f64, worker: usize, seq: u64, measured_ms: f64) -> Option<Frame> {
        let alpha = self.estimator.params.alpha;
        let slot = self.workers.get_mut(worker)?.render.as_mut()?;
        let (s, tick, start) = slot.running?;
        if s != seq {
            return None;
        }
        slot.running = None;
        slot.fresh = true;
        slot.render_ms = (1.0 - alpha) * slot.render_ms + alpha * measured_ms;
        Some(Frame {
            worker,
            tick_ms: tick,
            start_ms: start,
            end_ms: now,
        })
    }

    /// Adds a job; its ready regions join the queue's tail.
    pub fn submit(&mut self, spec: JobSpec) -> JobId {
        let id = self.next_job;
        self.next_job += 1;
        let m = &self.models[spec.model];
        let job = Job::unstarted(id, spec, m);
        for r in 0..m.regions.len() {
            if job.region_ready(m, r) {
                self.queue.push_back(Task { job: id, region: r });
            }
        }
        self.jobs.insert(id, job);
        id
    }

    /// Asks the policy for assignments and returns the subgraphs to start
    /// now, on workers that are free.
    pub fn schedule(&mut self, now: f64) -> Result<Vec<Dispatch>, SchedError> {
        self.schedule_with(now, None)
    }

    /// [`Scheduler::schedule`] with the device's thermal state for the policy to see.
    pub fn schedule_with(
        &mut self,
        now: f64,
        thermal: Option<&dyn crate::core::hooks::ThermalOracle>,
    ) -> Result<Vec<Dispatch>, SchedError> {
        if self.drop_late && !self.queue.is_empty() {
            self.drop(now, thermal);
        }
        if !self.queue.is_empty() && self.workers.iter().any(|w| w.available) {
            let window = self.window();
            let view = View {
                now_ms: now,
                queue: &window,
                jobs: &self.jobs,
                models: &self.models,
                workers: &self.workers,
                estimator: &self.estimator,
                thermal,
            };
            let t = Instant::now();
            let assignments = self.policy.schedule(&view);
            self.decision_us.push(t.elapsed().as_secs_f64() * 1e6);
            for a in assignments {
                self.assign(a)?;
            }
        }
        let mut starts = Vec::new();
        for w in 0..self.workers.len() {
            let worker = &mut self.workers[w];
            if !worker.available || worker.running.is_some() {
                continue;
            }
            if let Some(slot) = worker.render.as_mut() {
                if slot.running.is_some() {
                    continue;
                }
                if let Some(tick) = slot.pending.take() {
                    let seq = self.next_seq;
                    self.next_seq += 1;
                    slot.running = Some((seq, tick, now));
                    starts.push(Dispatch {
                        seq,
                        worker: w,
                        render: Some(tick),
                        job: 0,
                        app: 0,
                        model: 0,
                        candidate: 0,
                        expected_ms: slot.render_ms,
                    });
                    continue;
                }
            }
            if let Some(mut r) = worker.local.pop_front() {
                if let Some(slot) = worker.render.as_mut() {
                    slot.fresh = false;
                }
                r.start_ms = Some(now);
                let job = &self.jobs[&r.task.job];
                starts.push(Dispatch {
                    seq: r.seq,
                    worker: w,
                    render: None,
                    job: r.task.job,
                    app: job.spec.app,
                    model: r.model,
                    candidate: r.candidate,
                    expected_ms: r.expected_ms,
                });
                worker.running = Some(r);
            }
        }
        Ok(starts)
    }

    /// The queue's first [`QUEUE_WINDOW`] tasks.
    fn window(&self) -> Vec<Task> {
        self.queue.iter().take(QUEUE_WINDOW).copied().collect()
    }

    /// Drops the queued jobs the policy names that have nothing running.
    fn drop(&mut self, now: f64, thermal: Option<&dyn crate::core::hooks::ThermalOracle>) {
        let window = self.window();
        let view = View {
            now_ms: now,
            queue: &window,
            jobs: &self.jobs,
            models: &self.models,
            workers: &self.workers,
            estimator: &self.estimator,
            thermal,
        };
        let ids = self.policy.drops(&view);
        let mut gone = std::collections::HashSet::new();
        let mut queued = 0;
        for id in ids {
            if self.jobs.get(&id).is_none_or(|j| j.running.iter().any(|r| *r)) {
                continue;
            }
            if let Some(job) = self.jobs.remove(&id) {
                let m = &self.models[job.spec.model];
                queued += (0..m.regions.len()).filter(|r| job.region_ready(m, *r)).count();
                gone.insert(id);
                self.dropped.push(Dropped {
                    job: id,
                    spec: job.spec,
                    at_ms: now,
                });
            }
        }
        if gone.is_empty() {
            return;
        }
        let head: Vec<Task> = self.queue.drain(..self.queue.len().min(QUEUE_WINDOW)).collect();
        let kept: Vec<Task> = head.iter().copied().filter(|t| !gone.contains(&t.job)).collect();
        let removed = head.len() - kept.len();
        for t in kept.into_iter().rev() {
            self.queue.push_front(t);
        }
        if removed < queued {
            self.queue.retain(|t| !gone.contains(&t.job));
        }
    }

    fn assign(&mut self, a: Assignment) -> Result<(), SchedError> {
        let bad = |what| SchedError::BadAssignment {
            policy: self.policy.name(),
            what,
            assignment: a,
        };
        let pos = self
            .queue
            .iter()
            .position(|t| *t == a.task)
            .ok_or_else(|| bad("task not queued"))?;
        let job = &self.jobs[&a.task.job];
        let m = &self.models[job.spec.model];
        let c = m.candidates.get(a.candidate).ok_or_else(|| bad("no such candidate"))?;
        if c.region != a.task.region || c.first != job.next_unit(m, a.task.region) {
            return Err(bad("candidate does not start at the job's next unit"));
        }
        if a.worker >= self.workers.len() || !c.support.contains(a.worker) || !self.workers[a.worker].available {
            return Err(bad("worker cannot run the candidate"));
        }
        let expected_ms = self.estimator.estimate(job.spec.model, a.candidate, a.worker);
        let model = job.spec.model;
        self.queue.remove(pos);
        if let Some(j) = self.jobs.get_mut(&a.task.job) {
            j.running[a.task.region] = true;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.workers[a.worker].local.push_back(Running {
            seq,
            task: a.task,
            model,
            candidate: a.candidate,
            start_ms: None,
            expected_ms: if expected_ms.is_finite() { expected_ms } else { 0.0 },
        });
        Ok(())
    }

    /// The worker finished dispatch `seq` after `measured_ms` in the engine
    /// (`None`: it failed and the subgraph goes back to the queue). Returns
    /// the job if it is now complete. A stale `seq` (the worker's processor
    /// went away meanwhile) is ignored.
    pub fn finish(&mut self, now: f64, worker: usize, seq: u64, measured_ms: Option<f64>) -> Option<Completed> {
        let w = &mut self.workers[worker];
        if w.running.as_ref().is_none_or(|r| r.seq != seq) {
            return None;
        }
        let r = w.running.take()?;
        let job = self.jobs.get_mut(&r.task.job)?;
        let m = &self.models[r.model];
        let queued: Vec<bool> = (0..m.regions.len()).map(|reg| job.region_ready(m, reg)).collect();
        job.running[r.task.region] = false;
        let requeue = self.policy.requeue();
        let push = |q: &mut VecDeque<Task>, t: Task| match requeue {
            Requeue::Head => q.push_front(t),
            Requeue::Tail => q.push_back(t),
        };
        let Some(ms) = measured_ms else {
            push(&mut self.queue, r.task);
            return None;
        };
        self.estimator.observe(r.model, r.candidate, worker, ms);
        self.policy
            .subgraph_done(now, r.task.job, r.model, r.candidate, worker, ms);
        let c = &m.candidates[r.candidate];
        job.done[r.task.region] += c.last - c.first + 1;
        if job.complete(m) {
            let job = self.jobs.remove(&r.task.job)?;
            let done = Completed {
                job: job.id,
                spec: job.spec,
                finish_ms: now,
            };
            self.policy.completed(&done, worker);
            return Some(done);
        }
        for reg in (0..m.regions.len()).rev() {
            let t = Task {
                job: job.id,
                region: reg,
            };
            if job.region_ready(m, reg) && !queued[reg] {
                push(&mut self.queue, t);
            }
        }
        None
    }

    /// Takes a processor away (its running and waiting subgraphs go back to
    /// the queue's head; a result it still delivers is ignored) or brings it back.
    pub fn set_available(&mut self, worker: usize, available: bool) {
        let w = &mut self.workers[worker];
        w.available = available;
        if available {
            return;
        }
        let mut back: Vec<Running> = w.running.take().into_iter().collect();
        back.extend(w.local.drain(..));
        for r in back.into_iter().rev() {
            if let Some(j) = self.jobs.get_mut(&r.task.job) {
                j.running[r.task.region] = false;
            }
            self.queue.push_front(r.task);
        }
    }
}
