//! What a serve or simulate run reports: per app, in total, per processor.

use crate::core::sections::{LogSection, LogSections, Place, Section, Sections};
use crate::core::{Completed, Dropped, Frame, JobId};
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
    /// Jobs the policy dropped as too late (workloads with `drop_late`).
    pub dropped: Vec<Dropped>,
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
    /// Processors taken away and brought back during the run.
    pub outages: Vec<Outage>,
    /// Per finished subgraph, the driver's ms around the engine's: from
    /// the hand-off to the worker to its start, and from its end to the
    /// scheduler hearing of it.
    pub dispatch_overhead_ms: Vec<f64>,
    /// Per submitted job, ms from its arrival time to the scheduler
    /// submitting it (the driver waking up late); with self-scheduling
    /// workers, from the later of its arrival and the first moment a worker
    /// was idle to take it in.
    pub arrival_lag_ms: Vec<f64>,
    /// Why the scheduling thread ran at its normal priority, where raising
    /// it failed ([`scheduler_rt::priority::raise_current_thread`]).
    pub priority_error: Option<String>,
    /// Frames of the rendering task that ran, and ticks of those dropped.
    pub frames: Vec<Frame>,
    pub dropped_frames: Vec<f64>,
    /// Models the policy moved between processors: (ms, model, worker).
    pub moves: Vec<(f64, usize, usize)>,
    /// What the run's extensions recorded, by type.
    pub sections: LogSections,
}

impl RunLog {
    /// Appends a later run of the same workload, its times shifted by
    /// `offset_ms` (so the two read as one run of the summed duration).
    pub fn append(&mut self, mut other: RunLog, offset_ms: f64) {
        for c in &mut other.completed {
            c.spec.arrival_ms += offset_ms;
            c.finish_ms += offset_ms;
        }
        for s in &mut other.spans {
            s.start_ms += offset_ms;
            s.end_ms += offset_ms;
        }
        for o in &mut other.outages {
            o.down_ms += offset_ms;
            o.up_ms = o.up_ms.map(|u| u + offset_ms);
        }
        if self.submitted.len() < other.submitted.len() {
            self.submitted.resize(other.submitted.len(), 0);
        }
        for (a, b) in self.submitted.iter_mut().zip(&other.submitted) {
            *a += b;
        }
        self.completed.append(&mut other.completed);
        self.spans.append(&mut other.spans);
        self.outages.append(&mut other.outages);
        self.sections.append(std::mem::take(&mut other.sections), offset_ms);
        self.frames_done += other.frames_done;
        self.end_ms = self.end_ms.max(other.end_ms + offset_ms);
        self.decision_us.append(&mut other.decision_us);
        self.outputs_checked += other.outputs_checked;
        self.mismatches += other.mismatches;
        self.dispatch_overhead_ms.append(&mut other.dispatch_overhead_ms);
        self.arrival_lag_ms.append(&mut other.arrival_lag_ms);
        self.priority_error = self.priority_error.take().or(other.priority_error);
        for f in &mut other.frames {
            f.tick_ms += offset_ms;
            f.start_ms += offset_ms;
            f.end_ms += offset_ms;
        }
        self.frames.append(&mut other.frames);
        self.dropped_frames
            .extend(other.dropped_frames.iter().map(|t| t + offset_ms));
        self.moves
            .extend(other.moves.iter().map(|(t, m, w)| (t + offset_ms, *m, *w)));
    }

    /// The record of type `T` an extension made, if any.
    pub fn section<T: LogSection>(&self) -> Option<&T> {
        self.sections.get()
    }

    /// The record of type `T`, made empty if there is none yet.
    pub fn section_mut<T: LogSection>(&mut self) -> &mut T {
        self.sections.get_mut()
    }

    /// Records that `worker` went away (`up` false) or came back at `now`.
    pub fn outage(&mut self, worker: usize, up: bool, now: f64) {
        if !up {
            self.outages.push(Outage {
                worker,
                down_ms: now,
                up_ms: None,
            });
        } else if let Some(o) = self
            .outages
            .iter_mut()
            .rev()
            .find(|o| o.worker == worker && o.up_ms.is_none())
        {
            o.up_ms = Some(now);
        }
    }
}

/// A processor that went away at `down_ms` and came back at `up_ms`
/// (`None`: still away when the run ended).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outage {
    pub worker: usize,
    pub down_ms: f64,
    pub up_ms: Option<f64>,
}

/// How a run went through one outage.
#[derive(Clone, Debug, Serialize)]
pub struct OutageReport {
    pub processor: String,
    pub down_s: f64,
    pub up_s: Option<f64>,
    /// From the processor's return to the start of its first subgraph.
    pub resumed_after_ms: Option<f64>,
    /// Completed requests per second in the 5 s before the outage (or since
    /// the start), during it, and in the first second after it.
    pub before_rps: f64,
    pub during_rps: f64,
    pub after_rps: Option<f64>,
    /// Back in use within 1 s and the first second after it completed at
    /// least 90% of the rate before the outage.
    pub recovered_within_1s: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct AppReport {
    pub name: String,
    pub slo_ms: Option<f64>,
    pub requests: usize,
    pub completed: usize,
    /// Dropped as too late (`drop_late`), counted as violations.
    pub dropped: usize,
    /// Share of completed requests that met their SLO, percent.
    pub slo_satisfaction: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
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
    /// Requests submitted and neither completed nor dropped (0 unless a
    /// run was cut short).
    pub lost: usize,
    /// Requests dropped as too late (`drop_late`), counted as violations.
    pub dropped: usize,
    /// Share of all completed requests that met their SLO, percent.
    pub slo_satisfaction: f64,
    /// Requests completed within the run's duration per second of it: a
    /// backlog drained after the end does not count.
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
    pub outages: Vec<OutageReport>,
    /// What extensions add ([`Report::add`]), each under its key.
    #[serde(flatten)]
    pub sections: Sections,
}

/// Completed requests per second of `log` finishing in `[from, to)` ms.
fn rate(log: &RunLog, from: f64, to: f64) -> f64 {
    if to <= from {
        return 0.0;
    }
    let n = log
        .completed
        .iter()
        .filter(|c| c.finish_ms >= from && c.finish_ms < to)
        .count();
    n as f64 / ((to - from) / 1e3)
}

fn outage_report(log: &RunLog, o: &Outage, workers: &[String]) -> OutageReport {
    let before_rps = rate(log, (o.down_ms - 5e3).max(0.0), o.down_ms);
    let during_rps = rate(log, o.down_ms, o.up_ms.unwrap_or(log.end_ms));
    let resumed_after_ms = o.up_ms.and_then(|up| {
        log.spans
            .iter()
            .filter(|s| s.worker == o.worker && s.start_ms >= up)
            .map(|s| s.start_ms - up)
            .min_by(f64::total_cmp)
    });
    let after_rps = o.up_ms.map(|up| rate(log, up, up + 1e3));
    OutageReport {
        processor: workers.get(o.worker).cloned().unwrap_or_else(|| o.worker.to_string()),
        down_s: o.down_ms / 1e3,
        up_s: o.up_ms.map(|u| u / 1e3),
        resumed_after_ms,
        before_rps,
        during_rps,
        after_rps,
        recovered_within_1s: resumed_after_ms.is_some_and(|r| r <= 1e3)
            && after_rps.is_some_and(|a| a >= 0.9 * before_rps),
    }
}

/// The `q`-quantile of `v` by the one rule ([`graph_ir::stats::quantile`]);
/// 0 for an empty slice, as reports print it.
pub fn quantile_or_zero(v: &[f64], q: f64) -> f64 {
    graph_ir::stats::quantile(v, q).unwrap_or(0.0)
}

/// Per app of `apps` (name, SLO): its requests and latencies in `log`.
fn app_reports(apps: &[(String, Option<f64>)], log: &RunLog) -> Vec<AppReport> {
    apps.iter()
        .enumerate()
        .map(|(i, (name, slo))| {
            let done: Vec<&Completed> = log.completed.iter().filter(|c| c.spec.app == i).collect();
            let lat: Vec<f64> = done.iter().map(|c| c.latency_ms()).collect();
            let met = done.iter().filter(|c| c.met_slo()).count();
            let dropped = log.dropped.iter().filter(|d| d.spec.app == i).count();
            AppReport {
                name: name.clone(),
                slo_ms: *slo,
                requests: log.submitted.get(i).copied().unwrap_or(0),
                completed: done.len(),
                dropped,
                slo_satisfaction: if done.len() + dropped == 0 {
                    0.0
                } else {
                    100.0 * met as f64 / (done.len() + dropped) as f64
                },
                p50_ms: quantile_or_zero(&lat, 0.5),
                p99_ms: quantile_or_zero(&lat, 0.99),
                mean_ms: if lat.is_empty() {
                    0.0
                } else {
                    lat.iter().sum::<f64>() / lat.len() as f64
                },
                max_ms: lat.iter().copied().fold(0.0, f64::max),
            }
        })
        .collect()
}

/// Busy share (percent) of each of `workers` over `span_end` ms.
fn utilisation(log: &RunLog, workers: &[String], span_end: f64) -> Vec<(String, f64)> {
    workers
        .iter()
        .enumerate()
        .map(|(w, n)| {
            let busy: f64 = log
                .spans
                .iter()
                .filter(|s| s.worker == w)
                .fold(0.0, |a, s| a + (s.end_ms - s.start_ms));
            (n.clone(), 100.0 * busy / span_end)
        })
        .collect()
}

/// Requests completed in each second of `span_end` ms.
fn per_second(log: &RunLog, span_end: f64) -> Vec<usize> {
    let mut per_second = vec![0usize; (span_end / 1e3).ceil() as usize];
    for c in &log.completed {
        let b = ((c.finish_ms / 1e3) as usize).min(per_second.len().saturating_sub(1));
        if let Some(x) = per_second.get_mut(b) {
            *x += 1;
        }
    }
    per_second
}

impl Report {
    /// Summarises `log` over `duration_ms` (the arrival window, or the
    /// run's length), with no section ([`Report::add`]).
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
        let requests: usize = log.submitted.iter().sum();
        let completed = log.completed.len();
        let met = log.completed.iter().filter(|c| c.met_slo()).count();
        let dropped = log.dropped.len();
        let span_end = log.end_ms.max(duration_ms);
        Report {
            kind,
            policy: policy.to_string(),
            duration_s: duration_ms / 1e3,
            apps: app_reports(apps, log),
            requests,
            completed,
            lost: requests - (completed + dropped).min(requests),
            dropped,
            slo_satisfaction: if completed + dropped == 0 {
                0.0
            } else {
                100.0 * met as f64 / (completed + dropped) as f64
            },
            throughput_rps: log.completed.iter().filter(|c| c.finish_ms <= duration_ms).count() as f64
                / (duration_ms / 1e3),
            fps: has_frames.then(|| log.frames_done as f64 / (duration_ms / 1e3)),
            utilisation: utilisation(log, workers, span_end),
            decision_p50_us: quantile_or_zero(&log.decision_us, 0.5),
            decision_p99_us: quantile_or_zero(&log.decision_us, 0.99),
            per_second: per_second(log, span_end),
            outputs_checked: log.outputs_checked,
            mismatches: log.mismatches,
            outages: log.outages.iter().map(|o| outage_report(log, o, workers)).collect(),
            sections: Sections::default(),
        }
    }

    /// Adds `section` after those added before.
    pub fn add(&mut self, section: impl Section) {
        self.sections.push(section);
    }

    /// The section of type `T`, if one was added.
    pub fn section<T: Section>(&self) -> Option<&T> {
        self.sections.get()
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
            "total: {} requests, {} completed, {} lost; SLO met {:.1}% ({}); throughput {:.2} req/s{}",
            self.requests,
            self.completed,
            self.lost,
            self.slo_satisfaction,
            match self.dropped {
                0 => "violations still ran and are counted".to_string(),
                n => format!("{n} dropped as too late, counted as violations"),
            },
            self.throughput_rps,
            self.fps.map_or(String::new(), |f| format!("; {f:.2} frames/s"))
        );
        s.push_str(&self.sections.text(self, Place::Host));
        s.push_str(&self.sections.text(self, Place::Run));
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
        s.push_str(&self.sections.text(self, Place::Checks));
        for o in &self.outages {
            let back = match (o.up_s, o.resumed_after_ms) {
                (Some(u), Some(r)) => format!("back at {u:.1} s, running again {r:.0} ms later"),
                (Some(u), None) => format!("back at {u:.1} s, not used again"),
                _ => "not back before the end".to_string(),
            };
            let after = o
                .after_rps
                .map_or(String::new(), |a| format!(", {a:.1} in the first second after"));
            let _ = writeln!(
                s,
                "outage of {} at {:.1} s: {back}; completed/s {:.1} before, {:.1} during{after}{}",
                o.processor,
                o.down_s,
                o.before_rps,
                o.during_rps,
                if o.recovered_within_1s {
                    " (recovered within 1 s)"
                } else {
                    " (not recovered within 1 s)"
                }
            );
        }
        s
    }
}

#[cfg(test)]
mod percentile_tests {
    use super::*;
    use crate::core::JobSpec;

    /// The report's p50/p99 are the one rule's ([`graph_ir::stats`]), pinned
    /// on latencies {15, 20, 35, 40, 50} ms: p50 35, p99 40 + 0.96 · 10 =
    /// 49.6 (a nearest-rank p99 would read 50), and the decision time's on
    /// {1, 2, 3, 4} µs: p50 2.5, p99 3 + 0.97 = 3.97.
    #[test]
    fn reports_use_the_one_percentile_rule() {
        let completed = [15.0, 50.0, 20.0, 40.0, 35.0]
            .iter()
            .enumerate()
            .map(|(i, ms)| Completed {
                job: i as u64,
                spec: JobSpec {
                    app: 0,
                    model: 0,
                    arrival_ms: 100.0 * i as f64,
                    slo_ms: None,
                    frame: None,
                    content: 0.0,
                },
                finish_ms: 100.0 * i as f64 + ms,
            })
            .collect();
        let log = RunLog {
            completed,
            submitted: vec![5],
            decision_us: vec![4.0, 1.0, 3.0, 2.0],
            ..RunLog::default()
        };
        let r = Report::new(
            "simulated",
            "lst",
            &[("a".into(), None)],
            &["cpu".into()],
            &log,
            1e3,
            false,
        );
        let a = &r.apps[0];
        assert!((a.p50_ms - 35.0).abs() < 1e-9, "p50 {}", a.p50_ms);
        assert!((a.p99_ms - 49.6).abs() < 1e-9, "p99 {}", a.p99_ms);
        assert!((r.decision_p50_us - 2.5).abs() < 1e-9, "{}", r.decision_p50_us);
        assert!((r.decision_p99_us - 3.97).abs() < 1e-9, "{}", r.decision_p99_us);
        let short = Report::new(
            "simulated",
            "lst",
            &[("a".into(), None)],
            &["cpu".into()],
            &log,
            300.0,
            false,
        );
        assert!(
            (short.throughput_rps - 10.0).abs() < 1e-9,
            "3 of 5 finish within 300 ms: {}",
            short.throughput_rps
        );
    }
}
