//! Latencies `stretch serve` measures and `stretch simulate --latencies`
//! replays: per (model, candidate, processor), split by whether another
//! processor was busy during the run (memory and cache contention), with
//! each class's spread, and the driver's hand-off cost per subgraph.

use crate::core::estimator::{Estimator, SavedEstimates};
use crate::core::report::{RunLog, Span, quantile_or_zero};
use crate::core::units::ModelUnits;
use crate::sim::{Latency, Truth};
use serde::{Deserialize, Serialize};

/// Mean, coefficient of variation and shape of some runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Stat {
    pub mean_ms: f64,
    pub cv: f64,
    pub runs: u32,
    /// Run / mean at the quantiles (k + 0.5) / n, n = min(runs, 100), when
    /// there were at least 20 runs.
    #[serde(default)]
    pub shape: Vec<f64>,
}

/// The values of `v` at the quantiles (k + 0.5) / n, n = min(len, 100);
/// empty with fewer than 20 values.
fn spread_of(v: &[f64]) -> Vec<f64> {
    if v.len() < 20 {
        return Vec::new();
    }
    graph_ir::stats::quantile_grid(v, v.len().min(100))
}

/// Latencies measured by `serve`, replayed by `simulate --latencies`.
#[derive(Serialize, Deserialize)]
pub struct Measured {
    pub processors: Vec<String>,
    pub apps: Vec<String>,
    /// Isolated p99 of each app on its fastest processor, ms.
    pub isolated_ms: Vec<f64>,
    /// `truth[model][candidate][processor]`: mean measured engine ms (or the
    /// estimator's figure where a candidate never ran there; null where it cannot run).
    pub truth: Vec<Vec<Vec<Option<f64>>>>,
    /// How many runs each entry of `truth` averages (0: estimated).
    pub runs: Vec<Vec<Vec<u32>>>,
    /// Runs during which no other processor was busy for more than half the run.
    #[serde(default)]
    pub alone: Vec<Vec<Vec<Option<Stat>>>>,
    /// The other runs.
    #[serde(default)]
    pub shared: Vec<Vec<Vec<Option<Stat>>>>,
    /// Median ms per subgraph around the engine's (hand-off and reply).
    #[serde(default)]
    pub dispatch_overhead_ms: f64,
    /// That overhead at evenly spaced quantiles (see [`Stat::shape`]).
    #[serde(default)]
    pub dispatch_overhead_quantiles: Vec<f64>,
    /// The machine's speed (run time / the entry's mean) in each window of
    /// `speed_window_ms` of every run; `alone` and `shared` are divided by it.
    #[serde(default)]
    pub speed: Vec<f64>,
    #[serde(default)]
    pub speed_window_ms: f64,
    /// How late the driver submitted each job after its arrival time, at
    /// evenly spaced quantiles.
    #[serde(default)]
    pub arrival_lag_quantiles: Vec<f64>,
    /// The registration state of the estimator.
    pub registration: SavedEstimates,
}

#[derive(Clone, Default)]
struct Acc {
    runs: Vec<f64>,
}

impl Acc {
    fn add(&mut self, x: f64) {
        self.runs.push(x);
    }

    fn stat(&self) -> Option<Stat> {
        if self.runs.is_empty() {
            return None;
        }
        let n = self.runs.len() as f64;
        let mean = self.runs.iter().sum::<f64>() / n;
        let var = (self.runs.iter().map(|x| x * x).sum::<f64>() / n - mean * mean).max(0.0);
        let shape = if mean > 0.0 {
            spread_of(&self.runs).iter().map(|x| x / mean).collect()
        } else {
            Vec::new()
        };
        Some(Stat {
            mean_ms: mean,
            cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
            runs: self.runs.len() as u32,
            shape,
        })
    }
}

/// `f(model, candidate, processor, entry)` over a `[model][candidate][processor]` table.
fn map3<T, U>(t: &[Vec<Vec<T>>], f: impl Fn(usize, usize, usize, &T) -> U) -> Vec<Vec<Vec<U>>> {
    t.iter()
        .enumerate()
        .map(|(m, cs)| {
            cs.iter()
                .enumerate()
                .map(|(c, ws)| ws.iter().enumerate().map(|(w, x)| f(m, c, w, x)).collect())
                .collect()
        })
        .collect()
}

/// Collects every counted span of `serve` runs.
pub struct Recorder {
    /// Candidates per model, and workers.
    shape: (Vec<usize>, usize),
    records: Vec<Record>,
    runs: usize,
    overhead: Vec<f64>,
    arrival_lag: Vec<f64>,
}

/// One subgraph run: where, in which class, when in which `serve` run, how long.
struct Record {
    m: usize,
    c: usize,
    w: usize,
    shared: bool,
    run: usize,
    start_ms: f64,
    ms: f64,
}

/// Length of the windows over which the machine's speed is measured.
pub const SPEED_WINDOW_MS: f64 = 250.0;

/// The time in `[s.start_ms, s.end_ms)` that some other worker was busy.
fn overlap_with_others(s: &Span, by_worker: &[Vec<&Span>]) -> f64 {
    let mut busy: Vec<(f64, f64)> = by_worker
        .iter()
        .enumerate()
        .filter(|(w, _)| *w != s.worker)
        .flat_map(|(_, v)| v.iter())
        .filter(|o| o.start_ms < s.end_ms && o.end_ms > s.start_ms)
        .map(|o| (o.start_ms.max(s.start_ms), o.end_ms.min(s.end_ms)))
        .collect();
    busy.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut total, mut reach) = (0.0, s.start_ms);
    for (a, b) in busy {
        let a = a.max(reach);
        if b > a {
            total += b - a;
            reach = b;
        }
    }
    total
}

impl Recorder {
    pub fn new(units: &[ModelUnits], workers: usize) -> Recorder {
        Recorder {
            shape: (units.iter().map(|u| u.candidates.len()).collect(), workers),
            records: Vec::new(),
            runs: 0,
            overhead: Vec::new(),
            arrival_lag: Vec::new(),
        }
    }

    /// Adds the spans of one run (apps are models, one per app).
    pub fn add(&mut self, log: &RunLog) {
        let (cands, workers) = (&self.shape.0, self.shape.1);
        let mut by_worker: Vec<Vec<&Span>> = vec![Vec::new(); workers];
        for s in log.spans.iter().filter(|s| s.worker < workers) {
            by_worker[s.worker].push(s);
        }
        for s in log.spans.iter().filter(|s| s.counted) {
            if cands.get(s.app).is_none_or(|n| s.candidate >= *n) || s.worker >= workers {
                continue;
            }
            let ms = s.end_ms - s.start_ms;
            self.records.push(Record {
                m: s.app,
                c: s.candidate,
                w: s.worker,
                shared: overlap_with_others(s, &by_worker) > 0.5 * ms,
                run: self.runs,
                start_ms: s.start_ms,
                ms,
            });
        }
        self.runs += 1;
        self.overhead.extend_from_slice(&log.dispatch_overhead_ms);
        self.arrival_lag.extend_from_slice(&log.arrival_lag_ms);
    }

    /// The machine's speed per window of every run, in run order: the mean
    /// over the window's subgraph runs of run time / that entry's mean (1
    /// for windows with fewer than 3 runs); and each record's window.
    fn speed(&self) -> (Vec<f64>, Vec<usize>) {
        let mut mean = map3(&self.empty(), |_, _, _, _| (0.0, 0usize));
        for r in &self.records {
            let e = &mut mean[r.m][r.c][r.w];
            e.0 += r.ms;
            e.1 += 1;
        }
        let windows: Vec<(usize, usize)> = self
            .records
            .iter()
            .map(|r| (r.run, (r.start_ms.max(0.0) / SPEED_WINDOW_MS) as usize))
            .collect();
        let mut keys = windows.clone();
        keys.sort_unstable();
        keys.dedup();
        let mut sums = vec![(0.0, 0usize); keys.len()];
        let index: Vec<usize> = windows.iter().map(|k| keys.binary_search(k).unwrap_or(0)).collect();
        for (r, k) in self.records.iter().zip(&index) {
            let (sum, n) = mean[r.m][r.c][r.w];
            if sum > 0.0 {
                sums[*k].0 += r.ms / (sum / n as f64);
                sums[*k].1 += 1;
            }
        }
        let speed = sums
            .iter()
            .map(|(s, n)| if *n >= 3 { s / *n as f64 } else { 1.0 })
            .collect();
        (speed, index)
    }

    fn empty(&self) -> Vec<Vec<Vec<()>>> {
        self.shape.0.iter().map(|n| vec![vec![(); self.shape.1]; *n]).collect()
    }

    /// What `--save-latencies` writes; `base` fills entries that never ran.
    /// Each entry's alone and shared statistics are of run times divided
    /// by their window's speed; `speed` keeps the windows' speeds.
    pub fn measured(
        &self,
        units: &[ModelUnits],
        base: &Estimator,
        processors: Vec<String>,
        apps: Vec<String>,
        isolated_ms: Vec<f64>,
    ) -> Measured {
        let (speed, window) = self.speed();
        let mut acc = map3(&self.empty(), |_, _, _, _| {
            [Acc::default(), Acc::default(), Acc::default()]
        });
        for (r, k) in self.records.iter().zip(&window) {
            let e = &mut acc[r.m][r.c][r.w];
            e[0].add(r.ms);
            e[if r.shared { 2 } else { 1 }].add(r.ms / speed[*k]);
        }
        let table = |k: usize| map3(&acc, |_, _, _, a| a[k].stat());
        let truth = map3(&acc, |m, c, w, a| {
            if !units[m].candidates[c].support.contains(w) {
                None
            } else if let Some(s) = a[0].stat() {
                Some(s.mean_ms)
            } else {
                Some(base.estimate(m, c, w)).filter(|x| x.is_finite())
            }
        });
        Measured {
            processors,
            apps,
            isolated_ms,
            truth,
            runs: map3(&acc, |_, _, _, a| a[0].runs.len() as u32),
            alone: table(1),
            shared: table(2),
            dispatch_overhead_ms: quantile_or_zero(&self.overhead, 0.5),
            dispatch_overhead_quantiles: spread_of(&self.overhead),
            speed_window_ms: SPEED_WINDOW_MS,
            speed,
            arrival_lag_quantiles: spread_of(&self.arrival_lag),
            registration: base.save(),
        }
    }
}

impl Measured {
    /// The simulator's truth: each entry's alone and shared figures where
    /// measured (the other class's, else the overall mean, where not).
    pub fn truth(&self) -> Truth {
        fn get(t: &[Vec<Vec<Option<Stat>>>], m: usize, c: usize, w: usize) -> Option<&Stat> {
            t.get(m)?.get(c)?.get(w)?.as_ref()
        }
        let table = map3(&self.truth, |m, c, w, mean| {
            let Some(mean) = mean else {
                return Latency::exact(f64::INFINITY);
            };
            let (a, s) = (get(&self.alone, m, c, w), get(&self.shared, m, c, w));
            let pick = |x: Option<&Stat>, y: Option<&Stat>| {
                x.or(y)
                    .map_or((*mean, 0.0, Vec::new()), |s| (s.mean_ms, s.cv, s.shape.clone()))
            };
            let (alone_ms, alone_cv, alone_shape) = pick(a, s);
            let (shared_ms, shared_cv, shared_shape) = pick(s, a);
            Latency {
                alone_ms,
                alone_cv,
                alone_shape,
                shared_ms,
                shared_cv,
                shared_shape,
            }
        });
        Truth {
            table,
            overhead_ms: self.dispatch_overhead_ms,
            overhead_quantiles: self.dispatch_overhead_quantiles.clone(),
            speed: self.speed.clone(),
            speed_window_ms: self.speed_window_ms,
            arrival_lag_quantiles: self.arrival_lag_quantiles.clone(),
            spread_correlation: Vec::new(),
        }
    }
}
