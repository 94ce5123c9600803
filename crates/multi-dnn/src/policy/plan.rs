//! Band's expected latency of a job (§4.3.1): the shortest sequence of
//! subgraph candidates covering the remaining units, found by dynamic
//! programming in O(p·n²) instead of enumerating the O(pⁿ) sequences.
//!
//! Times are ms relative to the view's `now`. A worker's wait is when it
//! could start new work; a step on worker `k` that may start at `t` ends at
//! `max(wait_k, t) + estimate`. Steps of one region run one after another;
//! a region starts when the regions it reads have finished.

use crate::core::units::{ModelUnits, NO_CANDIDATE};
use crate::core::{Job, View};

/// One step of a sequence over a region's remaining units: run local units
/// `first..=last` (0 is the first remaining unit) on `worker`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub first: usize,
    pub last: usize,
    pub worker: usize,
}

/// The shortest sequence's finish and its first step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shortest {
    /// Expected finish (relative ms); infinite when no sequence can run.
    pub finish: f64,
    /// `None` when nothing remains or no sequence can run.
    pub first: Option<Step>,
}

/// The shortest sequence over `n` units that may start at `start`, with
/// workers free after `waits` and `est(i, j, k)` the ms of units `i..=j` on
/// worker `k` (infinite where no candidate covers exactly `i..=j` or `k`
/// cannot run it).
///
/// `memo[0] = start`, `memo[j+1] = min over i ≤ j, k of max(waits[k],
/// memo[i]) + est(i, j, k)`. Ties: at every prefix, among equal finishes
/// the sequence kept is the one whose first step has the lower worker
/// index, then the longer first step; the first step returned is that of
/// the sequence kept for the whole region. Any finish reached through an
/// infinite wait or estimate is ignored.
pub fn shortest(n: usize, start: f64, waits: &[f64], est: impl Fn(usize, usize, usize) -> f64) -> Shortest {
    shortest_rows(n, start, waits, |i, j, row: &mut [f64]| {
        for (k, x) in row.iter_mut().enumerate() {
            *x = est(i, j, k);
        }
        true
    })
}

/// [`shortest`] with `fill(i, j, row)` writing the estimates of units
/// `i..=j` on every worker into `row` at once (returning false, row
/// untouched, where no candidate covers exactly `i..=j`).
pub fn shortest_rows(
    n: usize,
    start: f64,
    waits: &[f64],
    mut fill: impl FnMut(usize, usize, &mut [f64]) -> bool,
) -> Shortest {
    let mut memo = vec![f64::INFINITY; n + 1];
    let mut first: Vec<Option<Step>> = vec![None; n + 1];
    let mut row = vec![f64::INFINITY; waits.len()];
    memo[0] = start;
    for i in 0..n {
        if !memo[i].is_finite() {
            continue;
        }
        for j in i..n {
            if !fill(i, j, &mut row) {
                continue;
            }
            let lead = if i == 0 {
                Step {
                    first: 0,
                    last: j,
                    worker: 0,
                }
            } else {
                match first[i] {
                    Some(s) => s,
                    None => continue,
                }
            };
            for (k, (w, e)) in waits.iter().zip(&row).enumerate() {
                let t = w.max(memo[i]) + e;
                if !t.is_finite() {
                    continue;
                }
                let lead = if i == 0 { Step { worker: k, ..lead } } else { lead };
                if t < memo[j + 1] || (t == memo[j + 1] && first[j + 1].is_none_or(|b| preferred(lead, b))) {
                    memo[j + 1] = t;
                    first[j + 1] = Some(lead);
                }
            }
        }
    }
    Shortest {
        finish: memo[n],
        first: first[n],
    }
}

fn preferred(a: Step, b: Step) -> bool {
    (a.worker, std::cmp::Reverse(a.last)) < (b.worker, std::cmp::Reverse(b.last))
}

/// The plan of one region of a job.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RegionPlan {
    /// Expected finish (relative ms): 0 for a complete region, infinite
    /// when its remaining units cannot run on the available workers.
    pub finish: f64,
    /// The first step of the best sequence (a candidate starting at the
    /// region's next unit, and a worker); `None` for a complete or running
    /// region, or when nothing can run.
    pub first: Option<(usize, usize)>,
}

/// Expected latency of a job: the latest finish of its regions.
#[derive(Clone, Debug, PartialEq)]
pub struct JobPlan {
    /// Relative ms; 0 for a complete job, infinite if a region cannot run.
    pub latency: f64,
    pub regions: Vec<RegionPlan>,
}

/// Expected ms from the view's `now` until each worker could start new work.
pub fn waits(view: &View) -> Vec<f64> {
    view.workers.iter().map(|w| w.wait_ms(view.now_ms)).collect()
}

/// The best plan of units `from..` of region `r` of `model`, starting no
/// earlier than `start`, given the workers' `waits`. With `whole_only`,
/// the one candidate covering all those units is the only step considered
/// when it exists and some available worker can run it; otherwise the
/// full dynamic program runs. A step on worker `k` expected to take longer
/// than `caps[k]` (where given) is not considered.
pub fn region_plan(
    view: &View,
    model: usize,
    (r, from, start): (usize, usize, f64),
    waits: &[f64],
    whole_only: bool,
    caps: &[f64],
) -> RegionPlan {
    let m = &view.models[model];
    let end = m.regions[r].units.end;
    let n = end.saturating_sub(from);
    if n == 0 {
        return RegionPlan {
            finish: start,
            first: None,
        };
    }
    let cand = |i: usize, j: usize| m.candidate(from + i, from + j);
    let mut from_i = (usize::MAX, &[][..]);
    let mut fill = |i: usize, j: usize, row: &mut [f64]| {
        if from_i.0 != i {
            from_i = (i, m.candidates_from(from + i));
        }
        let c = match from_i.1.get(j - i) {
            Some(&c) if c != NO_CANDIDATE => c as usize,
            _ => return false,
        };
        let support = m.candidates[c].support;
        for (k, x) in row.iter_mut().enumerate() {
            *x = if view.workers[k].available && support.contains(k) {
                let ms = view.estimator.estimate(model, c, k);
                if caps.get(k).is_some_and(|cap| ms > *cap) {
                    f64::INFINITY
                } else {
                    ms
                }
            } else {
                f64::INFINITY
            };
        }
        true
    };
    let mut best = None;
    if whole_only && cand(0, n - 1).is_some() {
        let s = shortest_rows(n, start, waits, |i, j, row: &mut [f64]| {
            i == 0 && j == n - 1 && fill(i, j, row)
        });
        best = s.first.is_some().then_some(s);
    }
    let s = best.unwrap_or_else(|| shortest_rows(n, start, waits, fill));
    RegionPlan {
        finish: s.finish,
        first: s.first.and_then(|st| cand(st.first, st.last).map(|c| (c, st.worker))),
    }
}

/// The expected latency of `job` (Band's "shortest subgraph sequence"),
/// regions taken in index order (a topological order):
/// - a complete region finishes at 0;
/// - a running region (a subgraph in flight or in a worker's own queue)
///   continues after that subgraph, whose finish is the worker's remaining
///   time for it (the running one's rest, plus the queued ones ahead of it);
/// - any other region starts at the latest finish of the regions it reads.
pub fn job_plan(view: &View, job: &Job, waits: &[f64], whole_only: bool) -> JobPlan {
    job_plan_capped(view, job, waits, whole_only, &[])
}

/// [`job_plan`] without steps on worker `k` longer than `caps[k]` (where
/// given); the uncapped plan where no capped one can finish.
pub fn job_plan_capped(view: &View, job: &Job, waits: &[f64], whole_only: bool, caps: &[f64]) -> JobPlan {
    let capped = job_plan_under(view, job, waits, whole_only, caps);
    if capped.latency.is_finite() || caps.iter().all(|c| c.is_infinite()) {
        return capped;
    }
    job_plan_under(view, job, waits, whole_only, &[])
}

fn job_plan_under(view: &View, job: &Job, waits: &[f64], whole_only: bool, caps: &[f64]) -> JobPlan {
    let model = job.spec.model;
    let m = &view.models[model];
    let mut regions: Vec<RegionPlan> = Vec::with_capacity(m.regions.len());
    for r in 0..m.regions.len() {
        let plan = if job.region_complete(m, r) {
            RegionPlan {
                finish: 0.0,
                first: None,
            }
        } else {
            let ready_at = m.regions[r]
                .preds
                .iter()
                .filter_map(|p| regions.get(*p))
                .map(|p| p.finish)
                .fold(0.0, f64::max);
            let running = job.running.get(r).copied().unwrap_or(false);
            match if running { in_flight(view, job, r, m) } else { None } {
                Some((after, finish)) => RegionPlan {
                    first: None,
                    ..region_plan(view, model, (r, after, finish), waits, whole_only, caps)
                },
                None => region_plan(view, model, (r, job.next_unit(m, r), ready_at), waits, whole_only, caps),
            }
        };
        regions.push(plan);
    }
    JobPlan {
        latency: regions.iter().map(|p| p.finish).fold(0.0, f64::max),
        regions,
    }
}

/// The unit after the subgraph of region `r` of `job` given to a worker,
/// and when that subgraph is expected to finish.
fn in_flight(view: &View, job: &Job, r: usize, m: &ModelUnits) -> Option<(usize, f64)> {
    let now = view.now_ms;
    for w in view.workers {
        let rest = w
            .running
            .as_ref()
            .map_or(0.0, |x| (x.start_ms.unwrap_or(now) + x.expected_ms - now).max(0.0));
        let mut ahead = rest;
        let entries = w
            .running
            .iter()
            .map(|x| (x, true))
            .chain(w.local.iter().map(|x| (x, false)));
        for (x, is_running) in entries {
            if !is_running {
                ahead += x.expected_ms;
            }
            if x.task.job == job.id && x.task.region == r {
                let last = m.candidates.get(x.candidate)?.last;
                let finish = if w.available { ahead } else { f64::INFINITY };
                return Some((last + 1, finish));
            }
        }
    }
    None
}

/// Per worker, the candidate it would run and its estimate, if it can.
pub type WorkerOptions = Vec<Option<(usize, f64)>>;

/// Per worker, the longest candidate from the next unit of `task`'s
/// region that the worker supports and its estimate, where the worker can
/// run it now. `None` when the task's job is gone.
pub fn longest_options(view: &View, task: &crate::core::Task) -> Option<WorkerOptions> {
    let job = view.jobs.get(&task.job)?;
    let model = job.spec.model;
    let m = &view.models[model];
    let next = job.next_unit(m, task.region);
    let options = (0..view.workers.len())
        .map(|k| {
            let c = longest_from(m, next, k)?;
            let ms = view.estimate(model, c, k);
            ms.is_finite().then_some((c, ms))
        })
        .collect();
    Some(options)
}

/// The longest candidate starting at unit `first` (within its region) that
/// `worker` supports.
pub fn longest_from(m: &ModelUnits, first: usize, worker: usize) -> Option<usize> {
    let region = m.units.get(first)?.region;
    let end = m.regions.get(region)?.units.end;
    (first..end)
        .rev()
        .filter_map(|last| m.candidate(first, last))
        .find(|c| m.candidates[*c].support.contains(worker))
}

/// Job plans under one set of waits. Jobs of one model at the same
/// progress with nothing in flight have the same plan: it is computed once
/// and shared until [`PlanBook::clear`].
pub struct PlanBook<'a> {
    whole_only: bool,
    /// Per model, per worker: the longest step allowed ([`job_plan_capped`]).
    caps: &'a [Vec<f64>],
    plans: Vec<JobPlan>,
    shared: std::collections::HashMap<(usize, &'a [usize]), usize>,
    /// By model: the plan of a job that has run nothing yet.
    unstarted: Vec<Option<usize>>,
}

impl<'a> PlanBook<'a> {
    pub fn new(whole_only: bool) -> PlanBook<'a> {
        PlanBook::capped(whole_only, &[])
    }

    /// Plans whose steps of a job of model `m` on worker `k` are at most
    /// `caps[m][k]` where given ([`job_plan_capped`]).
    pub fn capped(whole_only: bool, caps: &'a [Vec<f64>]) -> PlanBook<'a> {
        PlanBook {
            whole_only,
            caps,
            plans: Vec::new(),
            shared: std::collections::HashMap::new(),
            unstarted: Vec::new(),
        }
    }

    /// Forgets every plan (the waits changed).
    pub fn clear(&mut self) {
        self.plans.clear();
        self.shared.clear();
        self.unstarted.clear();
    }

    /// `job`'s plan under `waits` with the book's caps, computed afresh and
    /// not kept (for waits the book's other plans were not made under).
    pub fn uncached(&self, view: &View, job: &Job, waits: &[f64]) -> JobPlan {
        let caps = self.caps.get(job.spec.model).map_or(&[][..], |c| &c[..]);
        job_plan_capped(view, job, waits, self.whole_only, caps)
    }

    /// The index ([`PlanBook::get`]) of `job`'s plan under `waits`.
    pub fn plan(&mut self, view: &View, job: &'a Job, waits: &[f64]) -> usize {
        if job.running.iter().any(|r| *r) {
            let plan = self.uncached(view, job, waits);
            self.plans.push(plan);
            return self.plans.len() - 1;
        }
        let model = job.spec.model;
        let unstarted = job.done.iter().all(|d| *d == 0);
        let known = if unstarted {
            self.unstarted.get(model).copied().flatten()
        } else {
            self.shared.get(&(model, &job.done[..])).copied()
        };
        if let Some(i) = known {
            return i;
        }
        let plan = self.uncached(view, job, waits);
        self.plans.push(plan);
        let i = self.plans.len() - 1;
        if unstarted {
            if self.unstarted.len() <= model {
                self.unstarted.resize(model + 1, None);
            }
            self.unstarted[model] = Some(i);
        } else {
            self.shared.insert((model, &job.done[..]), i);
        }
        i
    }

    pub fn get(&self, i: usize) -> &JobPlan {
        &self.plans[i]
    }
}
