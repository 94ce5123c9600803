//! The rendering task's summary of a run (Heimdall §9): frames per second,
//! the worst 1/3-s window, lateness and how long frames ran against the
//! frame time the workload asked for; and the report sections Heimdall
//! adds: the rendering task and the models offloading moved.

use crate::core::report::{Report, RunLog, quantile_or_zero};
use crate::core::sections::{Place, Section};
use crate::core::workload::Workload;
use serde::Serialize;
use std::fmt::Write as _;

/// How the rendering task kept its rate (Heimdall §9: frames per 1/3 s).
#[derive(Clone, Debug, Serialize)]
pub struct RenderReport {
    pub processor: String,
    pub target_fps: f64,
    pub frames: usize,
    pub dropped: usize,
    /// Frames that finished per second over the run.
    pub fps_mean: f64,
    /// The fewest frames finished in a 1/3 s window, per second.
    pub fps_worst_window: f64,
    /// From a frame's tick to its start.
    pub late_p50_ms: f64,
    pub late_max_ms: f64,
    /// The workload's `render_ms`, and the median time a frame ran.
    pub asked_ms: f64,
    pub frame_p50_ms: f64,
}

/// A frame median further than this share from the asked time is reported
/// as drifted.
pub const RENDER_DRIFT: f64 = 0.1;

impl RenderReport {
    /// Summarises the frames of `log` over `[0, duration_ms)`; `asked_ms`
    /// is the frame time the workload asked for.
    pub fn new(log: &RunLog, processor: &str, target_fps: f64, asked_ms: f64, duration_ms: f64) -> RenderReport {
        let window = 1e3 / 3.0;
        let windows = ((duration_ms / window).floor() as usize).max(1);
        let mut counts = vec![0usize; windows];
        for f in &log.frames {
            let w = (f.end_ms / window) as usize;
            if let Some(c) = counts.get_mut(w) {
                *c += 1;
            }
        }
        let late: Vec<f64> = log.frames.iter().map(|f| f.start_ms - f.tick_ms).collect();
        let ran: Vec<f64> = log.frames.iter().map(|f| f.end_ms - f.start_ms).collect();
        let in_run = log.frames.iter().filter(|f| f.end_ms < duration_ms).count();
        RenderReport {
            processor: processor.to_string(),
            target_fps,
            frames: log.frames.len(),
            dropped: log.dropped_frames.len(),
            fps_mean: in_run as f64 / (duration_ms.max(1e-9) / 1e3),
            fps_worst_window: counts.iter().copied().min().unwrap_or(0) as f64 * 3.0,
            late_p50_ms: quantile_or_zero(&late, 0.5),
            late_max_ms: late.iter().copied().fold(0.0, f64::max),
            asked_ms,
            frame_p50_ms: quantile_or_zero(&ran, 0.5),
        }
    }

    /// Whether frames ran further than [`RENDER_DRIFT`] from the asked time.
    pub fn drifted(&self) -> bool {
        self.frames > 0 && (self.frame_p50_ms / self.asked_ms.max(1e-9) - 1.0).abs() > RENDER_DRIFT
    }
    /// The summary as one report line.
    pub fn line(&self) -> String {
        let r = self;
        format!(
            "rendering on {}: {:.2} frames/s (target {:.0}), worst 1/3-s window {:.1} frames/s; {} frames, {} dropped; start after tick p50 {:.2} ms, max {:.2} ms; a frame ran p50 {:.2} ms (asked {:.2} ms{})",
            r.processor,
            r.fps_mean,
            r.target_fps,
            r.fps_worst_window,
            r.frames,
            r.dropped,
            r.late_p50_ms,
            r.late_max_ms,
            r.frame_p50_ms,
            r.asked_ms,
            if r.drifted() {
                format!(
                    ": drifted {:+.0}%, so the DNNs' budget per frame was not what the run planned",
                    100.0 * (r.frame_p50_ms / r.asked_ms - 1.0)
                )
            } else {
                String::new()
            }
        )
    }
}

/// The report's `render` section: the rendering task, in a render
/// workload (`null` otherwise).
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct RenderSection(pub Option<RenderReport>);

impl Section for RenderSection {
    fn key(&self) -> &'static str {
        "render"
    }

    fn place(&self) -> Place {
        Place::Run
    }

    /// With a rendering task: each app's mean and max latency, then the
    /// rendering line.
    fn text(&self, report: &Report) -> String {
        let mut s = String::new();
        if let Some(r) = &self.0 {
            let _ = writeln!(s, "{:<14} {:>9} {:>9}", "app", "mean ms", "max ms");
            for a in &report.apps {
                let _ = writeln!(s, "{:<14} {:>9.1} {:>9.1}", a.name, a.mean_ms, a.max_ms);
            }
            let _ = writeln!(s, "{}", r.line());
        }
        s
    }
}

/// The report's `moves` section: models moved between processors by
/// offloading, (s, model, processor).
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct Moves(pub Vec<(f64, usize, String)>);

impl Section for Moves {
    fn key(&self) -> &'static str {
        "moves"
    }

    fn place(&self) -> Place {
        Place::Run
    }

    fn text(&self, report: &Report) -> String {
        let mut s = String::new();
        for (t, m, p) in &self.0 {
            let name = report.apps.get(*m).map_or("?", |a| a.name.as_str());
            let _ = writeln!(s, "offloading: at {t:.1} s {name} moved to {p}");
        }
        s
    }
}

/// Adds Heimdall's sections to `report` of `log`, a run of `w` on
/// `workers` over `duration_ms`: the rendering task's summary where `w`
/// has one, and the policy's moves.
pub fn add_sections(report: &mut Report, log: &RunLog, w: &Workload, workers: &[String], duration_ms: f64) {
    let render = w
        .render
        .as_ref()
        .map(|r| RenderReport::new(log, &r.processor, r.fps, r.render_ms, duration_ms));
    report.add(RenderSection(render));
    report.add(Moves(
        log.moves
            .iter()
            .map(|(t, m, w)| (t / 1e3, *m, workers.get(*w).cloned().unwrap_or_default()))
            .collect(),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Frame;

    fn frames(ms: f64) -> RunLog {
        let mut log = RunLog::default();
        for k in 0..30 {
            let tick = k as f64 * 1e3 / 30.0;
            log.frames.push(Frame {
                worker: 0,
                tick_ms: tick,
                start_ms: tick,
                end_ms: tick + ms,
            });
        }
        log
    }

    #[test]
    fn frames_far_from_the_asked_time_are_reported_as_drifted() {
        let r = RenderReport::new(&frames(2.04), "gpu", 30.0, 3.0, 1e3);
        assert!((r.frame_p50_ms - 2.04).abs() < 1e-9, "{r:?}");
        assert!(
            r.drifted() && r.line().contains("asked 3.00 ms: drifted -32%"),
            "{}",
            r.line()
        );
        let r = RenderReport::new(&frames(3.1), "gpu", 30.0, 3.0, 1e3);
        assert!(!r.drifted() && !r.line().contains("drifted"), "{}", r.line());
    }
}
