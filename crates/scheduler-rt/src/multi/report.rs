//! What a serve or simulate run reports: per app, in total, per processor.

use super::core::{Completed, JobId};
use serde::Serialize;

/// One subgraph run on a worker.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Span {
    pub worker: usize,
    pub app: usize,
    pub job: JobId,
    pub candidate: usize,
    pub start_ms: f64,
    pub end_ms: f64,
    /// False when the processor went away before it finished (the subgraph ran again elsewhere).
    pub counted: bool,
}

/// Everything a run records; [`Report::new`] summarises it.
#[derive(Clone, Debug, Default)]
pub struct RunLog {
    pub completed: Vec<Completed>,
    /// Jobs submitted per app.
    pub submitted: Vec<usize>,
    pub spans: Vec<Span>,
    pub frames_done: u64,
    /// When the last job finished (ms).
    pub end_ms: f64,
    pub decision_us: Vec<f64>,
    /// Outputs compared with the reference, and how many differed.
    pub outputs_checked: usize,
    pub mismatches: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct AppReport {
    pub name: String,
    pub slo_ms: Option<f64>,
    pub requests: usize,
    pub completed: usize,
    /// Share of completed requests that met their SLO, percent.
    pub slo_satisfaction: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `measured` (serve) or `simulated` (simulate).
    pub kind: &'static str,
    pub policy: String,
    pub duration_s: f64,
    pub apps: Vec<AppReport>,
    pub requests: usize,
    pub completed: usize,
    /// Requests submitted and never completed (0 unless a run was cut short).
    pub lost: usize,
    /// Share of all completed requests that met their SLO, percent.
    pub slo_satisfaction: f64,
    pub throughput_rps: f64,
    /// Frames per second of the frame-driven group, if there is one.
    pub fps: Option<f64>,
    /// Busy share of each processor, percent.
    pub utilisation: Vec<(String, f64)>,
    pub decision_p50_us: f64,
    pub decision_p99_us: f64,
    /// Requests completed in each second of the run.
    pub per_second: Vec<usize>,
    pub outputs_checked: usize,
    pub mismatches: usize,
}

/// The `q`-quantile (nearest rank) of `v`; 0 for an empty slice.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    s[i]
}

impl Report {
    /// Summarises `log` over `duration_ms` (the arrival window, or the run's length).
    pub fn new(
        kind: &'static str,
        policy: &str,
        apps: &[(String, Option<f64>)],
        workers: &[String],
        log: &RunLog,
        duration_ms: f64,
        has_frames: bool,
    ) -> Report {
        let duration_ms = duration_ms.max(1e-9);
        let app_reports: Vec<AppReport> = apps
            .iter()
            .enumerate()
            .map(|(i, (name, slo))| {
                let done: Vec<&Completed> = log.completed.iter().filter(|c| c.spec.app == i).collect();
                let lat: Vec<f64> = done.iter().map(|c| c.latency_ms()).collect();
                let met = done.iter().filter(|c| c.met_slo()).count();
                AppReport {
                    name: name.clone(),
                    slo_ms: *slo,
                    requests: log.submitted.get(i).copied().unwrap_or(0),
                    completed: done.len(),
                    slo_satisfaction: if done.is_empty() {
                        0.0
                    } else {
                        100.0 * met as f64 / done.len() as f64
                    },
                    p50_ms: quantile(&lat, 0.5),
                    p99_ms: quantile(&lat, 0.99),
                }
            })
            .collect();
        let requests: usize = log.submitted.iter().sum();
        let completed = log.completed.len();
        let met = log.completed.iter().filter(|c| c.met_slo()).count();
        let span_end = log.end_ms.max(duration_ms);
        let utilisation = workers
            .iter()
            .enumerate()
            .map(|(w, n)| {
                let busy: f64 = log
                    .spans
                    .iter()
                    .filter(|s| s.worker == w)
                    .map(|s| s.end_ms - s.start_ms)
                    .sum();
                (n.clone(), 100.0 * busy / span_end)
            })
            .collect();
        let mut per_second = vec![0usize; (span_end / 1e3).ceil() as usize];
        for c in &log.completed {
            let b = ((c.finish_ms / 1e3) as usize).min(per_second.len().saturating_sub(1));
            if let Some(x) = per_second.get_mut(b) {
                *x += 1;
            }
        }
        Report {
            kind,
            policy: policy.to_string(),
            duration_s: duration_ms / 1e3,
            apps: app_reports,
            requests,
            completed,
            lost: requests - completed.min(requests),
            slo_satisfaction: if completed == 0 {
                0.0
            } else {
                100.0 * met as f64 / completed as f64
            },
            throughput_rps: completed as f64 / (duration_ms / 1e3),
            fps: has_frames.then(|| log.frames_done as f64 / (duration_ms / 1e3)),
            utilisation,
            decision_p50_us: quantile(&log.decision_us, 0.5),
            decision_p99_us: quantile(&log.decision_us, 0.99),
            per_second,
            outputs_checked: log.outputs_checked,
            mismatches: log.mismatches,
        }
    }

    /// A human-readable table.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(s, "policy {} ({}, {:.1} s)", self.policy, self.kind, self.duration_s);
        let _ = writeln!(
            s,
            "{:<14} {:>9} {:>8} {:>9} {:>8} {:>9} {:>9}",
            "app", "SLO ms", "requests", "completed", "SLO met", "p50 ms", "p99 ms"
        );
        for a in &self.apps {
            let slo = a.slo_ms.map_or("-".to_string(), |s| format!("{s:.1}"));
            let _ = writeln!(
                s,
                "{:<14} {:>9} {:>8} {:>9} {:>7.1}% {:>9.2} {:>9.2}",
                a.name, slo, a.requests, a.completed, a.slo_satisfaction, a.p50_ms, a.p99_ms
            );
        }
        let _ = writeln!(
            s,
            "total: {} requests, {} completed, {} lost; SLO met {:.1}% (violations still ran and are counted); throughput {:.2} req/s{}",
            self.requests,
            self.completed,
            self.lost,
            self.slo_satisfaction,
            self.throughput_rps,
            self.fps.map_or(String::new(), |f| format!("; {f:.2} frames/s"))
        );
        let util: Vec<String> = self.utilisation.iter().map(|(n, u)| format!("{n} {u:.0}%")).collect();
        let _ = writeln!(s, "utilisation: {}", util.join(", "));
        let _ = writeln!(
            s,
            "scheduler decision time: p50 {:.1} µs, p99 {:.1} µs",
            self.decision_p50_us, self.decision_p99_us
        );
        if self.outputs_checked > 0 {
            let _ = writeln!(
                s,
                "outputs checked against the whole-model reference: {}, mismatches: {}",
                self.outputs_checked, self.mismatches
            );
        }
        s
    }
}
