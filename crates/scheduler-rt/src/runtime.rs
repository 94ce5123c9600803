//! The runtime: load a partitioned model once, serve requests from many threads.

mod request;

use crate::adaptive::{AdaptiveParams, AdaptivePolicy};
use crate::config::{ProcessorConfig, Wait, WorkerKind};
use crate::error::RuntimeError;
use crate::extract::extract_onnx;
use crate::factory::EngineFactory;
use crate::load_checks::preflight;
use crate::partition::{Partition, partition};
use crate::policy::{Observation, PlacementPolicy, SubgraphInfo, SystemClock};
use crate::trace::{Moved, Trace};
use crate::worker::{self, Worker};
use engine::host::CoreSet;
use engine::{Compiled, Engine, EngineError, Value};
use graph_ir::{Fact, Graph, Outlet};
use request::Request;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;
use tract_core::prelude::DatumType;

/// A loaded model: its subgraphs compiled on the workers of their processors.
/// `Send + Sync`: share it (e.g. in an `Arc`) and call [`Runtime::run`] from
/// any number of threads.
pub struct Runtime {
    partition: Partition,
    /// Per subgraph: the ONNX bytes it compiles from, where given
    /// ([`Runtime::load_partitioned`]); else extracted from `graph`.
    files: Vec<Option<Arc<[u8]>>>,
    /// Per subgraph: nothing else of a request runs beside it ([`Partition::alone`]).
    alone: Vec<bool>,
    /// Cores every processor may use together: where the extra threads of
    /// a subgraph compiled with [`ProcessorConfig::alone_threads`] run
    /// (`None`: some processor is unpinned, so any allowed core).
    shared_cores: Option<CoreSet>,
    /// `compiled[subgraph][worker]`: each subgraph on its home worker from
    /// the start, elsewhere only once it may run there (a placement policy,
    /// or the fallback for a disabled processor, compiles it first).
    compiled: Vec<Vec<OnceLock<Arc<dyn Compiled>>>>,
    /// The model, kept to compile a subgraph on another worker later (its
    /// weights are shared with the caller's graph, not copied).
    graph: Graph,
    worker_of: Vec<usize>,
    workers: Vec<Worker>,
    inputs: Vec<(String, Fact, Outlet)>,
    outputs: Vec<Outlet>,
    /// `latency[subgraph][worker]`: exponential moving average of measured ms.
    latency: Mutex<Vec<Vec<Option<f64>>>>,
    /// The worker each subgraph is placed on (its home unless a policy moved it).
    placed: Vec<AtomicUsize>,
    policy: Option<Mutex<Box<dyn PlacementPolicy>>>,
    clock: SystemClock,
    /// Requests in flight; workers with [`Wait::Poll`] poll while above 0.
    busy: Arc<AtomicUsize>,
    /// Some processor waits by polling ([`Wait::Poll`]): runs count in `busy`.
    polls: bool,
    /// The scheduler polls for results during a run (an inline processor
    /// with [`Wait::Poll`]).
    poll_results: bool,
}

/// Counts a request in [`Runtime::busy`] while it lives.
struct InFlight<'a>(Option<&'a AtomicUsize>);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.0 {
            b.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Weight of the newest measurement in the latency moving averages.
pub const LATENCY_EMA_ALPHA: f64 = 0.2;

impl Runtime {
    /// Partitions `g` (unannotated nodes go to the first processor), starts
    /// one worker per processor and compiles every subgraph on its worker's engine.
    pub fn load(
        g: &Graph,
        processors: &[ProcessorConfig],
        factory: Arc<EngineFactory>,
    ) -> Result<Runtime, RuntimeError> {
        let first = preflight(g, processors)?;
        let partition = partition(g, &first.name)?;
        Runtime::start(g, partition, Vec::new(), processors, factory)
    }

    /// Runs `g` cut as `partition` says, without partitioning it again:
    /// subgraph `i` compiles from `files[i]` (ONNX bytes whose inputs and
    /// outputs are its [`crate::partition::Subgraph`]'s, in order) where
    /// given, else from `g`. For runners of exported bundles.
    pub fn load_partitioned(
        g: &Graph,
        partition: Partition,
        files: Vec<Option<Arc<[u8]>>>,
        processors: &[ProcessorConfig],
        factory: Arc<EngineFactory>,
    ) -> Result<Runtime, RuntimeError> {
        preflight(g, processors)?;
        Runtime::start(g, partition, files, processors, factory)
    }

    fn start(
        g: &Graph,
        partition: Partition,
        files: Vec<Option<Arc<[u8]>>>,
        processors: &[ProcessorConfig],
        factory: Arc<EngineFactory>,
    ) -> Result<Runtime, RuntimeError> {
        let configured = || {
            processors
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut worker_of = Vec::new();
        for s in &partition.subgraphs {
            let w = processors.iter().position(|p| p.name == s.processor).ok_or_else(|| {
                RuntimeError::UnknownProcessor {
                    node: g.node(s.nodes[0]).name.clone(),
                    processor: s.processor.clone(),
                    configured: configured(),
                }
            })?;
            worker_of.push(w);
        }
        let busy = Arc::new(AtomicUsize::new(0));
        let workers = processors
            .iter()
            .map(|p| worker::start(p, &factory, Some(&busy)))
            .collect::<Result<Vec<_>, _>>()?;
        let compiled = partition
            .subgraphs
            .iter()
            .map(|_| workers.iter().map(|_| OnceLock::new()).collect())
            .collect();
        let inputs = g
            .inputs()
            .iter()
            .map(|id| {
                let o = id.out(0);
                (
                    g.node(*id).name.clone(),
                    g.fact(o).cloned().unwrap_or_else(|| Fact::f32(vec![])),
                    o,
                )
            })
            .collect();
        let outputs = g.outputs().iter().map(|(_, o)| *o).collect();
        let latency = Mutex::new(vec![vec![None; processors.len()]; partition.subgraphs.len()]);
        let placed = worker_of.iter().map(|w| AtomicUsize::new(*w)).collect();
        let shared_cores = processors
            .iter()
            .map(|p| p.cores.as_ref().map(|c| c.ids().to_vec()))
            .collect::<Option<Vec<_>>>()
            .and_then(|ids| CoreSet::new(ids.concat()));
        let mut files = files;
        files.resize(partition.subgraphs.len(), None);
        let rt = Runtime {
            files,
            alone: partition.alone(),
            shared_cores,
            partition,
            compiled,
            graph: g.clone(),
            worker_of,
            workers,
            inputs,
            outputs,
            latency,
            placed,
            policy: None,
            clock: SystemClock::new(),
            busy,
            polls: processors.iter().any(|p| p.wait == Wait::Poll),
            poll_results: processors
                .iter()
                .any(|p| p.wait == Wait::Poll && p.kind == WorkerKind::Inline),
        };
        for (i, w) in rt.worker_of.iter().enumerate() {
            rt.compiled_on(i, *w)?;
        }
        Ok(rt)
    }

    /// Subgraph `i` compiled on worker `w`, compiling it there first if it
    /// never ran there.
    fn compiled_on(&self, i: usize, w: usize) -> Result<&Arc<dyn Compiled>, RuntimeError> {
        if let Some(c) = self.compiled[i][w].get() {
            return Ok(c);
        }
        let worker = &self.workers[w];
        let s = &self.partition.subgraphs[i];
        let bytes = match &self.files[i] {
            Some(f) => f.to_vec(),
            None => extract_onnx(&self.graph, s)?,
        };
        let compiled = match worker.config.alone_threads.filter(|_| self.alone[i]) {
            Some(threads) => self.compile_shared(worker.engine.as_ref(), &bytes, threads),
            None => worker.engine.compile(&bytes),
        };
        let c = compiled.map_err(|e| RuntimeError::Compile {
            engine: worker.engine.name(),
            subgraph: s.name.clone(),
            processor: worker.config.name.clone(),
            reason: e.reason(),
        })?;
        Ok(self.compiled[i][w].get_or_init(|| Arc::from(c)))
    }

    /// Compiles `onnx` with `threads` intra-op threads on a thread free to
    /// run on every processor's cores, so the threads the engine starts
    /// for it may run on the other processors' idle cores.
    fn compile_shared(
        &self,
        engine: &dyn Engine,
        onnx: &[u8],
        threads: usize,
    ) -> Result<Box<dyn Compiled>, EngineError> {
        let failed = |reason: String| EngineError::Load {
            engine: engine.name(),
            reason,
        };
        let cores = match &self.shared_cores {
            Some(c) => c.clone(),
            None => engine::host::allowed_cores().map_err(|e| failed(e.to_string()))?,
        };
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    engine::host::pin_current_thread(&cores).map_err(|e| failed(e.to_string()))?;
                    engine.compile_threads(onnx, threads)
                })
                .join()
                .map_err(|_| failed("the engine panicked while compiling".to_string()))?
        })
    }

    /// Requests in flight now, as counted for processors that poll
    /// ([`Wait::Poll`]); 0 when none polls.
    pub fn requests_in_flight(&self) -> usize {
        self.busy.load(Ordering::Acquire)
    }

    /// How many (subgraph, processor) pairs hold a compiled copy now.
    pub fn compiled_copies(&self) -> usize {
        self.compiled.iter().flatten().filter(|c| c.get().is_some()).count()
    }

    /// Home processor (index in the configuration) and dataflow level of
    /// each subgraph, in partition order.
    pub fn subgraph_infos(&self) -> Vec<SubgraphInfo> {
        let mut producer: HashMap<Outlet, usize> = HashMap::new();
        let mut infos: Vec<SubgraphInfo> = Vec::new();
        for (i, s) in self.partition.subgraphs.iter().enumerate() {
            let level = s
                .inputs
                .iter()
                .filter_map(|o| producer.get(o).map(|p| infos[*p].level + 1))
                .max()
                .unwrap_or(0);
            infos.push(SubgraphInfo {
                home: self.worker_of[i],
                level,
            });
            for o in &s.outputs {
                producer.insert(*o, i);
            }
        }
        infos
    }

    /// Lets `policy` place subgraphs: after each request it sees the
    /// engine time of every subgraph run and may move subgraphs; the moves
    /// are in that request's [`Trace::moves`].
    ///
    /// Every subgraph is compiled on every processor first, since the
    /// policy may move any subgraph anywhere.
    pub fn with_policy(mut self, policy: Box<dyn PlacementPolicy>) -> Result<Runtime, RuntimeError> {
        for i in 0..self.compiled.len() {
            for w in 0..self.workers.len() {
                self.compiled_on(i, w)?;
            }
        }
        for (i, p) in self.placed.iter().enumerate() {
            p.store(policy.placement(i).min(self.workers.len() - 1), Ordering::Release);
        }
        self.policy = Some(Mutex::new(policy));
        Ok(self)
    }

    /// [`Runtime::with_policy`] with an [`AdaptivePolicy`] using `params`.
    pub fn with_adaptation(self, params: AdaptiveParams) -> Result<Runtime, RuntimeError> {
        let policy = AdaptivePolicy::new(params, &self.subgraph_infos(), self.workers.len());
        self.with_policy(Box::new(policy))
    }

    /// The processor subgraph `subgraph` is placed on now (before the
    /// fallback for disabled processors).
    pub fn placed_on(&self, subgraph: usize) -> Option<&str> {
        let w = self.placed.get(subgraph)?.load(Ordering::Acquire);
        Some(self.workers[w].config.name.as_str())
    }

    pub fn partition(&self) -> &Partition {
        &self.partition
    }

    /// Names and facts of the model inputs, in order.
    pub fn input_facts(&self) -> Vec<(&str, &Fact)> {
        self.inputs.iter().map(|(n, f, _)| (n.as_str(), f)).collect()
    }

    /// The engine name and version of each processor, in configuration order.
    pub fn engines(&self) -> Vec<(String, &'static str, &'static str)> {
        self.workers
            .iter()
            .map(|w| (w.config.name.clone(), w.engine.name(), w.engine.version()))
            .collect()
    }

    /// Disables (`false`) or re-enables a processor at run time. While it is
    /// disabled its subgraphs run on the first enabled processor (compiled
    /// there before this returns), and jobs still queued on it are handed
    /// back and re-run there; no request is lost.
    pub fn set_enabled(&self, processor: &str, enabled: bool) -> Result<(), RuntimeError> {
        let wi = self
            .workers
            .iter()
            .position(|w| w.config.name == processor)
            .ok_or_else(|| RuntimeError::UnknownProcessor {
                node: "(set_enabled)".into(),
                processor: processor.to_string(),
                configured: self
                    .workers
                    .iter()
                    .map(|w| w.config.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        if !enabled
            && let Some(f) =
                (0..self.workers.len()).find(|f| *f != wi && self.workers[*f].enabled.load(Ordering::Acquire))
        {
            for i in (0..self.placed.len()).filter(|i| self.placed[*i].load(Ordering::Acquire) == wi) {
                self.compiled_on(i, f)?;
            }
        }
        self.workers[wi].enabled.store(enabled, Ordering::Release);
        Ok(())
    }

    /// Moving average (weight [`LATENCY_EMA_ALPHA`]) of the measured latency
    /// in ms of subgraph `subgraph` (index in [`Runtime::partition`]) on
    /// `processor`; `None` before it has run there.
    pub fn latency_ms(&self, subgraph: usize, processor: &str) -> Option<f64> {
        let w = self.workers.iter().position(|w| w.config.name == processor)?;
        self.latency.lock().ok()?.get(subgraph)?.get(w).copied().flatten()
    }

    fn record(&self, subgraph: usize, worker: usize, ms: f64) {
        if let Ok(mut table) = self.latency.lock() {
            let cell = &mut table[subgraph][worker];
            *cell = Some(cell.map_or(ms, |m| m + LATENCY_EMA_ALPHA * (ms - m)));
        }
    }

    /// The worker that runs subgraph `i` now.
    fn placement(&self, i: usize) -> Result<usize, RuntimeError> {
        let home = self.placed[i].load(Ordering::Acquire);
        if self.workers[home].enabled.load(Ordering::Acquire) {
            return Ok(home);
        }
        self.workers
            .iter()
            .position(|w| w.enabled.load(Ordering::Acquire))
            .ok_or(RuntimeError::AllDisabled)
    }

    /// Runs the model once on `inputs` (graph-input order), returning its outputs.
    pub fn run(&self, inputs: Vec<Value>) -> Result<Vec<Value>, RuntimeError> {
        self.run_traced(inputs).map(|(o, _)| o)
    }

    fn check_inputs(&self, inputs: &[Value]) -> Result<(), RuntimeError> {
        if inputs.len() != self.inputs.len() {
            return Err(RuntimeError::InputCount {
                expected: self.inputs.len(),
                got: inputs.len(),
            });
        }
        for (index, ((name, fact, _), v)) in self.inputs.iter().zip(inputs).enumerate() {
            if v.datum_type() != DatumType::F32 || v.shape() != fact.shape.as_slice() {
                return Err(RuntimeError::Input {
                    index,
                    name: name.clone(),
                    expected: format!("f32 {:?}", fact.shape),
                    got: format!("{:?} {:?}", v.datum_type(), v.shape()),
                });
            }
        }
        Ok(())
    }

    /// Like [`Runtime::run`], also returning when each subgraph ran (Algorithm 1:
    /// every ready subgraph of a pool or queue worker is dispatched first,
    /// then ready inline subgraphs run on this thread, then the scheduler
    /// waits for the next result; a meeting point runs once all its inputs
    /// arrived). A subgraph on a queue worker is ready as soon as the values
    /// it lacks are queued on that same worker before it.
    pub fn run_traced(&self, inputs: Vec<Value>) -> Result<(Vec<Value>, Trace), RuntimeError> {
        self.check_inputs(&inputs)?;
        let _in_flight = InFlight(self.polls.then(|| {
            self.busy.fetch_add(1, Ordering::AcqRel);
            self.busy.as_ref()
        }));
        Request::new(self, inputs).run()
    }

    /// Feeds a finished request to the policy and applies its moves.
    fn adapt(&self, observed: &[Observation], t0: Instant) -> Vec<Moved> {
        let Some(policy) = &self.policy else {
            return Vec::new();
        };
        let estimates = match self.latency.lock() {
            Ok(t) => t.clone(),
            Err(_) => return Vec::new(),
        };
        let Ok(mut policy) = policy.lock() else {
            return Vec::new();
        };
        let decisions = policy.observe(observed, &self.clock, &estimates);
        let at_s = t0.elapsed().as_secs_f64();
        let last = self.workers.len() - 1;
        decisions
            .into_iter()
            .filter(|d| d.subgraph < self.placed.len())
            .map(|d| {
                self.placed[d.subgraph].store(d.to.min(last), Ordering::Release);
                Moved {
                    subgraph: self.partition.subgraphs[d.subgraph].name.clone(),
                    from: self.workers[d.from.min(last)].config.name.clone(),
                    to: self.workers[d.to.min(last)].config.name.clone(),
                    at_s,
                    reason: d.reason,
                }
            })
            .collect()
    }
}
