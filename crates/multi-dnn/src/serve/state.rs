//! One serving run's state, shared by the two ways of driving it: a
//! scheduling thread that hands subgraphs to the worker threads
//! ([`crate::serve::Server::run`]'s central loop), or the worker threads taking
//! turns at scheduling themselves ([`crate::serve::spread`]).

use crate::core::arrivals::Arrivals;
use crate::core::report::{RunLog, Span};
use crate::core::workload::Workload;
use crate::core::{JobId, Scheduler};
use crate::serve::Server;
use crate::serve::host::HostLog;
use crate::splash::cloud::RemoteEngine;
use crate::splash::cloud::report::CloudLog;
use crate::splash::thermal::driver::Change;
use engine::{Compiled, Value};
use graph_ir::Outlet;
use scheduler_rt::error::RuntimeError;
use scheduler_rt::worker::Done;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tract_onnx::prelude::TVec;

/// Work for one worker: run `compiled` on `inputs`; its result comes back
/// as a [`Done`] with `index == seq`.
pub(super) struct Work {
    pub worker: usize,
    pub seq: u64,
    pub compiled: Arc<dyn Compiled>,
    pub inputs: TVec<Value>,
}

/// Arrivals, outages, the scheduler, values in flight and the log of one run.
pub(super) struct RunState<'a> {
    server: &'a Server,
    pub sched: &'a mut Scheduler,
    arrivals: Arrivals,
    /// (ms, worker, back up) in time order.
    outages: std::collections::VecDeque<(f64, usize, bool)>,
    pub log: RunLog,
    values: HashMap<JobId, HashMap<Outlet, Value>>,
    /// seq -> (job, app, model, candidate, handed over at).
    flight: HashMap<u64, (JobId, usize, usize, usize, Instant)>,
    /// seq -> worker, for frames of the rendering task.
    rendering: HashMap<u64, usize>,
    t0: Instant,
    pool_at_start: engine::pool::PoolCounters,
    steal: Option<engine::host::Meter>,
    last_progress: f64,
    /// The emulated device's heat, in a thermal run.
    heat: Option<crate::serve::heat::Heat<'a>>,
    /// Failed cloud workers being probed, and whether each answers again.
    probes: Vec<(usize, Arc<AtomicBool>)>,
    probing: ProbeStop,
    /// With self-scheduling workers: per worker, the ms it last became
    /// idle (0 until its first result).
    idle_since: Option<Vec<f64>>,
}

/// How often a failed cloud worker is probed.
const PROBE_PERIOD: Duration = Duration::from_millis(500);

/// Stops the probing threads when the run ends.
#[derive(Default)]
struct ProbeStop(Arc<AtomicBool>);

impl Drop for ProbeStop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl<'a> RunState<'a> {
    pub fn new(
        server: &'a Server,
        sched: &'a mut Scheduler,
        workload: &Workload,
        slo_ms: Vec<Option<f64>>,
        priority_error: Option<String>,
        thermal: Option<&'a mut crate::splash::thermal::driver::ThermalDriver>,
    ) -> RunState<'a> {
        let mut outages: Vec<(f64, usize, bool)> = Vec::new();
        for o in &workload.outages {
            if let Some(w) = server.names.iter().position(|n| *n == o.processor) {
                outages.push((o.at_s * 1e3, w, false));
                outages.push(((o.at_s + o.for_s) * 1e3, w, true));
            }
        }
        outages.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in &server.workers {
            if let Some(r) = RemoteEngine::of(w.engine.as_ref())
                && let Ok(mut m) = r.latency_model().lock()
            {
                *m = crate::splash::cloud::CloudLatencyModel::default();
            }
        }
        RunState {
            server,
            sched,
            arrivals: Arrivals::new(workload, slo_ms),
            outages: outages.into(),
            log: RunLog {
                submitted: vec![0; workload.apps.len()],
                priority_error,
                ..RunLog::default()
            },
            values: HashMap::new(),
            flight: HashMap::new(),
            rendering: HashMap::new(),
            t0: Instant::now(),
            pool_at_start: engine::pool::pool().counters(),
            steal: engine::host::Meter::start(),
            last_progress: 0.0,
            heat: thermal.map(crate::serve::heat::Heat::new),
            probes: Vec::new(),
            probing: ProbeStop::default(),
            idle_since: None,
        }
    }

    /// Marks the run as driven by self-scheduling workers ([`crate::serve::spread`]):
    /// a request that arrives while every worker is busy is taken in when
    /// the first of them finishes, and its arrival lag counts only from
    /// then, since no worker could have started it earlier (a scheduling
    /// thread's lag is its own lateness waking, counted from the arrival).
    pub fn self_scheduled(&mut self) {
        self.idle_since = Some(vec![0.0; self.server.names.len()]);
    }

    /// Milliseconds since the run began.
    pub fn now(&self) -> f64 {
        self.ms(Instant::now())
    }

    fn ms(&self, t: Instant) -> f64 {
        (t - self.t0).as_secs_f64() * 1e3
    }

    fn next_tick(&self) -> Option<f64> {
        self.sched
            .next_tick_ms()
            .filter(|t| self.arrivals.ticking_at(*t, self.sched.in_system()))
    }

    /// Applies what is due at `now` (outages, frame ticks, arrivals), asks
    /// the policy, and returns the work to hand to the workers.
    pub fn advance(&mut self, now: f64) -> Result<Vec<Work>, RuntimeError> {
        self.step_heat(now)?;
        let released = self.heat.as_mut().map(|h| h.release(now)).unwrap_or_default();
        for done in released {
            self.take(done, true)?;
        }
        let back: Vec<usize> = self
            .probes
            .iter()
            .filter(|(_, up)| up.load(Ordering::Relaxed))
            .map(|(w, _)| *w)
            .collect();
        self.probes.retain(|(_, up)| !up.load(Ordering::Relaxed));
        for w in back {
            self.set_up(w, true, now);
        }
        while self.outages.front().is_some_and(|o| o.0 <= now) {
            let Some((_, w, up)) = self.outages.pop_front() else {
                break;
            };
            self.set_up(w, up, now);
        }
        let next_tick = self.next_tick();
        if next_tick.is_some_and(|t| t <= now) {
            let dropped = self.sched.render_ticks(now);
            self.log.dropped_frames.extend(dropped);
        } else if next_tick.is_none() {
            self.sched.stop_render();
        }
        let ready = self.idle_since.as_ref().map(|since| {
            self.sched
                .workers()
                .iter()
                .zip(since)
                .filter(|(w, _)| w.available && w.running.is_none())
                .map(|(_, t)| *t)
                .fold(f64::INFINITY, f64::min)
        });
        for spec in self.arrivals.due(now) {
            self.log.submitted[spec.app] += 1;
            let from = ready.map_or(spec.arrival_ms, |t| spec.arrival_ms.max(t));
            self.log.arrival_lag_ms.push((now - from).max(0.0));
            let m = spec.model;
            let id = self.sched.submit(spec);
            self.values
                .insert(id, self.server.models[m].input.iter().cloned().collect());
        }
        let mut work = Vec::new();
        let dispatches = {
            let oracle = self.heat.as_ref().map(|h| h.driver.oracle());
            self.sched
                .schedule_with(
                    now,
                    oracle.as_ref().map(|o| o as &dyn crate::splash::thermal::ThermalOracle),
                )
                .map_err(|e| RuntimeError::Policy { reason: e.to_string() })?
        };
        for d in self.sched.take_dropped() {
            self.values.remove(&d.job);
            self.arrivals.completed(&d.as_finished(), now);
            self.log.dropped.push(d);
        }
        for d in dispatches {
            if d.render.is_some() {
                if let Some((_, kernel, _)) = &self.server.render {
                    self.rendering.insert(d.seq, d.worker);
                    work.push(Work {
                        worker: d.worker,
                        seq: d.seq,
                        compiled: kernel.clone(),
                        inputs: TVec::new(),
                    });
                }
                continue;
            }
            let model = &self.server.models[d.model];
            let sub = &model.units.candidates[d.candidate].subgraph;
            let compiled = model.compiled[d.candidate][d.worker]
                .clone()
                .ok_or_else(|| RuntimeError::Run {
                    subgraph: sub.name.clone(),
                    processor: self.server.names[d.worker].clone(),
                    reason: "not compiled for this processor".into(),
                })?;
            let vals = &self.values[&d.job];
            let inputs: TVec<Value> = sub.inputs.iter().map(|o| vals[o].clone()).collect();
            if let Some(h) = self.heat.as_mut() {
                h.driver.started(d.worker);
            }
            self.flight
                .insert(d.seq, (d.job, d.app, d.model, d.candidate, Instant::now()));
            work.push(Work {
                worker: d.worker,
                seq: d.seq,
                compiled,
                inputs,
            });
        }
        Ok(work)
    }

    /// Takes processor `w` away at `at` (its running subgraph, abandoned,
    /// goes back to the queue; a result it still delivers is ignored) or
    /// brings it back: a scheduled outage, a processor switched off by its
    /// heat, a cloud worker that failed.
    fn set_up(&mut self, w: usize, up: bool, at: f64) {
        if !up {
            if let Some(r) = &self.sched.workers()[w].running
                && let Some((job, app, _, c, _)) = self.flight.remove(&r.seq)
            {
                self.log.spans.push(Span {
                    worker: w,
                    app,
                    job,
                    candidate: c,
                    start_ms: r.start_ms.unwrap_or(at),
                    end_ms: at,
                    counted: false,
                });
                if let Some(h) = self.heat.as_mut() {
                    h.driver.abandoned(w);
                }
            }
            if let Some(h) = self.heat.as_mut() {
                h.drop_held(w);
            }
        }
        self.sched.set_available(w, up);
        self.log.outage(w, up, at);
    }

    /// Probes failed cloud worker `w` on a thread of its own until it
    /// answers (it is then brought back at the next [`RunState::advance`])
    /// or the run ends: every [`PROBE_PERIOD`] after its first failure,
    /// twice as long after each further one (at most 64 times), so that a
    /// server that accepts connections but never answers costs less and
    /// less.
    fn probe(&mut self, w: usize) {
        let Some(prober) = RemoteEngine::of(self.server.workers[w].engine.as_ref()).map(RemoteEngine::prober) else {
            return;
        };
        let failures = self
            .log
            .section::<CloudLog>()
            .map_or(0, |c| c.worker_failures.iter().filter(|f| f.1 == w).count())
            .max(1);
        let period = PROBE_PERIOD * (1u32 << (failures - 1).min(6));
        let up = Arc::new(AtomicBool::new(false));
        let (flag, stop) = (up.clone(), self.probing.0.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(period);
                if prober().is_ok() {
                    flag.store(true, Ordering::Relaxed);
                    return;
                }
            }
        });
        self.probes.push((w, up));
    }

    /// Steps the emulator to `now` with the workers' busy states, applying
    /// each processor's switching off or on where it happens.
    fn step_heat(&mut self, now: f64) -> Result<(), RuntimeError> {
        loop {
            let busy: Vec<bool> = self.sched.workers().iter().map(|w| w.running.is_some()).collect();
            let Some(h) = self.heat.as_mut() else { return Ok(()) };
            let (stop, changes) = h
                .driver
                .advance_until(now, &busy)
                .map_err(|e| RuntimeError::Policy { reason: e.to_string() })?;
            for c in changes {
                if let Change::Off { worker, off } = c {
                    self.set_up(worker, !off, stop);
                }
            }
            if stop >= now - 1e-9 {
                return Ok(());
            }
        }
    }

    /// True about once a second: time to call the progress callback.
    pub fn progress_due(&mut self, now: f64) -> bool {
        if now - self.last_progress >= 1000.0 {
            self.last_progress = now;
            return true;
        }
        false
    }

    /// Nothing left to arrive, run, render or switch.
    pub fn finished(&self) -> bool {
        self.arrivals.next_ms().is_none()
            && self.flight.is_empty()
            && self.rendering.is_empty()
            && self.sched.in_system() == 0
            && self.outages.is_empty()
            && self.heat.as_ref().is_none_or(|h| !h.holding())
    }

    /// When something is next due without a result arriving (an arrival,
    /// an outage, a frame tick), at most a second after `now`.
    pub fn wake_ms(&self, now: f64) -> f64 {
        [
            self.arrivals.next_ms(),
            self.outages.front().map(|o| o.0),
            self.next_tick(),
            self.heat.as_ref().and_then(|h| h.next_due()),
            self.heat.as_ref().map(|_| now + crate::serve::heat::STEP_MS),
        ]
        .into_iter()
        .flatten()
        .fold(now + 1000.0, f64::min)
    }

    /// Takes a worker's result: a frame, or a subgraph whose outputs join
    /// its job's values (a finished job is checked against the reference).
    pub fn on_done(&mut self, done: Done) -> Result<(), RuntimeError> {
        let seq = done.index as u64;
        let end = self.ms(done.end);
        if let Some(since) = self.idle_since.as_mut()
            && let Some(t) = since.get_mut(done.worker)
        {
            *t = end;
        }
        // Up to now the worker was busy: step the emulator before the
        // result changes that.
        self.step_heat(self.now())?;
        if let Some(w) = self.rendering.remove(&seq) {
            let ms = (done.end - done.start).as_secs_f64() * 1e3;
            let now = self.now();
            if let Some(mut f) = self.sched.finish_render(now, w, seq, ms) {
                f.start_ms = self.ms(done.start);
                f.end_ms = self.ms(done.end);
                self.log.frames.push(f);
            }
            return Ok(());
        }
        let now = self.now();
        if let Some(h) = self.heat.as_mut()
            && self.flight.contains_key(&seq)
        {
            let ms = (done.end - done.start).as_secs_f64() * 1e3;
            match h.hold(done, now, ms) {
                Some(d) => return self.take(d, false),
                None => return Ok(()),
            }
        }
        self.take(done, false)
    }

    /// Takes a subgraph's result (after its hold, on a slowed worker: the
    /// worker counts as busy until now).
    fn take(&mut self, done: Done, held: bool) -> Result<(), RuntimeError> {
        let seq = done.index as u64;
        let Some((job, app, m, c, sent)) = self.flight.remove(&seq) else {
            return Ok(());
        };
        let current = self.sched.workers()[done.worker]
            .running
            .as_ref()
            .is_some_and(|r| r.seq == seq);
        if !current {
            return Ok(());
        }
        let start = self.ms(done.start);
        let end = if held { self.now() } else { self.ms(done.end) };
        self.log.spans.push(Span {
            worker: done.worker,
            app,
            job,
            candidate: c,
            start_ms: start,
            end_ms: end,
            counted: true,
        });
        let finish_at = self.now();
        self.log
            .dispatch_overhead_ms
            .push(start - self.ms(sent) + finish_at - end);
        let sub = &self.server.models[m].units.candidates[c].subgraph;
        let outputs = match done.result {
            Some(Ok(outs)) => outs,
            Some(Err(reason)) if self.server.workers[done.worker].engine.name() == "cloud" => {
                if let Some(h) = self.heat.as_mut() {
                    h.driver.abandoned(done.worker);
                }
                self.sched.finish(finish_at, done.worker, seq, None);
                if let Some(s) = self.log.spans.last_mut() {
                    s.counted = false;
                }
                self.set_up(done.worker, false, finish_at);
                self.log
                    .section_mut::<CloudLog>()
                    .worker_failures
                    .push((finish_at, done.worker, reason));
                self.probe(done.worker);
                return Ok(());
            }
            Some(Err(reason)) => {
                return Err(RuntimeError::Run {
                    subgraph: sub.name.clone(),
                    processor: self.server.names[done.worker].clone(),
                    reason,
                });
            }
            None => {
                if let Some(h) = self.heat.as_mut() {
                    h.driver.abandoned(done.worker);
                }
                self.sched.finish(finish_at, done.worker, seq, None);
                return Ok(());
            }
        };
        if let Some(h) = self.heat.as_mut() {
            let cand = &self.server.models[m].units.candidates[c];
            h.driver
                .finished(done.worker, (m, c), (cand.in_bytes, cand.out_bytes), end - start);
        }
        let cloud_estimate = RemoteEngine::of(self.server.workers[done.worker].engine.as_ref()).and_then(|r| {
            r.latency_model()
                .lock()
                .ok()
                .and_then(|l| l.last().and_then(|(_, p)| p))
        });
        if let Some(vals) = self.values.get_mut(&job) {
            for (o, v) in sub.outputs.iter().zip(outputs) {
                vals.insert(*o, v);
            }
        }
        let completed = self.sched.finish(finish_at, done.worker, seq, Some(end - start));
        if let Some(ms) = cloud_estimate {
            self.sched.estimator.set(m, c, done.worker, ms);
        }
        if let Some(completed) = completed {
            if let Some(vals) = self.values.remove(&job) {
                self.server.check(m, &vals, &mut self.log);
                let pool = engine::pool::pool();
                for v in vals.into_values() {
                    pool.give_value(v);
                }
            }
            self.arrivals.completed(&completed, finish_at);
            self.log.end_ms = self.log.end_ms.max(finish_at);
            self.log.completed.push(completed);
        }
        Ok(())
    }

    /// The log, with what only the end of the run knows.
    pub fn into_log(mut self) -> RunLog {
        self.log.frames_done = self.arrivals.frames_done;
        self.log.decision_us = std::mem::take(&mut self.sched.decision_us);
        self.log.moves = self.sched.policy_moves();
        let pool = engine::pool::pool();
        let host = self.log.section_mut::<HostLog>();
        host.pool = Some((pool.enabled(), pool.counters().since(&self.pool_at_start)));
        host.steal = self.steal.as_ref().and_then(|m| m.read());
        for (w, wk) in self.server.workers.iter().enumerate() {
            if let Some(r) = RemoteEngine::of(wk.engine.as_ref())
                && let Ok(m) = r.latency_model().lock()
            {
                self.log.section_mut::<CloudLog>().links.push((w, m.fit(), m.errors()));
            }
        }
        self.log
    }

    /// The name of worker `w`.
    pub fn processor(&self, w: usize) -> &str {
        &self.server.names[w]
    }

    /// Jobs still in the system.
    pub fn in_system(&self) -> usize {
        self.sched.in_system()
    }
}
