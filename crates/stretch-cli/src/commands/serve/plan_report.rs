//! The report of `stretch serve --plan`: per served run (each plan, then
//! Band's `lst`), its groups' makespans and score, the engine boundary's
//! counters, where each app's time went and, per app cut into pieces,
//! each piece's engine time; as text or JSON (`--json`), every figure
//! measured unless its field says predicted or simulated.

use engine::host::Steal;
use multi_dnn::puzzle::breakdown::{AppFigures, Breakdown, WINDOW_RUNS};
use multi_dnn::puzzle::evaluate::Outcome;
use multi_dnn::puzzle::group_figures::GroupFigures;
use multi_dnn::serve::host::PoolReport;
use serde::Serialize;
use std::collections::HashMap;

/// The whole report.
#[derive(Serialize)]
pub struct Report {
    /// Always `measured`: the runs are real; predictions are named as such.
    pub kind: &'static str,
    pub scheduling: String,
    pub processors: Vec<String>,
    pub rounds: usize,
    pub round_s: f64,
    pub runs: Vec<RunReport>,
    /// Whether every output was compared with the whole-model reference.
    pub outputs_checked: bool,
    /// With `--retime`: how the hand-offs, contention and run-time spread
    /// the re-timed simulations use were measured, one line each.
    pub retime_notes: Vec<String>,
    /// The period multiplier of `--slo-multipliers` (`None`: as written).
    pub period_multiplier: Option<f64>,
    /// Where the groups' base periods came from.
    pub periods_from: String,
}

/// One served configuration, pooled over the rounds.
#[derive(Serialize)]
pub struct RunReport {
    /// The plan file's name, or `Band lst (online)`.
    pub name: String,
    /// A static plan (`false`: `lst`, online).
    pub static_plan: bool,
    pub score: f64,
    pub groups: Vec<GroupReport>,
    pub engine_boundary: PoolReport,
    /// Medians: the driver's lateness submitting a request, and its
    /// overhead around each subgraph.
    pub arrival_lag_ms: f64,
    pub driver_overhead_ms: f64,
    pub apps: Vec<AppReport>,
    pub steal: Option<Steal>,
}

#[derive(Serialize)]
pub struct GroupReport {
    #[serde(flatten)]
    pub measured: GroupFigures,
    /// The analyzer's simulated mean makespan, written into the plan.
    pub predicted_by_analyze_ms: Option<f64>,
    /// Its median, where the plan has one.
    pub predicted_by_analyze_p50_ms: Option<f64>,
    /// With `--retime`: the simulated mean makespan with the pieces timed
    /// again before each round.
    pub simulated_retimed_ms: Option<f64>,
    /// Its median.
    pub simulated_retimed_p50_ms: Option<f64>,
}

/// A group's makespans as the analyzer simulated them (ms); plans written
/// before the median was kept have only the mean.
#[derive(Clone, Copy, Debug)]
pub struct Predicted {
    pub mean_ms: f64,
    pub p50_ms: Option<f64>,
}

#[derive(Serialize)]
pub struct AppReport {
    pub app: String,
    /// Medians of its requests.
    pub measured: AppFigures,
    /// The analyzer's simulated figures, from the plan file.
    pub predicted_by_analyze: Option<AppFigures>,
    /// With `--retime`: simulated with the pieces timed again.
    pub simulated_retimed: Option<AppFigures>,
    /// Its pieces in plan order (static plans that cut it into several).
    pub pieces: Vec<PieceReport>,
}

#[derive(Serialize)]
pub struct PieceReport {
    /// The piece's index among the model's candidates (plan order).
    pub piece: usize,
    /// Median engine ms served.
    pub served_ms: f64,
    /// With `--retime`: its median in the re-timed simulation.
    pub simulated_retimed_ms: Option<f64>,
    /// Median engine ms of each [`WINDOW_RUNS`] runs in a row, in the order
    /// they finished (`Breakdown::piece_windows`).
    pub window_medians_ms: Vec<f64>,
}

/// What one served configuration gathered over the rounds.
pub struct Gathered<'a> {
    pub name: String,
    pub static_plan: bool,
    pub outcome: &'a Outcome,
    pub boundary: PoolReport,
    pub breakdown: &'a Breakdown,
    pub steal: Option<Steal>,
    /// Per group, the analyzer's makespans.
    pub predicted: Option<&'a [Predicted]>,
    /// Per app, the analyzer's figures.
    pub predicted_apps: &'a [Option<AppFigures>],
    /// With `--retime`: the simulation's outcome and breakdown.
    pub retimed: Option<(&'a Outcome, &'a Breakdown)>,
}

impl RunReport {
    pub fn new(g: Gathered, groups: &[String], apps: &[String]) -> RunReport {
        let groups = GroupFigures::of(g.outcome, groups)
            .into_iter()
            .enumerate()
            .map(|(i, measured)| {
                let predicted = g.predicted.and_then(|p| p.get(i));
                let retimed = g
                    .retimed
                    .and_then(|(o, _)| o.makespans.get(i))
                    .filter(|r| !r.is_empty());
                GroupReport {
                    measured,
                    predicted_by_analyze_ms: predicted.map(|p| p.mean_ms),
                    predicted_by_analyze_p50_ms: predicted.and_then(|p| p.p50_ms),
                    simulated_retimed_ms: retimed.map(|r| r.iter().sum::<f64>() / r.len() as f64),
                    simulated_retimed_p50_ms: retimed.map(|r| graph_ir::stats::quantile_nan(r, 0.5)),
                }
            })
            .collect();
        let (lag, over) = g.breakdown.driver_ms();
        let apps = apps
            .iter()
            .enumerate()
            .filter_map(|(a, name)| {
                let measured = g.breakdown.app(a)?;
                let served = g.breakdown.piece_medians(a);
                let windows: HashMap<usize, Vec<f64>> = g.breakdown.piece_windows(a).into_iter().collect();
                let sim: HashMap<usize, f64> = g
                    .retimed
                    .map(|(_, b)| b.piece_medians(a).into_iter().collect())
                    .unwrap_or_default();
                let pieces = if served.len() < 2 || !g.static_plan {
                    Vec::new()
                } else {
                    served
                        .into_iter()
                        .map(|(c, ms)| PieceReport {
                            piece: c,
                            served_ms: ms,
                            simulated_retimed_ms: sim.get(&c).copied(),
                            window_medians_ms: windows.get(&c).cloned().unwrap_or_default(),
                        })
                        .collect()
                };
                Some(AppReport {
                    app: name.clone(),
                    measured,
                    predicted_by_analyze: g.predicted_apps.get(a).copied().flatten(),
                    simulated_retimed: g.retimed.and_then(|(_, b)| b.app(a)),
                    pieces,
                })
            })
            .collect();
        RunReport {
            name: g.name,
            static_plan: g.static_plan,
            score: g.outcome.score(),
            groups,
            engine_boundary: g.boundary,
            arrival_lag_ms: lag,
            driver_overhead_ms: over,
            apps,
            steal: g.steal,
        }
    }

    /// The run as text lines.
    pub fn lines(&self) -> Vec<String> {
        let head = if self.static_plan {
            format!("plan {} (static): score {:.3}", self.name, self.score)
        } else {
            format!("{}: score {:.3}", self.name, self.score)
        };
        let mut out = vec![head];
        out.extend(self.groups.iter().map(|g| g.measured.line()));
        out.push(format!("  {}", self.engine_boundary.line()));
        out.push(format!(
            "  where the time went (medians; measured, predicted in brackets): arrival lag {:.3} ms, driver overhead {:.3} ms per subgraph",
            self.arrival_lag_ms, self.driver_overhead_ms
        ));
        let app_line = |a: &AppReport, p: Option<AppFigures>| {
            let show = |v: Option<f64>| v.map_or(String::new(), |v| format!(" ({v:.3})"));
            format!(
                "    {:<12} latency {:.3}{} ms: running {:.3}{} ms, waiting and hand-offs {:.3}{} ms",
                a.app,
                a.measured.latency_ms,
                show(p.map(|p| p.latency_ms)),
                a.measured.running_ms,
                show(p.map(|p| p.running_ms)),
                a.measured.waiting_ms,
                show(p.map(|p| p.waiting_ms))
            )
        };
        for a in &self.apps {
            out.push(app_line(a, a.predicted_by_analyze));
        }
        let retimed = self.groups.iter().any(|g| g.simulated_retimed_ms.is_some());
        if retimed {
            for a in &self.apps {
                out.push(format!(
                    "{} (brackets: simulated with the pieces re-timed now)",
                    app_line(a, a.simulated_retimed)
                ));
            }
        }
        for a in self.apps.iter().filter(|a| !a.pieces.is_empty()) {
            let text: Vec<String> = a
                .pieces
                .iter()
                .map(|p| match p.simulated_retimed_ms {
                    Some(s) => format!("{:.3} ({s:.3})", p.served_ms),
                    None => format!("{:.3}", p.served_ms),
                })
                .collect();
            let what = if retimed {
                "median ms served (simulated with the pieces re-timed now)"
            } else {
                "median ms served"
            };
            out.push(format!("    {:<12} pieces, {what}: {}", a.app, text.join(", ")));
            if let Some(line) = window_line(a) {
                out.push(line);
            }
        }
        if let Some(s) = &self.steal {
            out.push(format!("  {}", s.line()));
        }
        for r in &self.groups {
            let Some(pred) = r.predicted_by_analyze_ms else {
                continue;
            };
            let g = &r.measured;
            let pred_p50 = r.predicted_by_analyze_p50_ms.unwrap_or(pred);
            out.push(format!(
                "  {:<12} predicted by analyze mean {pred:.2} ms, p50 {pred_p50:.2} ms; measured mean {:.2} ms ({:+.1}%), p50 {:.2} ms ({:+.1}%)",
                g.group,
                g.mean_makespan_ms,
                100.0 * (g.mean_makespan_ms / pred - 1.0),
                g.p50_makespan_ms,
                100.0 * (g.p50_makespan_ms / pred_p50 - 1.0)
            ));
            if let Some(now) = r.simulated_retimed_ms {
                let now_p50 = r.simulated_retimed_p50_ms.unwrap_or(now);
                out.push(format!(
                    "  {:<12} simulated with the pieces re-timed before each round mean {now:.2} ms, p50 {now_p50:.2} ms at the served period; measured mean {:+.1}%, p50 {:+.1}%",
                    g.group,
                    100.0 * (g.mean_makespan_ms / now - 1.0),
                    100.0 * (g.p50_makespan_ms / now_p50 - 1.0)
                ));
            }
        }
        out
    }
}

/// App `a`'s pieces' fastest and slowest median of [`WINDOW_RUNS`] runs in a row, and
/// their ratio; `None` unless some piece ran at least two such windows.
fn window_line(a: &AppReport) -> Option<String> {
    if a.pieces.iter().all(|p| p.window_medians_ms.len() < 2) {
        return None;
    }
    let text: Vec<String> = a
        .pieces
        .iter()
        .map(|p| {
            let w = &p.window_medians_ms;
            let lo = w.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if w.len() < 2 || lo <= 0.0 {
                "-".to_string()
            } else {
                format!("{lo:.3}-{hi:.3} (x{:.2})", hi / lo)
            }
        })
        .collect();
    Some(format!(
        "    {:<12} pieces, fastest-slowest median of {WINDOW_RUNS} runs in a row: {}",
        a.app,
        text.join(", ")
    ))
}
