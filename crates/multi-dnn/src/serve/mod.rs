//! Multi-DNN serving on real workers: the [`Scheduler`] and policy of the
//! simulator, driven by the wall clock and by engine threads pinned to
//! their cores. Every candidate is compiled once per processor that can
//! run it; every finished request's outputs can be compared with a
//! whole-model reference.

use crate::core::Scheduler;
use crate::core::estimator::Estimator;
use crate::core::report::{RunLog, quantile_or_zero};
use crate::core::units::{ModelUnits, analyze};
use crate::core::workload::Workload;
use engine::{Compiled, Value};
use graph_ir::{Graph, Outlet};
use scheduler_rt::EngineFactory;
use scheduler_rt::config::{ProcessorConfig, WorkerKind};
use scheduler_rt::error::RuntimeError;
use scheduler_rt::extract::extract_onnx;
use scheduler_rt::priority;
use scheduler_rt::queue::Input;
use scheduler_rt::support::OpSupport;
use scheduler_rt::worker::{self, Done, Worker};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

mod heat;
pub mod host;
pub mod render;
mod setup;
mod spread;
mod state;
pub mod world;
use tract_onnx::prelude::{IntoTValue, TVec, Tensor};

/// Set: every run has one scheduling thread ([`set_thread_scheduling`]).
static THREAD_SCHEDULING: AtomicBool = AtomicBool::new(false);

/// Makes every later [`Server::run`] of this process hand work to the
/// workers from one scheduling thread (`true`), or lets workers that
/// qualify schedule themselves (`false`, the default; see
/// [`self_scheduling`]).
pub fn set_thread_scheduling(on: bool) {
    THREAD_SCHEDULING.store(on, Ordering::Relaxed);
}

/// Whether [`Server::run`] lets workers pinned to `cores` (one entry per
/// processor) schedule themselves, handing work to idle workers that poll
/// for it: every processor pinned to cores no other has, and no
/// [`set_thread_scheduling`]. Hand-offs then wake no thread, and the costs
/// of a plan should be measured so.
pub fn self_scheduling(cores: &[Option<engine::host::CoreSet>]) -> bool {
    !THREAD_SCHEDULING.load(Ordering::Relaxed) && spread::applies(cores)
}

/// [`self_scheduling`] for workers on `processors`, as [`Server::start`] makes them.
pub fn self_scheduling_on(processors: &[ProcessorConfig]) -> bool {
    let cores: Vec<_> = processors.iter().map(|p| p.cores.clone()).collect();
    self_scheduling(&cores)
}

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

/// Says who hands work to `procs` in this process's runs (`thermal`: a
/// run on a device that heats).
pub fn scheduling_line(procs: &[ProcessorConfig], thermal: bool) -> String {
    if !thermal && self_scheduling_on(procs) {
        "scheduling: the workers schedule themselves (each processor pinned to cores of its own; idle ones poll)".into()
    } else {
        "scheduling: one scheduling thread hands work to the workers (--scheduling thread, --thermal, or processors without cores of their own)".into()
    }
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
    cores: Vec<Option<engine::host::CoreSet>>,
}

fn random_tensor(shape: &[usize], seed: u64) -> Result<Value, RuntimeError> {
    let n = shape.iter().product();
    let t = Tensor::from_shape(shape, &scheduler_rt::npy::random_values(seed, n)).map_err(|e| RuntimeError::Run {
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
            workers.push(worker::start(&p, factory, None)?);
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
                let comp = wk.engine.compile(&bytes).map_err(|e| RuntimeError::Compile {
                    engine: wk.engine.name(),
                    subgraph: format!("{}:{}", graph.name, c.subgraph.name),
                    processor: self.names[w].clone(),
                    reason: e.reason(),
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
        cfg.engine = if engine::ORT_BUILT { "ort" } else { "tract" }.to_string();
        let engine = factory(&cfg)?;
        for m in &mut self.models {
            let bytes = graph_ir::onnx::export_bytes(&m.graph).map_err(|e| RuntimeError::Export {
                subgraph: m.graph.name.clone(),
                reason: e.to_string(),
            })?;
            let c = engine.compile(&bytes).map_err(|e| RuntimeError::Compile {
                engine: engine.name(),
                subgraph: m.graph.name.clone(),
                processor: "reference".into(),
                reason: e.reason(),
            })?;
            let out = c
                .run(m.input.iter().map(|(_, v)| v.clone()).collect())
                .map_err(|e| RuntimeError::Run {
                    subgraph: m.graph.name.clone(),
                    processor: "reference".into(),
                    reason: e.reason(),
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
            estimator.set_base(m, c, w, quantile_or_zero(&times, 0.5));
        }
        Ok(())
    }

    /// Isolated latency of model `m` on worker `w` run alone (its units on
    /// `w`, the ones `w` lacks on the first processor that has them),
    /// `runs` times after one warm-up: the p99 in ms, or `None` when the
    /// plan cannot be made.
    pub fn isolated_p99(&self, m: usize, w: usize, runs: usize) -> Result<Option<f64>, RuntimeError> {
        let all = crate::ProcSet::from_iter(0..self.workers.len());
        let Some(steps) = self.models[m].units.isolated_plan(w, all) else {
            return Ok(None);
        };
        Ok(Some(quantile_or_zero(&self.time_steps(m, &steps, runs)?, 0.99)))
    }

    /// Per model (app names `apps`): its isolated p99 on its fastest
    /// processor in ms, `runs` runs each (at least 1); `note` hears each.
    pub fn fastest_isolated_p99(
        &self,
        apps: &[String],
        runs: usize,
        note: &mut dyn FnMut(&str),
    ) -> Result<Vec<f64>, RuntimeError> {
        let mut out = Vec::with_capacity(self.models.len());
        for (m, app) in apps.iter().enumerate().take(self.models.len()) {
            let mut best = f64::INFINITY;
            for w in 0..self.names.len() {
                if let Some(p99) = self.isolated_p99(m, w, runs.max(1))? {
                    best = best.min(p99);
                }
            }
            note(&format!(
                "{app}: isolated p99 on its fastest processor {best:.2} ms (measured)"
            ));
            out.push(best);
        }
        Ok(out)
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
    ///
    /// With every worker pinned to cores of its own ([`self_scheduling`]),
    /// on a device that does not heat, the worker threads schedule in turn
    /// ([`spread`]): a worker that finishes takes the next decision itself
    /// and starts its own next piece at once, and idle workers poll their
    /// own idle cores, so no hand-off waits for a thread to wake (a blocked
    /// thread's wake-up costs tens of µs on a VM); the caller serves the
    /// render worker, or else the first. Otherwise one scheduling thread (the caller) hands
    /// work to the worker threads; with a render task it runs on the cores
    /// of another pinned worker and polls while that worker is idle, else
    /// blocks. The scheduling threads run at raised priority where
    /// permitted (the log says when they were not).
    pub fn run(
        &self,
        sched: &mut Scheduler,
        workload: &Workload,
        slo_ms: Vec<Option<f64>>,
        progress: &mut dyn FnMut(f64, &RunLog, usize),
    ) -> Result<RunLog, RuntimeError> {
        self.run_thermal(sched, workload, slo_ms, progress, None)
    }

    /// [`Server::run`] on a device that heats: `thermal` (one node per
    /// processor) runs beside the workers ([`heat`]); not with a render task.
    pub fn run_thermal(
        &self,
        sched: &mut Scheduler,
        workload: &Workload,
        slo_ms: Vec<Option<f64>>,
        progress: &mut dyn FnMut(f64, &RunLog, usize),
        thermal: Option<&mut crate::splash::thermal::driver::ThermalDriver>,
    ) -> Result<RunLog, RuntimeError> {
        if thermal.is_some() && workload.render.is_some() {
            return Err(RuntimeError::Policy {
                reason: "a thermal run cannot have a render task".into(),
            });
        }
        if workload.render.is_some() && self.render.is_none() {
            return Err(RuntimeError::Policy {
                reason: "the workload has a render task but no render kernel was set (Server::set_render)".into(),
            });
        }
        sched.set_drop_late(workload.drop_late);
        let render_worker = sched.set_render_from(workload);
        if let (Some(w), Some((_, _, ms)), Some(r)) = (render_worker, &self.render, &workload.render) {
            sched.set_render(w, 1e3 / r.fps, *ms, 0.0);
        }
        if thermal.is_none() && self_scheduling(&self.cores) {
            return spread::run(self, sched, workload, slo_ms, render_worker.unwrap_or(0), progress);
        }
        let poll_beside =
            render_worker.and_then(|rw| (0..self.cores.len()).find(|w| *w != rw && self.cores[*w].is_some()));
        let _pinned = setup::PinGuard::new(
            poll_beside
                .and_then(|w| self.cores[w].as_ref())
                .or(render_worker.and_then(|w| self.cores[w].as_ref())),
        );
        let raised = priority::raise_current_thread(priority::SCHEDULER_NICE);
        let priority_error = self.priority_error.clone().or(raised.as_ref().err().cloned());
        let mut st = state::RunState::new(self, sched, workload, slo_ms, priority_error, thermal);
        let (reply, results): (Sender<Done>, Receiver<Done>) = channel();
        loop {
            let now = st.now();
            for w in st.advance(now)? {
                self.send_compiled(w.worker, w.compiled, w.seq, w.inputs, &reply)?;
            }
            if st.progress_due(now) {
                progress(now / 1e3, &st.log, st.in_system());
            }
            if st.finished() {
                break;
            }
            let timeout = Duration::from_secs_f64(((st.wake_ms(now) - st.now()) / 1e3).max(0.0));
            let poll = poll_beside.is_some_and(|w| {
                let ws = &st.sched.workers()[w];
                ws.running.is_none() && ws.local.is_empty()
            });
            let got = if poll {
                scheduler_rt::spin::recv_polling(&results, timeout)
            } else {
                results.recv_timeout(timeout)
            };
            match got {
                Ok(done) => st.on_done(done)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(RuntimeError::WorkerGone { processor: "?".into() });
                }
            }
        }
        Ok(st.into_log())
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
}
