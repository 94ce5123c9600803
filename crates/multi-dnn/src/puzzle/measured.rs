//! Device-in-the-loop costs for `stretch analyze --runtime-config`
//! (Puzzle §4.3): every piece is compiled on its processor's engine and
//! timed on that processor's cores, once; the median is stored in a JSON
//! database keyed by the piece's structural hash and the processor's
//! engine, threads and cores, so a piece measured once is never measured
//! again, in this run or later ones. Hand-offs between processors cost
//! the piecewise-linear fit of thread hand-offs measured between their
//! cores (`stretch profile --link`).

use super::chromosome::LayerGraph;
use crate::predicted::CostError;
use crate::predicted::costs::{Costs, Wanted};
use graph_ir::{Graph, NodeId};
use predictor::profiler::link;
use predictor::profiler::timing::Timing;
use scheduler_rt::timing::cost_db::{Db, key};
use scheduler_rt::timing::piece::{Job, combine_timings, onnx_of, timer};
use scheduler_rt::{EngineFactory, ProcessorConfig};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Instant;

/// Timed runs per piece (after two warm-ups); the median is kept.
pub const RUNS: usize = 10;

/// Timings of a plan's pieces taken in turn when re-timing
/// (`MeasuredCosts::prefetch`); each piece keeps the median of theirs.
pub const RETIMINGS: usize = 3;

/// A named piece to time: ONNX bytes and input shapes.
type Probe = (String, Vec<u8>, Vec<Vec<usize>>);

/// Alone/shared rounds of the contention measurement, and timed runs of
/// each side of a round.
pub const CONTENTION_ROUNDS: usize = 7;
pub const CONTENTION_RUNS: usize = 30;

type Result<T, E = CostError> = std::result::Result<T, E>;

/// A step of the measurement that failed, and why.
fn failed(step: impl Into<String>, reason: impl ToString) -> CostError {
    CostError::Measure {
        step: step.into(),
        reason: reason.to_string(),
    }
}

/// Piece times by (model, processor, layers).
type PieceTimes = HashMap<(usize, usize, Vec<usize>), f64>;

pub struct Measured<'a> {
    graphs: &'a [Graph],
    layers: &'a [LayerGraph],
    procs: Vec<ProcessorConfig>,
    /// One timing thread per processor, pinned to its cores, with its engine.
    timers: Vec<mpsc::Sender<Job>>,
    links: HashMap<(usize, usize), link::PiecewiseFit>,
    db: Db,
    /// The database's file; `None`: nothing read or kept.
    path: Option<PathBuf>,
    memo: PieceTimes,
    /// Since the last [`Costs::retime`]: pieces timed afresh (kept out of the database).
    fresh: Option<PieceTimes>,
    /// Pieces timed again after the search.
    pub retimed: usize,
    pub measured: usize,
    pub reused: usize,
    notes: Vec<String>,
    /// Per processor: its time with the other processors busy / alone.
    factors: Vec<f64>,
    /// The driver's lateness waking for a tick, at evenly spaced quantiles.
    lag: Vec<f64>,
    /// Per processor: each run / its round's median at evenly spaced
    /// quantiles, alone and while the other processors are busy.
    spread: Vec<(Vec<f64>, Vec<f64>)>,
    /// Per processor: the lag-1 correlation of consecutive runs' times.
    correlation: Vec<f64>,
    /// How `serve` hands work over on these processors: polled when the
    /// workers schedule themselves ([`crate::serve::self_scheduling_on`]).
    wait: link::Wait,
}

/// One processor's pieces re-timed together ([`Costs::prefetch`]).
struct Batch<'w> {
    processor: usize,
    wanted: Vec<&'w Wanted>,
    /// The models they come from, for errors.
    models: String,
    /// Each piece as ONNX bytes with its input shapes.
    pieces: Vec<(Vec<u8>, Vec<Vec<usize>>)>,
    round_ms: f64,
    /// Per timing, per piece, its runs' ms.
    timings: Vec<Vec<Vec<f64>>>,
}

/// Quantiles kept of a measured distribution (driver lag, run-time spread).
const QUANTILES: usize = 20;

impl<'a> Measured<'a> {
    /// Opens (or starts) the database at `path` (`None`: every piece is
    /// timed now and nothing is kept), starts each processor's timing
    /// thread with its engine from `engines`, and measures the hand-offs
    /// between every pair of processors' first cores.
    pub fn new(
        graphs: &'a [Graph],
        layers: &'a [LayerGraph],
        procs: &[ProcessorConfig],
        engines: std::sync::Arc<EngineFactory>,
        path: Option<&Path>,
    ) -> Result<Self> {
        let db = Db::open(path)?;
        let first = |p: &ProcessorConfig| p.cores.as_ref().and_then(|c| c.ids().first().copied()).unwrap_or(0);
        let wait = if crate::serve::self_scheduling_on(procs) {
            link::Wait::Poll
        } else {
            link::Wait::Block
        };
        let mut links = HashMap::new();
        let mut notes = vec![match wait {
            link::Wait::Poll => "hand-offs polled: every processor is pinned to cores of its own, so serve's workers schedule themselves and idle ones poll for work".to_string(),
            link::Wait::Block => "hand-offs blocked: serve's scheduling thread hands work over and waits for results (--scheduling thread, or a processor without cores of its own)".to_string(),
        }];
        for (a, pa) in procs.iter().enumerate() {
            for (b, pb) in procs.iter().enumerate() {
                if a == b {
                    continue;
                }
                let (from, to) = (first(pa), first(pb));
                let step = || format!("measuring the hand-off {} -> {}", pa.name, pb.name);
                let samples =
                    std::thread::spawn(move || link::measure_with(from, to, &link::default_sizes(), 3, 30, wait))
                        .join()
                        .map_err(|_| failed(step(), "the measurement panicked"))?
                        .map_err(|e| failed(step(), e))?;
                let fit = link::fit_piecewise(&samples);
                notes.push(format!(
                    "hand-off {} -> {}: {:.1} us + bytes / {:.1} GB/s up to 1 MiB, {:.1} us + bytes / {:.1} GB/s above (measured, R² {:.3})",
                    pa.name,
                    pb.name,
                    fit.small.latency_us,
                    fit.small.bandwidth_gbs,
                    fit.large.latency_us,
                    fit.large.bandwidth_gbs,
                    link::r_squared(&samples, |x| fit.us(x))
                ));
                links.insert((a, b), fit);
            }
        }
        let mut m = Measured {
            graphs,
            layers,
            procs: procs.to_vec(),
            timers: procs.iter().map(|p| timer(p, engines.clone())).collect(),
            links,
            db,
            path: path.map(Path::to_path_buf),
            memo: HashMap::new(),
            fresh: None,
            retimed: 0,
            measured: 0,
            reused: 0,
            notes,
            factors: vec![1.0; procs.len()],
            lag: Vec::new(),
            spread: vec![(Vec::new(), Vec::new()); procs.len()],
            correlation: vec![0.0; procs.len()],
            wait,
        };
        m.measure_contention()?;
        m.measure_lag();
        Ok(m)
    }

    /// The longest run of consecutive layers (topological order, so the
    /// run is convex) of any model that processor `p` runs, as ONNX bytes
    /// and input shapes, named by its model; `None` if `p` runs no layer.
    fn longest_run_on(&self, p: usize) -> Result<Option<Probe>> {
        let mut best: Option<(usize, usize, usize)> = None;
        for (m, lg) in self.layers.iter().enumerate() {
            let mut start = 0;
            for l in 0..=lg.len() {
                if l == lg.len() || !lg.support[l].contains(p) {
                    if l > start && best.is_none_or(|b| l - start > b.2 - b.1) {
                        best = Some((m, start, l));
                    }
                    start = l + 1;
                }
            }
        }
        let Some((m, a, b)) = best else { return Ok(None) };
        let g = &self.graphs[m];
        let (bytes, shapes) = onnx_of(g, self.layers[m].layers[a..b].to_vec()).map_err(|e| failed(&g.name, e))?;
        Ok(Some((format!("{} ({} layers)", g.name, b - a), bytes, shapes)))
    }

    /// Sends a piece to processor `p`'s timing thread and waits for the
    /// median ms of `runs` timed runs.
    fn ask_time(&self, p: usize, bytes: Vec<u8>, shapes: Vec<Vec<usize>>, runs: usize) -> Result<f64, String> {
        Ok(graph_ir::stats::median_nan(&self.ask_times(p, bytes, shapes, runs)?))
    }

    /// The time already known for a piece: while re-timing, only one timed
    /// since [`Costs::retime`].
    fn known(&self, key: &(usize, usize, Vec<usize>)) -> Option<f64> {
        match &self.fresh {
            Some(fresh) => fresh.get(key).copied(),
            None => self.memo.get(key).copied(),
        }
    }

    /// The nodes of layers `layers` of model `model`.
    fn nodes(&self, model: usize, layers: &[usize]) -> Vec<NodeId> {
        layers.iter().map(|l| self.layers[model].layers[*l]).collect()
    }

    /// Every run's ms, in the order run, of `runs` timed runs of a piece on processor `p`.
    fn ask_times(&self, p: usize, bytes: Vec<u8>, shapes: Vec<Vec<usize>>, runs: usize) -> Result<Vec<f64>, String> {
        let (tx, rx) = mpsc::channel();
        let gone = || format!("the timing thread of {} stopped", self.procs[p].name);
        self.timers[p]
            .send(Job::Time(bytes, shapes, runs.max(1), tx))
            .map_err(|_| gone())?;
        rx.recv().map_err(|_| gone())?
    }

    /// Per piece, every run's ms of `runs` rounds at least `round_ms` long
    /// that run each of `pieces` once on processor `p` (see
    /// [`scheduler_rt::timing::piece`]'s cadence).
    fn ask_cadence(
        &self,
        p: usize,
        pieces: Vec<(Vec<u8>, Vec<Vec<usize>>)>,
        runs: usize,
        round_ms: f64,
    ) -> Result<Vec<Vec<f64>>, String> {
        let (tx, rx) = mpsc::channel();
        let gone = || format!("the timing thread of {} stopped", self.procs[p].name);
        self.timers[p]
            .send(Job::Cadence(pieces, runs.max(1), round_ms, tx))
            .map_err(|_| gone())?;
        rx.recv().map_err(|_| gone())?
    }

    /// Times, per processor, its [`Self::longest_run_on`] alone and while
    /// every other processor runs its own over and over, in
    /// [`CONTENTION_ROUNDS`] alternating rounds (a change of the machine's
    /// speed falls on both): the median ratio is the factor the simulator
    /// applies to pieces that start while another processor is busy (at
    /// least 1). Each run over its round's median, pooled per side, is the
    /// spread the simulator draws every piece's run time from.
    fn measure_contention(&mut self) -> Result<()> {
        let n = self.procs.len();
        let probes: Vec<Option<Probe>> = (0..n).map(|p| self.longest_run_on(p)).collect::<Result<_>>()?;
        for p in 0..n {
            let Some((name, bytes, shapes)) = &probes[p] else {
                continue;
            };
            let loaders: Vec<(usize, &Probe)> = probes
                .iter()
                .enumerate()
                .filter(|(q, _)| *q != p)
                .filter_map(|(q, probe)| Some((q, probe.as_ref()?)))
                .collect();
            if loaders.is_empty() {
                continue;
            }
            let time = || {
                self.ask_times(p, bytes.clone(), shapes.clone(), CONTENTION_RUNS)
                    .map_err(|e| failed(format!("timing '{name}' on {}", self.procs[p].name), e))
            };
            let (mut alone, mut shared, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
            let (mut alone_runs, mut shared_runs) = (Vec::new(), Vec::new());
            let mut correlations = Vec::new();
            let mut relative = |times: &[f64], into: &mut Vec<f64>| {
                let median = graph_ir::stats::median_nan(times);
                correlations.extend(crate::sim::lag1_correlation(times));
                into.extend(times.iter().map(|t| t / median));
                median
            };
            for _ in 0..CONTENTION_ROUNDS {
                let a = relative(&time()?, &mut alone_runs);
                let stop = Arc::new(AtomicBool::new(false));
                let mut stopped = Vec::new();
                for &(q, (_, b, sh)) in &loaders {
                    let (tx, rx) = mpsc::channel();
                    self.timers[q]
                        .send(Job::Load(b.clone(), sh.clone(), stop.clone(), tx))
                        .map_err(|_| failed(format!("loading {}", self.procs[q].name), "its timing thread stopped"))?;
                    rx.recv()
                        .map_err(|_| failed(format!("loading {}", self.procs[q].name), "its timing thread stopped"))?
                        .map_err(|e| failed(format!("loading {}", self.procs[q].name), e))?;
                    stopped.push(rx);
                }
                let s = time();
                stop.store(true, Ordering::Relaxed);
                for rx in stopped {
                    let _ = rx.recv();
                }
                let s = relative(&s?, &mut shared_runs);
                alone.push(a);
                shared.push(s);
                ratios.push(s / a);
            }
            let median = |v: Vec<f64>| Timing::of(v).map_or(f64::NAN, |t| t.median_ms);
            let (lo, hi) = ratios
                .iter()
                .fold((f64::INFINITY, 0.0f64), |(l, h), r| (l.min(*r), h.max(*r)));
            self.factors[p] = median(ratios).max(1.0);
            let loaded: Vec<&str> = loaders.iter().map(|(q, _)| self.procs[*q].name.as_str()).collect();
            alone_runs.sort_by(f64::total_cmp);
            shared_runs.sort_by(f64::total_cmp);
            let q = graph_ir::stats::quantile_nan;
            self.notes.push(format!(
                "run-time spread on {}: each run / its round's median p10 {:.2}, p90 {:.2}, p99 {:.2} alone; {:.2}, {:.2}, {:.2} while {} run(s) too ({} runs each; the simulator draws every piece from it) (measured)",
                self.procs[p].name,
                q(&alone_runs, 0.1),
                q(&alone_runs, 0.9),
                q(&alone_runs, 0.99),
                q(&shared_runs, 0.1),
                q(&shared_runs, 0.9),
                q(&shared_runs, 0.99),
                loaded.join(", "),
                alone_runs.len()
            ));
            self.spread[p] = (
                graph_ir::stats::quantile_grid(&alone_runs, QUANTILES),
                graph_ir::stats::quantile_grid(&shared_runs, QUANTILES),
            );
            let rounds = correlations.len();
            self.correlation[p] = (correlations.iter().sum::<f64>() / rounds.max(1) as f64).clamp(0.0, 0.95);
            self.notes.push(format!(
                "consecutive runs on {}: lag-1 correlation {:.2} (mean over {rounds} rounds; the simulator's draws for a processor follow it, so slow phases span neighbouring pieces) (measured)",
                self.procs[p].name, self.correlation[p]
            ));
            self.notes.push(format!(
                "contention on {}: '{name}' {:.3} ms alone, {:.3} ms while {} run(s) too (medians of {CONTENTION_ROUNDS} alternating rounds of {CONTENTION_RUNS} runs, ratios {lo:.2}-{hi:.2}): x{:.2} (measured)",
                self.procs[p].name,
                median(alone),
                median(shared),
                loaded.join(", "),
                self.factors[p]
            ));
        }
        Ok(())
    }

    /// How late a thread waiting for the next tick wakes after its
    /// deadline, blocked on a channel with a timeout (as `serve`'s driver
    /// waits) or polling (as its self-scheduling workers wait): 200 waits
    /// of 1-5 ms, kept at 20 evenly spaced quantiles.
    fn measure_lag(&mut self) {
        let (_tx, rx) = mpsc::channel::<()>();
        let mut late: Vec<f64> = (0..200)
            .map(|i| {
                let wait = std::time::Duration::from_micros(1000 + 20 * i as u64);
                let t = Instant::now();
                match self.wait {
                    link::Wait::Block => {
                        let _ = rx.recv_timeout(wait);
                    }
                    link::Wait::Poll => {
                        while t.elapsed() < wait && rx.try_recv().is_err() {
                            std::hint::spin_loop();
                        }
                    }
                }
                (t.elapsed().as_secs_f64() - wait.as_secs_f64()).max(0.0) * 1e3
            })
            .collect();
        late.sort_by(f64::total_cmp);
        self.lag = graph_ir::stats::quantile_grid(&late, QUANTILES);
        self.notes.push(format!(
            "driver wake-up for a tick: {:.3} ms late at the median (measured)",
            graph_ir::stats::median_nan(&late)
        ));
    }

    /// Writes the database back (nothing without a file).
    pub fn save(&self) -> Result<()> {
        match &self.path {
            Some(path) => Ok(self.db.save(path)?),
            None => Ok(()),
        }
    }

    /// Forgets every piece's time, so the next request for it times it again.
    pub fn forget_pieces(&mut self) {
        self.memo.clear();
        self.db.pieces.clear();
        self.fresh = None;
    }

    fn time(&mut self, model: usize, nodes: Vec<NodeId>, p: usize) -> Result<f64, String> {
        let (bytes, shapes) = onnx_of(&self.graphs[model], nodes).map_err(|e| e.to_string())?;
        self.ask_time(p, bytes, shapes, RUNS)
    }
}

impl Costs for Measured<'_> {
    fn compute_ms(&mut self, model: usize, layers: &[usize], p: usize) -> Result<f64, CostError> {
        let memo_key = (model, p, layers.to_vec());
        if let Some(ms) = self.known(&memo_key) {
            return Ok(ms);
        }
        let nodes = self.nodes(model, layers);
        let (model_name, processor) = (self.graphs[model].name.clone(), self.procs[p].name.clone());
        let cost_error = move |reason| CostError::Cost {
            model: model_name,
            processor,
            reason,
        };
        if let Some(fresh) = self.fresh.take() {
            let timed = self.time(model, nodes, p);
            let fresh = self.fresh.insert(fresh);
            let ms = timed.map_err(cost_error)?;
            self.retimed += 1;
            fresh.insert(memo_key, ms);
            return Ok(ms);
        }
        let key = key(&self.graphs[model], &nodes, &self.procs[p], "");
        let ms = match self.db.pieces.get(&key) {
            Some(ms) => {
                self.reused += 1;
                *ms
            }
            None => {
                let ms = self.time(model, nodes, p).map_err(cost_error)?;
                self.measured += 1;
                self.db.pieces.insert(key, ms);
                ms
            }
        };
        self.memo.insert(memo_key, ms);
        Ok(ms)
    }

    /// While re-timing ([`Costs::retime`]) or without a database (`serve
    /// --retime`), the plan's pieces not timed yet are timed per processor
    /// together, as served: each once per round, the round as long as the
    /// shortest period among them (back to back where none is periodic);
    /// [`RETIMINGS`] times in turn over the processors, each piece taking
    /// the median of its timings' medians, so that a stall of the machine
    /// during one timing (tens of ms at a camera's period) does not become
    /// the plan's figure.
    /// During the search (a database, not re-timing) each piece is timed on
    /// its own, back to back, when first asked for.
    fn prefetch(&mut self, wanted: &[Wanted]) -> Result<(), CostError> {
        if self.fresh.is_none() && self.path.is_some() {
            return Ok(());
        }
        let mut by_processor: BTreeMap<usize, Vec<&Wanted>> = BTreeMap::new();
        for w in wanted {
            if self.known(&(w.model, w.processor, w.layers.clone())).is_none() {
                by_processor.entry(w.processor).or_default().push(w);
            }
        }
        let cost_error = |b: &Batch, reason: String| CostError::Cost {
            model: b.models.clone(),
            processor: self.procs[b.processor].name.clone(),
            reason,
        };
        let mut batches = Vec::with_capacity(by_processor.len());
        for (processor, wanted) in by_processor {
            let mut names: Vec<&str> = wanted.iter().map(|w| self.graphs[w.model].name.as_str()).collect();
            names.dedup();
            let round = wanted.iter().filter_map(|w| w.period_ms).fold(f64::INFINITY, f64::min);
            let mut b = Batch {
                processor,
                models: names.join(", "),
                pieces: Vec::with_capacity(wanted.len()),
                round_ms: if round.is_finite() { round } else { 0.0 },
                timings: Vec::with_capacity(RETIMINGS),
                wanted,
            };
            for w in &b.wanted {
                let nodes = self.nodes(w.model, &w.layers);
                let piece = onnx_of(&self.graphs[w.model], nodes).map_err(|e| cost_error(&b, e.to_string()))?;
                b.pieces.push(piece);
            }
            batches.push(b);
        }
        for _ in 0..RETIMINGS {
            for b in &mut batches {
                let times = self
                    .ask_cadence(b.processor, b.pieces.clone(), RUNS, b.round_ms)
                    .map_err(|reason| cost_error(b, reason))?;
                b.timings.push(times);
            }
        }
        for b in batches {
            for (w, ms) in b.wanted.into_iter().zip(combine_timings(b.timings)) {
                let key = (w.model, w.processor, w.layers.clone());
                match &mut self.fresh {
                    Some(fresh) => {
                        fresh.insert(key, ms);
                        self.retimed += 1;
                    }
                    None => {
                        self.memo.insert(key, ms);
                        self.measured += 1;
                    }
                }
            }
        }
        Ok(())
    }

    fn comm_ms(&mut self, from: usize, to: usize, bytes: u64) -> Result<f64, CostError> {
        Ok(self.links.get(&(from, to)).map_or(0.0, |f| f.us(bytes).max(0.0) / 1e3))
    }

    fn notes(&self) -> Vec<String> {
        let mut n = self.notes.clone();
        n.push(match &self.path {
            Some(path) => format!(
                "pieces: {} measured now, {} taken from {} (median of {RUNS} runs each)",
                self.measured,
                self.reused,
                path.display()
            ),
            None => format!(
                "pieces: {} measured now (each the median of {RETIMINGS} timings of {RUNS} runs)",
                self.measured
            ),
        });
        if self.retimed > 0 {
            n.push(format!(
                "pieces timed again after the search: {} (kept out of the database; each plan's pieces together per processor, once per period of their group, as served; the median of {RETIMINGS} such timings of {RUNS} runs each)",
                self.retimed
            ));
        }
        n
    }

    fn retime(&mut self) -> bool {
        self.fresh = Some(HashMap::new());
        true
    }

    fn shared_factor(&self, p: usize) -> f64 {
        self.factors.get(p).copied().unwrap_or(1.0)
    }

    /// The mean measured latency of a small hand-off, twice where a
    /// scheduling thread hands each piece to its worker and takes the
    /// result back, once where the workers schedule themselves.
    fn dispatch_ms(&self) -> f64 {
        let n = self.links.len().max(1) as f64;
        let times = match self.wait {
            link::Wait::Block => 2.0,
            link::Wait::Poll => 1.0,
        };
        times * self.links.values().map(|f| f.small.latency_us).sum::<f64>() / n / 1e3
    }

    fn arrival_lag_ms(&self) -> Vec<f64> {
        self.lag.clone()
    }

    fn spread(&self, p: usize) -> (Vec<f64>, Vec<f64>) {
        self.spread.get(p).cloned().unwrap_or_default()
    }

    fn spread_correlation(&self, p: usize) -> f64 {
        self.correlation.get(p).copied().unwrap_or(0.0)
    }

    fn finish(&mut self) -> Result<(), String> {
        self.save().map_err(|e| e.to_string())
    }
}
