//! Multi-DNN serving on real workers: the [`Scheduler`] and policy of the
//! simulator, driven by the wall clock and by engine threads pinned to
//! their cores. Every candidate is compiled once per processor that can
//! run it; every finished request's outputs can be compared with a
//! whole-model reference.

use super::arrivals::Arrivals;
use super::core::{JobId, Scheduler};
use super::estimator::Estimator;
use super::report::{RunLog, Span, quantile};
use super::support::OpSupport;
use super::units::{ModelUnits, analyze};
use super::workload::Workload;
use crate::config::{EngineKind, ProcessorConfig, WorkerKind};
use crate::engine::{Compiled, EngineFactory, Value};
use crate::error::RuntimeError;
use crate::extract::extract_onnx;
use crate::priority;
use crate::queue::Input;
use crate::worker::{self, Done, Worker};
use graph_ir::{Graph, Outlet};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

mod setup;
use tract_onnx::prelude::{IntoTValue, TVec, Tensor};

/// Timed runs per (model, worker) at registration.
pub const REGISTRATION_RUNS: usize = 5;

/// A model ready to serve: its units, its compiled candidates, one input.
pub struct ServedModel {
    pub graph: Graph,
    pub units: ModelUnits,
    /// `compiled[candidate][worker]`, `None` where the worker cannot run it.
    compiled: Vec<Vec<Option<Arc<dyn Compiled>>>>,
    input: Vec<(Outlet, Value)>,
    /// Whole-model outputs for `input` and the engine that computed them.
    reference: Option<(Vec<Value>, &'static str)>,
}

/// Workers and models, loaded once; [`Server::run`] may be called many times.
pub struct Server {
    workers: Vec<Worker>,
    pub names: Vec<String>,
    pub models: Vec<ServedModel>,
    /// Why the worker threads run at normal priority, where raising failed.
    priority_error: Option<String>,
    /// The rendering task's worker, kernel and calibrated frame time (ms).
    render: Option<(usize, Arc<dyn Compiled>, f64)>,
    /// The cores each worker is pinned to, if any.
    cores: Vec<Option<predictor::profiler::CoreSet>>,
}

fn random_tensor(shape: &[usize], seed: u64) -> Result<Value, RuntimeError> {
    let n = shape.iter().product();
    let t = Tensor::from_shape(shape, &crate::npy::random_values(seed, n)).map_err(|e| RuntimeError::Run {
        subgraph: "(input)".into(),
        processor: "-".into(),
        reason: e.to_string(),
    })?;
    Ok(t.into_tvalue())
}

impl Server {
    /// Starts one worker thread per processor (inline processors get a
    /// thread too: the scheduler has its own) at raised priority where
    /// permitted ([`priority::SCHEDULER_NICE`]), so that other work on the
    /// machine does not delay them more than it delays one another; cuts
    /// every model into units for `support`, and compiles each candidate on
    /// each worker that can run it. `progress` hears what is being compiled.
    pub fn load(
        processors: &[ProcessorConfig],
        support: &[OpSupport],
        graphs: Vec<Graph>,
        factory: Arc<EngineFactory>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Server, RuntimeError> {
        let mut server = Server::start(processors, &factory)?;
        for graph in graphs {
            let units = analyze(&graph, &server.names, support).map_err(|e| RuntimeError::Units {
                model: graph.name.clone(),
                reason: e.to_string(),
            })?;
            server.add_model(graph, units, progress)?;
        }
        Ok(server)
    }

    /// Starts one worker thread per processor as [`Server::load`] does, with no model yet.
    pub fn start(processors: &[ProcessorConfig], factory: &Arc<EngineFactory>) -> Result<Server, RuntimeError> {
        let names: Vec<String> = processors.iter().map(|p| p.name.clone()).collect();
        let raised = priority::raise_current_thread(priority::SCHEDULER_NICE);
        let mut workers = Vec::new();
        for p in processors {
            let mut p = p.clone();
            p.kind = WorkerKind::Pool;
            workers.push(worker::start(&p, factory)?);
        }
        Ok(Server {
            workers,
            names,
            models: Vec::new(),
            priority_error: raised.err(),
            render: None,
            cores: processors.iter().map(|p| p.cores.clone()).collect(),
        })
    }

    /// Adds a model cut into `units`: compiles each candidate on each worker
    /// that can run it. `progress` hears what is being compiled.
    pub fn add_model(
        &mut self,
        graph: Graph,
        units: ModelUnits,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(), RuntimeError> {
        let m = self.models.len();
        let mut compiled = Vec::new();
        for (ci, c) in units.candidates.iter().enumerate() {
            progress(&format!(
                "model {} ({m}): compiling candidate {}/{}",
                graph.name,
                ci + 1,
                units.candidates.len()
            ));
            let bytes = extract_onnx(&graph, &c.subgraph)?;
            let mut per = Vec::new();
            for (w, wk) in self.workers.iter().enumerate() {
                if !c.support.contains(w) {
                    per.push(None);
                    continue;
                }
                let comp = wk.engine.compile(&bytes).map_err(|reason| RuntimeError::Compile {
                    engine: wk.engine.name(),
                    subgraph: format!("{}:{}", graph.name, c.subgraph.name),
                    processor: self.names[w].clone(),
                    reason,
                })?;
                per.push(Some(Arc::from(comp)));
            }
            compiled.push(per);
        }
        let mut input = Vec::new();
        for (k, id) in graph.inputs().iter().enumerate() {
            let shape = graph.fact(id.out(0)).map(|f| f.shape.clone()).unwrap_or_default();
            input.push((id.out(0), random_tensor(&shape, 1000 + m as u64 * 7 + k as u64)?));
        }
        self.models.push(ServedModel {
            graph,
            units,
            compiled,
            input,
            reference: None,
        });
        Ok(())
    }

    /// Runs `compiled` once on worker `w` and waits: outputs and engine ms.
    fn run_compiled(
        &self,
        w: usize,
        compiled: &Arc<dyn Compiled>,
        name: &str,
        inputs: TVec<Value>,
    ) -> Result<(TVec<Value>, f64), RuntimeError> {
        let (tx, rx) = channel();
        self.send_compiled(w, compiled.clone(), 0, inputs, &tx)?;
        let done = rx.recv().map_err(|_| RuntimeError::WorkerGone {
            processor: self.names[w].clone(),
        })?;
        let ms = (done.end - done.start).as_secs_f64() * 1e3;
        match done.result {
            Some(Ok(out)) => Ok((out, ms)),
            Some(Err(reason)) => Err(RuntimeError::Run {
                subgraph: name.to_string(),
                processor: self.names[w].clone(),
                reason,
            }),
            None => Err(RuntimeError::WorkerGone {
                processor: self.names[w].clone(),
            }),
        }
    }

    /// Computes each model's whole-model output for its input with
    /// onnxruntime (tract when this build has no onnxruntime): the
    /// reference every served output is compared with.
    pub fn compute_references(&mut self, factory: &Arc<EngineFactory>) -> Result<&'static str, RuntimeError> {
        let mut cfg = ProcessorConfig::new("reference", WorkerKind::Inline);
        cfg.engine = if EngineKind::available().contains(&EngineKind::Ort) {
            EngineKind::Ort
        } else {
            EngineKind::Tract
        };
        let engine = factory(&cfg)?;
        for m in &mut self.models {
            let bytes = graph_ir::onnx::export_bytes(&m.graph).map_err(|e| RuntimeError::Export {
                subgraph: m.graph.name.clone(),
                reason: e.to_string(),
            })?;
            let c = engine.compile(&bytes).map_err(|reason| RuntimeError::Compile {
                engine: engine.name(),
                subgraph: m.graph.name.clone(),
                processor: "reference".into(),
                reason,
            })?;
            let out = c
                .run(m.input.iter().map(|(_, v)| v.clone()).collect())
                .map_err(|reason| RuntimeError::Run {
                    subgraph: m.graph.name.clone(),
                    processor: "reference".into(),
                    reason,
                })?;
            m.reference = Some((out.into_iter().collect(), engine.name()));
        }
        Ok(engine.name())
    }

    fn run_once(&self, m: usize, c: usize, w: usize, inputs: TVec<Value>) -> Result<(TVec<Value>, f64), RuntimeError> {
        let sub = &self.models[m].units.candidates[c].subgraph;
        let compiled = self.models[m].compiled[c][w].clone().ok_or_else(|| RuntimeError::Run {
            subgraph: sub.name.clone(),
            processor: self.names[w].clone(),
            reason: "not compiled for this processor".into(),
        })?;
        self.run_compiled(w, &compiled, &sub.name, inputs)
    }

    fn send(
        &self,
        m: usize,
        c: usize,
        w: usize,
        seq: u64,
        inputs: TVec<Value>,
        reply: &Sender<Done>,
    ) -> Result<(), RuntimeError> {
        let compiled = self.models[m].compiled[c][w].clone().ok_or_else(|| RuntimeError::Run {
            subgraph: self.models[m].units.candidates[c].subgraph.name.clone(),
            processor: self.names[w].clone(),
            reason: "not compiled for this processor".into(),
        })?;
        self.send_compiled(w, compiled, seq, inputs, reply)
    }

    fn send_compiled(
        &self,
        w: usize,
        compiled: Arc<dyn Compiled>,
        seq: u64,
        inputs: TVec<Value>,
        reply: &Sender<Done>,
    ) -> Result<(), RuntimeError> {
        let job = worker::Job {
            index: seq as usize,
            worker: w,
            compiled,
            inputs: inputs.into_iter().map(Input::Ready).collect(),
            publish: Vec::new(),
            reply: reply.clone(),
        };
        self.workers[w]
            .queue
            .as_ref()
            .ok_or_else(|| RuntimeError::WorkerGone {
                processor: self.names[w].clone(),
            })?
            .send(job)
            .map_err(|_| RuntimeError::WorkerGone {
                processor: self.names[w].clone(),
            })
    }

    fn candidate_inputs(&self, m: usize, c: usize) -> Result<TVec<Value>, RuntimeError> {
        let model = &self.models[m];
        model.units.candidates[c]
            .subgraph
            .inputs
            .iter()
            .enumerate()
            .map(|(k, o)| {
                let shape = model.graph.fact(*o).map(|f| f.shape.clone()).unwrap_or_default();
                random_tensor(&shape, 77 + k as u64)
            })
            .collect()
    }

    /// Band's registration: on each worker, the largest candidate it can
    /// run is run once to warm up, then timed [`REGISTRATION_RUNS`] times in
    /// rounds over every (model, worker) pair, so that a passing slowdown of
    /// one core falls on a minority of any pair's runs; the median is the
    /// base of `estimator`.
    pub fn register(&self, estimator: &mut Estimator) -> Result<(), RuntimeError> {
        let mut pairs = Vec::new();
        for (m, model) in self.models.iter().enumerate() {
            for w in 0..self.workers.len() {
                if let Some(c) = model.units.largest_on(w) {
                    let inputs = self.candidate_inputs(m, c)?;
                    self.run_once(m, c, w, inputs.clone())?;
                    pairs.push((m, c, w, inputs, Vec::with_capacity(REGISTRATION_RUNS)));
                }
            }
        }
        for _ in 0..REGISTRATION_RUNS {
            for (m, c, w, inputs, times) in &mut pairs {
                times.push(self.run_once(*m, *c, *w, inputs.clone())?.1);
            }
        }
        for (m, c, w, _, times) in pairs {
            estimator.set_base(m, c, w, quantile(&times, 0.5));
        }
        Ok(())
    }

    /// Isolated latency of model `m` on worker `w` run alone (its units on
    /// `w`, the ones `w` lacks on the first processor that has them),
    /// `runs` times after one warm-up: the p99 in ms, or `None` when the
    /// plan cannot be made.
    pub fn isolated_p99(&self, m: usize, w: usize, runs: usize) -> Result<Option<f64>, RuntimeError> {
        let all = super::ProcSet::from_iter(0..self.workers.len());
        let Some(steps) = self.models[m].units.isolated_plan(w, all) else {
            return Ok(None);
        };
        Ok(Some(quantile(&self.time_steps(m, &steps, runs)?, 0.99)))
    }

    /// Runs model `m` on its input as the sequence `steps` of (candidate,
    /// worker), once to warm up and then `runs` times: each run's ms.
    pub fn time_steps(&self, m: usize, steps: &[(usize, usize)], runs: usize) -> Result<Vec<f64>, RuntimeError> {
        let model = &self.models[m];
        let mut times = Vec::new();
        for k in 0..=runs {
            let mut values: HashMap<Outlet, Value> = model.input.iter().cloned().collect();
            let t = Instant::now();
            for &(c, pw) in steps {
                let sub = &model.units.candidates[c].subgraph;
                let ins: TVec<Value> = sub.inputs.iter().map(|o| values[o].clone()).collect();
                let (outs, _) = self.run_once(m, c, pw, ins)?;
                for (o, v) in sub.outputs.iter().zip(outs) {
                    values.insert(*o, v);
                }
            }
            if k > 0 {
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        Ok(times)
    }

    /// Runs `workload` under `sched` on the wall clock. `slo_ms` per app;
    /// `progress` is called about once a second with the elapsed seconds.
    /// With a render task the calling thread runs on the cores of another
    /// pinned worker and polls for results while that worker has nothing to
    /// do (its core is idle then), else blocks; without another pinned
    /// worker it runs on the render worker's cores. A blocked thread's
    /// wake-up costs 30-110 µs on this VM, a poll 10-15 µs.
    /// The calling thread schedules; its priority is raised for the run
    /// where permitted (the log says when it was not).
    pub fn run(
        &self,
        sched: &mut Scheduler,
        workload: &Workload,
        slo_ms: Vec<Option<f64>>,
        progress: &mut dyn FnMut(f64, &RunLog, usize),
    ) -> Result<RunLog, RuntimeError> {
        let mut arrivals = Arrivals::new(workload, slo_ms);
        let mut outages: Vec<(f64, usize, bool)> = Vec::new();
        for o in &workload.outages {
            if let Some(w) = self.names.iter().position(|n| *n == o.processor) {
                outages.push((o.at_s * 1e3, w, false));
                outages.push(((o.at_s + o.for_s) * 1e3, w, true));
            }
        }
        outages.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut outages = outages.into_iter().peekable();
        if workload.render.is_some() && self.render.is_none() {
            return Err(RuntimeError::Policy {
                reason: "the workload has a render task but no render kernel was set (Server::set_render)".into(),
            });
        }
        let render_worker = sched.set_render_from(workload);
        if let (Some(w), Some((_, _, ms)), Some(r)) = (render_worker, &self.render, &workload.render) {
            sched.set_render(w, 1e3 / r.fps, *ms, 0.0);
        }
        let poll_beside =
            render_worker.and_then(|rw| (0..self.cores.len()).find(|w| *w != rw && self.cores[*w].is_some()));
        let _pinned = setup::PinGuard::new(
            poll_beside
                .and_then(|w| self.cores[w].as_ref())
                .or(render_worker.and_then(|w| self.cores[w].as_ref())),
        );
        let mut rendering: HashMap<u64, usize> = HashMap::new();
        let raised = priority::raise_current_thread(priority::SCHEDULER_NICE);
        let mut log = RunLog {
            submitted: vec![0; workload.apps.len()],
            priority_error: self.priority_error.clone().or(raised.as_ref().err().cloned()),
            ..RunLog::default()
        };
        let (reply, results): (Sender<Done>, Receiver<Done>) = channel();
        let mut values: HashMap<JobId, HashMap<Outlet, Value>> = HashMap::new();
        let mut flight: HashMap<u64, (JobId, usize, usize, usize, Instant)> = HashMap::new();
        let t0 = Instant::now();
        let now_ms = |t: Instant| (t - t0).as_secs_f64() * 1e3;
        let mut last_progress = 0.0;
        loop {
            let now = now_ms(Instant::now());
            while outages.peek().is_some_and(|o| o.0 <= now) {
                let Some((_, w, up)) = outages.next() else { break };
                if !up
                    && let Some(r) = &sched.workers()[w].running
                    && let Some((job, app, _, c, _)) = flight.remove(&r.seq)
                {
                    log.spans.push(Span {
                        worker: w,
                        app,
                        job,
                        candidate: c,
                        start_ms: r.start_ms.unwrap_or(now),
                        end_ms: now,
                        counted: false,
                    });
                }
                sched.set_available(w, up);
                log.outage(w, up, now);
            }
            let next_tick = sched
                .next_tick_ms()
                .filter(|t| arrivals.ticking_at(*t, sched.in_system()));
            if next_tick.is_some_and(|t| t <= now) {
                log.dropped_frames.extend(sched.render_ticks(now));
            } else if next_tick.is_none() {
                sched.stop_render();
            }
            for spec in arrivals.due(now) {
                log.submitted[spec.app] += 1;
                log.arrival_lag_ms.push((now - spec.arrival_ms).max(0.0));
                let m = spec.model;
                let id = sched.submit(spec);
                values.insert(id, self.models[m].input.iter().cloned().collect());
            }
            for d in sched
                .schedule(now)
                .map_err(|e| RuntimeError::Policy { reason: e.to_string() })?
            {
                if d.render.is_some() {
                    if let Some((_, kernel, _)) = &self.render {
                        rendering.insert(d.seq, d.worker);
                        self.send_compiled(d.worker, kernel.clone(), d.seq, TVec::new(), &reply)?;
                    }
                    continue;
                }
                let sub = &self.models[d.model].units.candidates[d.candidate].subgraph;
                let vals = &values[&d.job];
                let ins: TVec<Value> = sub.inputs.iter().map(|o| vals[o].clone()).collect();
                flight.insert(d.seq, (d.job, d.app, d.model, d.candidate, Instant::now()));
                self.send(d.model, d.candidate, d.worker, d.seq, ins, &reply)?;
            }
            if now - last_progress >= 1000.0 {
                last_progress = now;
                progress(now / 1e3, &log, sched.in_system());
            }
            let next_arrival = arrivals.next_ms();
            if next_arrival.is_none()
                && flight.is_empty()
                && rendering.is_empty()
                && sched.in_system() == 0
                && outages.peek().is_none()
            {
                break;
            }
            let next_tick = sched
                .next_tick_ms()
                .filter(|t| arrivals.ticking_at(*t, sched.in_system()));
            let wake = [next_arrival, outages.peek().map(|o| o.0), next_tick]
                .into_iter()
                .flatten()
                .fold(now + 1000.0, f64::min);
            let timeout = Duration::from_secs_f64(((wake - now_ms(Instant::now())) / 1e3).max(0.0));
            let poll = poll_beside.is_some_and(|w| {
                let st = &sched.workers()[w];
                st.running.is_none() && st.local.is_empty()
            });
            let got = if poll {
                crate::spin::recv_polling(&results, timeout)
            } else {
                results.recv_timeout(timeout)
            };
            let done = match got {
                Ok(d) => d,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(RuntimeError::WorkerGone { processor: "?".into() });
                }
            };
            let seq = done.index as u64;
            if let Some(w) = rendering.remove(&seq) {
                let ms = (done.end - done.start).as_secs_f64() * 1e3;
                if let Some(mut f) = sched.finish_render(now_ms(Instant::now()), w, seq, ms) {
                    f.start_ms = now_ms(done.start);
                    f.end_ms = now_ms(done.end);
                    log.frames.push(f);
                }
                continue;
            }
            let Some((job, app, m, c, sent)) = flight.remove(&seq) else {
                continue;
            };
            let current = sched.workers()[done.worker]
                .running
                .as_ref()
                .is_some_and(|r| r.seq == seq);
            if !current {
                continue;
            }
            let (start, end) = (now_ms(done.start), now_ms(done.end));
            log.spans.push(Span {
                worker: done.worker,
                app,
                job,
                candidate: c,
                start_ms: start,
                end_ms: end,
                counted: true,
            });
            let finish_at = now_ms(Instant::now());
            log.dispatch_overhead_ms
                .push(now_ms(done.start) - now_ms(sent) + finish_at - end);
            let outputs = match done.result {
                Some(Ok(outs)) => outs,
                Some(Err(reason)) => {
                    return Err(RuntimeError::Run {
                        subgraph: self.models[m].units.candidates[c].subgraph.name.clone(),
                        processor: self.names[done.worker].clone(),
                        reason,
                    });
                }
                None => {
                    sched.finish(finish_at, done.worker, seq, None);
                    continue;
                }
            };
            let sub = &self.models[m].units.candidates[c].subgraph;
            if let Some(vals) = values.get_mut(&job) {
                for (o, v) in sub.outputs.iter().zip(outputs) {
                    vals.insert(*o, v);
                }
            }
            if let Some(completed) = sched.finish(finish_at, done.worker, seq, Some(end - start)) {
                if let Some(vals) = values.remove(&job) {
                    self.check(m, &vals, &mut log);
                }
                arrivals.completed(&completed, finish_at);
                log.end_ms = log.end_ms.max(finish_at);
                log.completed.push(completed);
            }
        }
        log.frames_done = arrivals.frames_done;
        log.decision_us = std::mem::take(&mut sched.decision_us);
        log.moves = sched.policy_moves();
        Ok(log)
    }

    fn check(&self, m: usize, vals: &HashMap<Outlet, Value>, log: &mut RunLog) {
        let model = &self.models[m];
        let Some((reference, _)) = &model.reference else { return };
        log.outputs_checked += 1;
        let same = model.graph.outputs().iter().zip(reference).all(|((_, o), r)| {
            let (Some(v), Ok(r)) = (vals.get(o), r.to_plain_array_view::<f32>()) else {
                return false;
            };
            let Ok(v) = v.to_plain_array_view::<f32>() else {
                return false;
            };
            let scale = r.iter().fold(1f32, |a, x| a.max(x.abs()));
            v.len() == r.len() && v.iter().zip(r.iter()).all(|(a, b)| (a - b).abs() <= 1e-4 * scale)
        });
        if !same {
            log.mismatches += 1;
        }
    }

    /// The reference engine's name, if references were computed.
    pub fn reference_engine(&self) -> Option<&'static str> {
        self.models.first().and_then(|m| m.reference.as_ref().map(|r| r.1))
    }
}
