//! `serve` and `simulate` of a workload with a rendering task (Heimdall,
//! MobiCom '20): models cut into chunks per policy, the render task on its
//! processor, and the rendering and per-app latency tables.

use anyhow::Result;
use multi_dnn::Registry;
use multi_dnn::core::report::{Report, RunLog, quantile_or_zero};
use multi_dnn::core::workload::Workload;
use multi_dnn::heimdall::ChunkMode;
use multi_dnn::heimdall::report::{Moves, RenderSection};
use multi_dnn::serve::render::{Chunked, Isolated};
use std::fmt::Write as _;

/// Render workloads take only the policies that need a render task, other
/// workloads none of them.
pub fn check_policies(w: &Workload, policies: &[String]) -> Result<()> {
    Ok(multi_dnn::heimdall::check_policies(
        &Registry::builtin().render_names(),
        w,
        policies,
    )?)
}

/// An app's chunking overhead and isolated p99, as lines.
pub fn isolated_lines(app: &str, render_processor: &str, home: &str, i: &Isolated, runs: usize) -> String {
    let mut s = String::new();
    if let Some(o) = &i.overhead {
        let _ = writeln!(
            s,
            "{app}: chunking overhead on {render_processor}: {} chunks back to back p50 {:.2} ms (min {:.2}) vs whole model p50 {:.2} ms (min {:.2}): {:+.1}% at p50 (measured, {runs} interleaved runs)",
            o.chunks,
            o.chunks_p50_ms,
            o.chunks_min_ms,
            o.whole_p50_ms,
            o.whole_min_ms,
            100.0 * (o.chunks_p50_ms / o.whole_p50_ms - 1.0)
        );
    }
    let _ = writeln!(
        s,
        "{app}: isolated p99 on {home} {:.2} ms (whole model, measured)",
        i.p99_ms
    );
    s
}

/// One line per (model, processor) of a chunking; `spill` is where the
/// utility policies start a model with an operator over the budget.
pub fn chunk_lines(c: &Chunked, budget_ms: f64, margin_ms: f64, spill: Option<&str>) -> String {
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
            let _ = write!(s, "; operator '{op}' alone takes {ms:.2} ms, over the budget");
        }
        if !r.oversized.is_empty() {
            match spill {
                Some(p) => {
                    let _ = write!(s, ": the utility policies start {} on {p}", r.model);
                }
                None => s.push_str(": a chunk by itself, frames drop while it runs (set render.offload_to)"),
            }
        }
        s.push('\n');
    }
    s
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
        let Some(rr) = r.section::<RenderSection>().and_then(|s| s.0.as_ref()) else {
            continue;
        };
        let _ = write!(
            s,
            "{:<26} {:>10.2} {:>11.1} {:>8} {:>7.1} ms",
            r.policy, rr.fps_mean, rr.fps_worst_window, rr.dropped, rr.late_max_ms
        );
        for a in &r.apps {
            let _ = write!(s, " {:>22}", format!("{:.0} / {:.0}", a.mean_ms, a.max_ms));
        }
        let _ = writeln!(
            s,
            " {:>7.1}% {:>6}",
            r.slo_satisfaction,
            r.section::<Moves>().map_or(0, |m| m.0.len())
        );
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
