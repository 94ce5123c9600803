//! `serve` and `simulate` of a workload with a rendering task (Heimdall,
//! MobiCom '20): models cut into chunks per policy, the render task on its
//! processor, and the rendering and per-app latency tables.

use crate::multi_common as mc;
use anyhow::{Context, Result, bail};
use graph_ir::Graph;
use multi_dnn::ModelUnits;
use multi_dnn::Registry;
use multi_dnn::core::estimator::{Estimator, EstimatorParams};
use multi_dnn::core::report::{RenderReport, Report, RunLog, quantile_or_zero};
use multi_dnn::core::workload::{Render, Workload};
use multi_dnn::heimdall::{ChunkMode, ChunkReport, RenderSpec, chunk_estimates, chunk_model};
use std::fmt::Write as _;

/// Render workloads take only the policies that need a render task, other
/// workloads none of them.
pub fn check_policies(w: &Workload, policies: &[String]) -> Result<()> {
    let render_names = Registry::builtin().render_names();
    for p in policies {
        let heimdall = render_names.contains(&p.as_str());
        if w.render.is_some() && !heimdall {
            bail!(
                "{}: policy '{p}' does not know the workload's render task; use one of {}",
                w.file,
                render_names.join(", ")
            );
        }
        if w.render.is_none() && heimdall {
            bail!(
                "{}: policy '{p}' needs a render task ([render] in the workload)",
                w.file
            );
        }
        if p.ends_with("-offload") && w.render.as_ref().is_some_and(|r| r.offload_to.is_none()) {
            bail!(
                "{}: policy '{p}' needs render.offload_to, the processor to offload to",
                w.file
            );
        }
    }
    Ok(())
}

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
) -> Result<Chunked> {
    let mut units = Vec::new();
    let mut reports = Vec::new();
    let mut estimates = Vec::new();
    for (g, ops) in graphs.iter().zip(op_ms) {
        let (u, rep) =
            chunk_model(g, names, ops, render, mode).with_context(|| format!("cannot chunk '{}'", g.name))?;
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

/// One line per (model, processor) of a chunking.
pub fn chunk_lines(c: &Chunked, budget_ms: f64, margin_ms: f64) -> String {
    let mut s = String::new();
    let what = match c.mode {
        ChunkMode::Whole => "whole models".to_string(),
        ChunkMode::Ops(k) => format!("chunks of {k} operators"),
        ChunkMode::Budget => format!("Heimdall chunks (budget {budget_ms:.2} ms + margin {margin_ms:.1} ms)"),
    };
    let _ = writeln!(s, "{what}:");
    for r in &c.reports {
        let _ = write!(
            s,
            "  {} on {}: {} operators, {:.2} ms estimated, {} chunk(s), longest {:.2} ms",
            r.model, r.processor, r.operators, r.total_ms, r.chunks, r.longest_chunk_ms
        );
        if c.mode == ChunkMode::Budget && r.greedy_chunks != r.chunks {
            let _ = write!(s, " (greedy cut: {} chunks)", r.greedy_chunks);
        }
        for (op, ms) in &r.oversized {
            let _ = write!(
                s,
                "; operator '{op}' alone takes {ms:.2} ms, over the budget: a chunk by itself"
            );
        }
        s.push('\n');
    }
    s
}

/// The report of one run with its rendering summary.
pub fn report(
    kind: &'static str,
    policy: &str,
    w: &Workload,
    slo: &[Option<f64>],
    names: &[String],
    log: &RunLog,
) -> Report {
    let mut rep = mc::report_for(kind, policy, w, slo, names, log);
    if let Some(r) = &w.render {
        let duration = w.duration_s.map_or(log.end_ms, |d| d * 1e3);
        rep.render = Some(RenderReport::new(log, &r.processor, r.fps, duration));
    }
    rep
}

/// Rendering and per-app latency, one row per (policy, multiplier).
pub fn table(rows: &[(Option<f64>, Report)]) -> String {
    let mut s = String::new();
    let Some((_, first)) = rows.first() else { return s };
    let _ = write!(
        s,
        "{:<26} {:>10} {:>11} {:>8} {:>10}",
        "policy", "render fps", "worst 1/3s", "dropped", "late max"
    );
    for a in &first.apps {
        let _ = write!(s, " {:>22}", format!("{} mean/max ms", a.name));
    }
    let _ = writeln!(s, " {:>8} {:>6}", "SLO met", "moves");
    for (_, r) in rows {
        let Some(rr) = &r.render else { continue };
        let _ = write!(
            s,
            "{:<26} {:>10.2} {:>11.1} {:>8} {:>7.1} ms",
            r.policy, rr.fps_mean, rr.fps_worst_window, rr.dropped, rr.late_max_ms
        );
        for a in &r.apps {
            let _ = write!(s, " {:>22}", format!("{:.0} / {:.0}", a.mean_ms, a.max_ms));
        }
        let _ = writeln!(s, " {:>7.1}% {:>6}", r.slo_satisfaction, r.moves.len());
    }
    s
}

/// Median ms of the coordinator's work per chunk in `log`: its decision
/// time plus the hand-off to the worker and back.
pub fn overhead_line(log: &RunLog) -> String {
    let d = quantile_or_zero(&log.decision_us, 0.5);
    let h = quantile_or_zero(&log.dispatch_overhead_ms, 0.5) * 1e3;
    format!(
        "coordinator overhead per chunk: decision p50 {d:.1} µs + hand-off p50 {h:.1} µs = {:.1} µs",
        d + h
    )
}
