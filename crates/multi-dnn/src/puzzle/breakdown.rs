//! Where a plan's request latencies go, per app: the driver's lateness in
//! submitting a request, the engines' run time of its subgraphs, and the
//! rest (waiting for a processor, hand-offs, the driver around each
//! subgraph). Built from a run log, simulated or measured, so a plan's
//! prediction and its real run can be compared term by term.

use crate::core::report::RunLog;
use std::collections::HashMap;

/// Runs of a piece per window in [`Breakdown::piece_windows`].
pub const WINDOW_RUNS: usize = 100;

/// Per-request figures of one or more runs.
#[derive(Clone, Debug, Default)]
pub struct Breakdown {
    /// Per submitted request, ms from its arrival to its submission.
    pub lag_ms: Vec<f64>,
    /// Per finished subgraph, the driver's ms around the engine's.
    pub overhead_ms: Vec<f64>,
    /// Per app, per finished request: (latency, running) in ms.
    pub apps: Vec<Vec<(f64, f64)>>,
    /// Per app, per candidate (piece) it ran: the engine's ms of each run.
    pub pieces: Vec<std::collections::BTreeMap<usize, Vec<f64>>>,
}

/// Medians of one app's requests.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AppFigures {
    pub latency_ms: f64,
    /// Its subgraphs' engine time per request.
    pub running_ms: f64,
    /// Latency minus running, per request.
    pub waiting_ms: f64,
}

impl Breakdown {
    /// The breakdown of one run.
    pub fn of(log: &RunLog) -> Self {
        let mut b = Breakdown::default();
        b.add(log);
        b
    }

    /// Adds the finished requests of `log` (job ids are per log).
    pub fn add(&mut self, log: &RunLog) {
        let mut run: HashMap<_, f64> = HashMap::new();
        for s in log.spans.iter().filter(|s| s.counted) {
            *run.entry(s.job).or_default() += s.end_ms - s.start_ms;
            if self.pieces.len() <= s.app {
                self.pieces.resize_with(s.app + 1, Default::default);
            }
            self.pieces[s.app]
                .entry(s.candidate)
                .or_default()
                .push(s.end_ms - s.start_ms);
        }
        self.lag_ms.extend(&log.arrival_lag_ms);
        self.overhead_ms.extend(&log.dispatch_overhead_ms);
        for c in &log.completed {
            if self.apps.len() <= c.spec.app {
                self.apps.resize_with(c.spec.app + 1, Vec::new);
            }
            let busy = run.get(&c.job).copied().unwrap_or(0.0);
            self.apps[c.spec.app].push((c.latency_ms(), busy));
        }
    }

    /// App `a`'s medians; `None` when none of its requests finished.
    pub fn app(&self, a: usize) -> Option<AppFigures> {
        let r = self.apps.get(a).filter(|r| !r.is_empty())?;
        let lat: Vec<f64> = r.iter().map(|x| x.0).collect();
        let run: Vec<f64> = r.iter().map(|x| x.1).collect();
        let wait: Vec<f64> = r.iter().map(|x| x.0 - x.1).collect();
        Some(AppFigures {
            latency_ms: median_or_nan(&lat),
            running_ms: median_or_nan(&run),
            waiting_ms: median_or_nan(&wait),
        })
    }

    /// App `a`'s pieces (by candidate index, in order) with the median
    /// engine ms of their runs; empty when none ran.
    pub fn piece_medians(&self, a: usize) -> Vec<(usize, f64)> {
        self.pieces
            .get(a)
            .map(|m| m.iter().map(|(c, v)| (*c, median_or_nan(v))).collect())
            .unwrap_or_default()
    }

    /// App `a`'s pieces (by candidate index, in order) with the median
    /// engine ms of each [`WINDOW_RUNS`] runs in a row, in the order the
    /// runs finished (a last, shorter window counts when it holds at least
    /// half as many): how a piece's speed moved during the run, such as
    /// phases of seconds at another speed. Empty when none ran.
    pub fn piece_windows(&self, a: usize) -> Vec<(usize, Vec<f64>)> {
        self.pieces
            .get(a)
            .map(|m| {
                m.iter()
                    .map(|(c, v)| {
                        let w = v
                            .chunks(WINDOW_RUNS)
                            .filter(|w| 2 * w.len() >= WINDOW_RUNS)
                            .map(median_or_nan)
                            .collect();
                        (*c, w)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Median driver figures: (arrival lag, overhead per subgraph), ms; 0 when none.
    pub fn driver_ms(&self) -> (f64, f64) {
        let m = |x: &[f64]| if x.is_empty() { 0.0 } else { median_or_nan(x) };
        (m(&self.lag_ms), m(&self.overhead_ms))
    }
}

/// The median by the one rule ([`graph_ir::stats::median`]); NaN when empty.
fn median_or_nan(xs: &[f64]) -> f64 {
    graph_ir::stats::median(xs).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::report::Span;
    use crate::core::{Completed, JobSpec};

    fn job(app: usize, id: u64, arrival: f64, finish: f64) -> Completed {
        Completed {
            job: id,
            spec: JobSpec {
                app,
                model: app,
                arrival_ms: arrival,
                slo_ms: None,
                frame: None,
                content: 0.0,
            },
            finish_ms: finish,
        }
    }

    fn span(app: usize, id: u64, start: f64, end: f64, counted: bool) -> Span {
        Span {
            worker: 0,
            app,
            job: id,
            candidate: 0,
            start_ms: start,
            end_ms: end,
            counted,
        }
    }

    #[test]
    fn latency_splits_into_running_and_waiting() {
        let log = RunLog {
            completed: vec![job(0, 1, 0.0, 5.0), job(1, 2, 0.0, 3.0)],
            spans: vec![
                span(0, 1, 0.5, 2.0, true),
                span(0, 1, 3.0, 4.0, true),
                span(0, 1, 2.0, 2.5, false),
                span(1, 2, 0.0, 3.0, true),
            ],
            arrival_lag_ms: vec![0.1, 0.3],
            dispatch_overhead_ms: vec![0.02, 0.04, 0.03],
            ..RunLog::default()
        };
        let mut b = Breakdown::default();
        b.add(&log);
        let a = b.app(0).unwrap();
        assert_eq!((a.latency_ms, a.running_ms, a.waiting_ms), (5.0, 2.5, 2.5));
        let c = b.app(1).unwrap();
        assert_eq!((c.running_ms, c.waiting_ms), (3.0, 0.0));
        assert!(b.app(2).is_none());
        assert_eq!(b.piece_medians(0), vec![(0, 1.25)]);
        assert!(b.piece_medians(2).is_empty());
        assert_eq!(b.piece_windows(0), vec![(0, vec![])], "two runs make no window");
        let (lag, over) = b.driver_ms();
        assert!((lag - 0.2).abs() < 1e-12 && (over - 0.03).abs() < 1e-12);
    }

    #[test]
    fn windows_show_a_phase_at_another_speed() {
        let ms = |i: usize| if (200..300).contains(&i) { 2.0 } else { 1.0 };
        let log = RunLog {
            spans: (0..360).map(|i| span(0, i as u64, 0.0, ms(i), true)).collect(),
            ..RunLog::default()
        };
        let b = Breakdown::of(&log);
        assert_eq!(b.piece_windows(0), vec![(0, vec![1.0, 1.0, 2.0, 1.0])]);
        let short = RunLog {
            spans: (0..340).map(|i| span(0, i as u64, 0.0, ms(i), true)).collect(),
            ..RunLog::default()
        };
        assert_eq!(
            Breakdown::of(&short).piece_windows(0),
            vec![(0, vec![1.0, 1.0, 2.0])],
            "40 runs are too few for a window"
        );
    }
}
