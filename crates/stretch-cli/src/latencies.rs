//! Latencies `stretch serve` measures and `stretch simulate --latencies`
//! replays: per (model, candidate, processor), split by whether another
//! processor was busy during the run (memory and cache contention), with
//! each class's spread, and the driver's hand-off cost per subgraph.

use scheduler_rt::multi::estimator::{Estimator, SavedEstimates};
use scheduler_rt::multi::report::{RunLog, Span, quantile};
use scheduler_rt::multi::sim::{Latency, Truth};
use scheduler_rt::multi::units::ModelUnits;
use serde::{Deserialize, Serialize};

/// Mean, coefficient of variation and shape of some runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Stat {
    pub mean_ms: f64,
    pub cv: f64,
    pub runs: u32,
    /// Run / mean at the quantiles (k + 0.5) / SHAPE_POINTS, when there
    /// were at least that many runs.
    #[serde(default)]
    pub shape: Vec<f64>,
}

/// Quantiles kept of an entry's distribution.
const SHAPE_POINTS: usize = 32;

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
        let shape = if self.runs.len() >= SHAPE_POINTS && mean > 0.0 {
            let mut sorted = self.runs.clone();
            sorted.sort_by(f64::total_cmp);
            (0..SHAPE_POINTS)
                .map(|k| sorted[((k as f64 + 0.5) / SHAPE_POINTS as f64 * n) as usize] / mean)
                .collect()
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
    /// `[model][candidate][worker]`: all, alone, shared.
    acc: Vec<Vec<Vec<[Acc; 3]>>>,
    overhead: Vec<f64>,
}

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
            acc: units
                .iter()
                .map(|u| vec![vec![std::array::from_fn(|_| Acc::default()); workers]; u.candidates.len()])
                .collect(),
            overhead: Vec::new(),
        }
    }

    /// Adds the spans of one run (apps are models, one per app).
    pub fn add(&mut self, log: &RunLog) {
        let workers = self.acc.first().and_then(|m| m.first()).map_or(0, |c| c.len());
        let mut by_worker: Vec<Vec<&Span>> = vec![Vec::new(); workers];
        for s in log.spans.iter().filter(|s| s.worker < workers) {
            by_worker[s.worker].push(s);
        }
        for s in log.spans.iter().filter(|s| s.counted) {
            let Some(e) = self
                .acc
                .get_mut(s.app)
                .and_then(|m| m.get_mut(s.candidate))
                .and_then(|c| c.get_mut(s.worker))
            else {
                continue;
            };
            let ms = s.end_ms - s.start_ms;
            let shared = overlap_with_others(s, &by_worker) > 0.5 * ms;
            e[0].add(ms);
            e[if shared { 2 } else { 1 }].add(ms);
        }
        self.overhead.extend_from_slice(&log.dispatch_overhead_ms);
    }

    /// What `--save-latencies` writes; `base` fills entries that never ran.
    pub fn measured(
        &self,
        units: &[ModelUnits],
        base: &Estimator,
        processors: Vec<String>,
        apps: Vec<String>,
        isolated_ms: Vec<f64>,
    ) -> Measured {
        let table = |k: usize| map3(&self.acc, |_, _, _, a| a[k].stat());
        let truth = map3(&self.acc, |m, c, w, a| {
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
            runs: map3(&self.acc, |_, _, _, a| a[0].runs.len() as u32),
            alone: table(1),
            shared: table(2),
            dispatch_overhead_ms: quantile(&self.overhead, 0.5),
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
        }
    }
}
