//! Serving a workload with a rendering task (Heimdall): the render task as
//! the chunker sees it, every model cut for a chunk mode with estimates
//! from per-operator times, and each app's isolated latency with what
//! chunking costs it, measured on the servers.

use crate::core::estimator::{Estimator, EstimatorParams};
use crate::core::report::quantile_or_zero;
use crate::core::units::ModelUnits;
use crate::core::workload::{Render, Workload};
use crate::heimdall::{ChunkMode, ChunkReport, HeimdallError, RenderSpec, chunk_estimates, chunk_model, chunks_on};
use crate::serve::Server;
use graph_ir::Graph;
use scheduler_rt::RuntimeError;

fn index(names: &[String], p: &str) -> usize {
    names.iter().position(|n| n == p).unwrap_or(0)
}

/// Each app's starting processor: its `processor`, else the render processor.
pub fn homes(w: &Workload, r: &Render, names: &[String]) -> Vec<usize> {
    w.apps
        .iter()
        .map(|a| index(names, a.processor.as_deref().unwrap_or(&r.processor)))
        .collect()
}

/// The render task as the chunker sees it.
pub fn spec(r: &Render, names: &[String]) -> RenderSpec {
    RenderSpec {
        worker: index(names, &r.processor),
        fps: r.fps,
        render_ms: r.render_ms,
        margin_ms: r.margin_ms,
    }
}

/// Models cut for one chunk mode, with estimates from per-operator figures.
pub struct Chunked {
    pub mode: ChunkMode,
    pub units: Vec<ModelUnits>,
    pub estimator: Estimator,
    /// `estimates[model][candidate][processor]` (ms).
    pub estimates: Vec<Vec<Vec<f64>>>,
    pub reports: Vec<ChunkReport>,
}

/// Cuts every model for `mode`; `op_ms[model][processor][op]`.
pub fn chunk_all(
    graphs: &[Graph],
    names: &[String],
    accel: &[bool],
    op_ms: &[Vec<Vec<f64>>],
    render: &RenderSpec,
    mode: ChunkMode,
) -> Result<Chunked, HeimdallError> {
    let mut units = Vec::new();
    let mut reports = Vec::new();
    let mut estimates = Vec::new();
    for (g, ops) in graphs.iter().zip(op_ms) {
        let (u, rep) = chunk_model(g, names, ops, render, mode)?;
        estimates.push(chunk_estimates(&u, ops));
        units.push(u);
        reports.extend(rep);
    }
    let mut estimator = Estimator::new(EstimatorParams::default(), accel, &units);
    for (m, per) in estimates.iter().enumerate() {
        for (c, row) in per.iter().enumerate() {
            for (p, ms) in row.iter().enumerate() {
                if ms.is_finite() {
                    estimator.set(m, c, p, *ms);
                }
            }
        }
    }
    Ok(Chunked {
        mode,
        units,
        estimator,
        estimates,
        reports,
    })
}

/// The chunk sequence of a model on `worker` as (candidate, worker) steps.
fn steps_on(units: &ModelUnits, worker: usize) -> Option<Vec<(usize, usize)>> {
    let chunks = chunks_on(units, 0, worker)?;
    Some(chunks.into_iter().map(|c| (c, worker)).collect())
}

/// What running a model as budget-sized chunks costs against running it
/// whole on the render processor (ms, interleaved runs).
pub struct Overhead {
    pub chunks: usize,
    pub chunks_p50_ms: f64,
    pub chunks_min_ms: f64,
    pub whole_p50_ms: f64,
    pub whole_min_ms: f64,
}

/// An app's isolated p99 (whole model on its home processor) and, where a
/// budget chunking is served, its chunking overhead.
pub struct Isolated {
    pub p99_ms: f64,
    pub overhead: Option<Overhead>,
}

fn missing(what: &str, model: usize) -> RuntimeError {
    RuntimeError::Units {
        model: format!("model {model}"),
        reason: format!("no {what}"),
    }
}

/// Per app, measured with `runs` runs on `setups` (the first chunked
/// whole): its isolated p99 on its home processor (`homes`) and, when a
/// setup chunks for the budget, the chunks against the whole model on the
/// render processor `render_worker`, interleaved.
pub fn isolated(
    setups: &[(Chunked, Server)],
    homes: &[usize],
    render_worker: usize,
    runs: usize,
) -> Result<Vec<Isolated>, RuntimeError> {
    let (whole_c, whole_s) = &setups[0];
    let budget = setups.iter().find(|(c, _)| c.mode == ChunkMode::Budget);
    let mut out = Vec::with_capacity(homes.len());
    for (m, home) in homes.iter().enumerate() {
        let steps = steps_on(&whole_c.units[m], *home).ok_or_else(|| missing("whole-model candidate", m))?;
        let p99_ms = quantile_or_zero(&whole_s.time_steps(m, &steps, runs)?, 0.99);
        let overhead = match budget {
            Some((c, s)) => {
                let chunk_steps = steps_on(&c.units[m], render_worker).ok_or_else(|| missing("chunk sequence", m))?;
                let whole_steps =
                    steps_on(&whole_c.units[m], render_worker).ok_or_else(|| missing("whole-model candidate", m))?;
                let (mut whole, mut chunks) = (Vec::new(), Vec::new());
                for _ in 0..runs {
                    whole.extend(whole_s.time_steps(m, &whole_steps, 1)?);
                    chunks.extend(s.time_steps(m, &chunk_steps, 1)?);
                }
                let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
                Some(Overhead {
                    chunks: chunk_steps.len(),
                    chunks_p50_ms: quantile_or_zero(&chunks, 0.5),
                    chunks_min_ms: min(&chunks),
                    whole_p50_ms: quantile_or_zero(&whole, 0.5),
                    whole_min_ms: min(&whole),
                })
            }
            None => None,
        };
        out.push(Isolated { p99_ms, overhead });
    }
    Ok(out)
}
