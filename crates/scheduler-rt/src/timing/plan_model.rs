//! Device-in-the-loop costs for `stretch plan --measure-on RUNTIME.toml`:
//! a [`LatencyModel`] that compiles every subgraph the plan search asks
//! about on its processor's engine (from a runtime configuration) and
//! times it on that processor's cores, instead of predicting it. A stage's
//! branch options, announced through [`LatencyModel::prepare`], are timed
//! together: round-robin on each processor (each option once per round, as
//! a model's subgraphs follow each other) and on every processor at once
//! (as the branches of a stage run), so that a change of the machine's
//! speed falls on all options alike. Times are medians of [`RUNS`] runs,
//! kept in a JSON database keyed by the subgraph's structure and the
//! processor's engine, threads and cores (the format of `analyze
//! --cost-db`); a subgraph timed once is not timed again. Hand-offs between
//! processors come from the device profile's link figures.

use super::TimingError;
use super::cost_db::{Db, key};
use super::piece::{Job, onnx_of, timer};
use crate::{EngineFactory, ProcessorConfig};
use graph_ir::{Graph, NodeId};
use predictor::{LatencyModel, PredictError, Prediction};
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};

/// Timed runs per subgraph (after two warm-ups); the median is kept.
pub const RUNS: usize = 10;

/// What the database's keys of this timing method end with (a subgraph
/// timed among its model's others, without the cache flush of `analyze`'s
/// pieces, which run between other models' pieces).
const METHOD: &str = "+plan";

struct State {
    db: Db,
    /// Keys timed in this run.
    fresh: std::collections::HashSet<String>,
    measured: usize,
    reused: usize,
}

/// Subgraph times measured on a runtime configuration's processors.
pub struct MeasuredModel<'a> {
    base: &'a dyn LatencyModel,
    procs: Vec<ProcessorConfig>,
    timers: Vec<mpsc::Sender<Job>>,
    runtime: String,
    path: Option<PathBuf>,
    state: RefCell<State>,
    progress: Box<dyn Fn(usize, usize)>,
}

impl<'a> MeasuredModel<'a> {
    /// Times on the processors of `runtime` (a runtime configuration file,
    /// read as `procs`), each with its engine from `engines`, with hand-offs
    /// from `base`, which must know every one of them by name. `db`: the
    /// database to read and extend (`None`: nothing kept). `progress` hears
    /// (subgraphs timed now, subgraphs read from the database) as they grow.
    pub fn new(
        base: &'a dyn LatencyModel,
        runtime: &Path,
        procs: Vec<ProcessorConfig>,
        engines: Arc<EngineFactory>,
        db: Option<&Path>,
        progress: Box<dyn Fn(usize, usize)>,
    ) -> Result<Self, TimingError> {
        let known = base.processors();
        if let Some(p) = procs.iter().find(|p| !known.contains(&p.name)) {
            return Err(TimingError::UnknownProcessor {
                runtime: runtime.display().to_string(),
                processor: p.name.clone(),
                device: base.device().to_string(),
                known: known.join(", "),
            });
        }
        let db_state = Db::open(db)?;
        Ok(MeasuredModel {
            base,
            timers: procs.iter().map(|p| timer(p, engines.clone())).collect(),
            procs,
            runtime: runtime.display().to_string(),
            path: db.map(Path::to_path_buf),
            state: RefCell::new(State {
                db: db_state,
                fresh: Default::default(),
                measured: 0,
                reused: 0,
            }),
            progress,
        })
    }

    /// Subgraphs timed now, and those the database already had.
    pub fn counts(&self) -> (usize, usize) {
        let s = self.state.borrow();
        (s.measured, s.reused)
    }

    /// Writes the database back (when there is one).
    pub fn finish(&self) -> Result<(), TimingError> {
        match &self.path {
            Some(path) => self.state.borrow().db.save(path),
            None => Ok(()),
        }
    }

    fn index(&self, processor: &str) -> Result<usize, PredictError> {
        self.procs
            .iter()
            .position(|p| p.name == processor)
            .ok_or_else(|| PredictError::Measure {
                graph: String::new(),
                processor: processor.to_string(),
                reason: format!(
                    "not a processor of {} (it has {})",
                    self.runtime,
                    self.procs
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }

    fn key(&self, g: &Graph, nodes: &[NodeId], p: usize) -> String {
        key(g, nodes, &self.procs[p], METHOD)
    }

    /// Keeps a subgraph's time, timed in this run.
    fn record(&self, key: String, ms: f64) {
        let mut s = self.state.borrow_mut();
        s.db.pieces.insert(key.clone(), ms);
        s.fresh.insert(key);
        s.measured += 1;
    }

    fn tick(&self) {
        let (measured, reused) = self.counts();
        (self.progress)(measured, reused);
    }

    fn error(&self, g: &Graph, p: usize, reason: String) -> PredictError {
        PredictError::Measure {
            graph: g.name.clone(),
            processor: self.procs[p].name.clone(),
            reason,
        }
    }

    /// `nodes` of `g` as ONNX bytes and input shapes, weights without data
    /// (structure-only models, branch options) filled with seeded values.
    fn onnx(&self, g: &Graph, nodes: Vec<NodeId>, p: usize) -> Result<(Vec<u8>, Vec<Vec<usize>>), PredictError> {
        let mut filled = g.clone();
        filled.fill_missing_weights(1);
        onnx_of(&filled, nodes).map_err(|e| self.error(g, p, e.to_string()))
    }

    /// Sends `job` to processor `p`'s timing thread.
    fn send(&self, p: usize, job: Job) -> Result<(), String> {
        self.timers[p]
            .send(job)
            .map_err(|_| format!("the timing thread of {} stopped", self.procs[p].name))
    }
}

impl LatencyModel for MeasuredModel<'_> {
    fn device(&self) -> &str {
        self.base.device()
    }

    fn processors(&self) -> Vec<String> {
        self.procs.iter().map(|p| p.name.clone()).collect()
    }

    fn predict(&self, g: &Graph, nodes: &[NodeId], processor: &str) -> Result<Prediction, PredictError> {
        let p = self.index(processor)?;
        let nodes = g.computing(nodes.iter().copied());
        let total_ms = if nodes.is_empty() {
            0.0
        } else {
            let key = self.key(g, &nodes, p);
            let known = self.state.borrow().db.pieces.get(&key).copied();
            match known {
                Some(ms) => {
                    let mut s = self.state.borrow_mut();
                    if !s.fresh.contains(&key) {
                        s.reused += 1;
                    }
                    ms
                }
                None => {
                    let (bytes, shapes) = self.onnx(g, nodes, p)?;
                    let (tx, rx) = mpsc::channel();
                    self.send(p, Job::Time(bytes, shapes, RUNS, tx))
                        .map_err(|e| self.error(g, p, e))?;
                    let times = rx
                        .recv()
                        .map_err(|_| self.error(g, p, "the timing thread stopped".into()))?
                        .map_err(|e| self.error(g, p, e))?;
                    let ms = graph_ir::stats::median_nan(&times);
                    self.record(key, ms);
                    ms
                }
            }
        };
        self.tick();
        Ok(Prediction {
            processor: processor.to_string(),
            total_ms,
            subgraph_overhead_ms: 0.0,
            kernels: Vec::new(),
            calibration: None,
        })
    }

    fn comm_ms(&self, from: &str, to: &str, bytes: u64) -> Result<f64, PredictError> {
        self.base.comm_ms(from, to, bytes)
    }

    fn provenance(&self) -> String {
        format!(
            "measured on this machine: every subgraph compiled on its processor's engine of {} and timed on its cores (median of {RUNS} runs; a stage's branch options timed together, round-robin, on every processor at once); hand-offs from device `{}`'s link figures (predicted)",
            self.runtime,
            self.base.device()
        )
    }

    /// Times the graphs not in the database yet: on each processor
    /// round-robin, [`RUNS`] rounds after two warm-up rounds, every
    /// processor at once.
    fn prepare(&self, graphs: &[&Graph], processors: &[String]) -> Result<(), PredictError> {
        let mut asked = Vec::new();
        for name in processors {
            let p = self.index(name)?;
            let mut keys = Vec::new();
            let mut pieces = Vec::new();
            for g in graphs {
                let nodes = g.compute_order()?;
                if nodes.is_empty() {
                    continue;
                }
                let key = self.key(g, &nodes, p);
                if self.state.borrow().db.pieces.contains_key(&key) || keys.contains(&key) {
                    continue;
                }
                pieces.push(self.onnx(g, nodes, p)?);
                keys.push(key);
            }
            if pieces.is_empty() {
                continue;
            }
            let (tx, rx) = mpsc::channel();
            self.send(p, Job::Cadence(pieces, RUNS, 0.0, tx))
                .map_err(|e| self.error(graphs[0], p, e))?;
            asked.push((p, keys, rx));
        }
        for (p, keys, rx) in asked {
            let times = rx
                .recv()
                .map_err(|_| self.error(graphs[0], p, "the timing thread stopped".into()))?
                .map_err(|e| self.error(graphs[0], p, e))?;
            for (key, runs) in keys.into_iter().zip(times) {
                self.record(key, graph_ir::stats::median_nan(&runs));
            }
            self.tick();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::builder::{Builder, ConvSpec};
    use predictor::DeviceModel;

    /// `n` 3x3 convolutions of 64 channels at 28x28, one after the other.
    fn convs(n: usize) -> Graph {
        let mut b = Builder::new(&format!("convs{n}"));
        let mut y = b.input("x", &[1, 64, 28, 28]).unwrap();
        for i in 0..n {
            y = b.conv(&format!("c{i}"), y, ConvSpec::new(64, 3, 1)).unwrap();
        }
        b.finish("y", y).unwrap()
    }

    fn measured<'a>(
        base: &'a DeviceModel,
        runtime: &str,
        procs: Vec<ProcessorConfig>,
        db: Option<&Path>,
    ) -> Result<MeasuredModel<'a>, TimingError> {
        let engines = crate::default_factory();
        MeasuredModel::new(base, Path::new(runtime), procs, engines, db, Box::new(|_, _| {}))
    }

    fn host() -> DeviceModel {
        DeviceModel::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/devices/host.toml")).unwrap()
    }

    #[test]
    fn subgraphs_are_timed_on_the_engine_and_kept_by_structure() {
        let base = host();
        let procs = vec!["cpu0=inline:core0".parse::<ProcessorConfig>().unwrap()];
        let dir = std::env::temp_dir().join(format!("stretch-plan-measure-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("db.json");
        let m = measured(&base, "test.toml", procs.clone(), Some(&db)).unwrap();
        let (small, large) = (convs(1), convs(4));
        m.prepare(&[&small, &large], &["cpu0".into()]).unwrap();
        assert_eq!(m.counts(), (2, 0), "both timed together");
        let s = m.predict_graph(&small, "cpu0").unwrap().total_ms;
        let l = m.predict_graph(&large, "cpu0").unwrap().total_ms;
        assert!(l > 2.0 * s, "4x the work took {l:.3} ms against {s:.3} ms");
        let again = m.predict_graph(&convs(4), "cpu0").unwrap().total_ms;
        assert_eq!(again, l, "the same structure is not timed again");
        assert_eq!(m.counts(), (2, 0));
        assert!(m.provenance().starts_with("measured on this machine"));
        m.finish().unwrap();
        let reopened = measured(&base, "test.toml", procs, Some(&db)).unwrap();
        assert_eq!(reopened.predict_graph(&large, "cpu0").unwrap().total_ms, l);
        assert_eq!(reopened.counts(), (0, 1), "read from the database");
        let e = reopened.predict_graph(&large, "npu").unwrap_err().to_string();
        assert!(e.contains("`npu`: not a processor of test.toml (it has cpu0)"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_processor_the_device_lacks_is_named() {
        let base = host();
        let procs = vec!["npu0=inline:core0".parse::<ProcessorConfig>().unwrap()];
        let e = measured(&base, "rt.toml", procs, None).err().unwrap().to_string();
        assert!(
            e.contains("rt.toml: processor `npu0` is not in device `host`'s profile"),
            "{e}"
        );
    }
}
