//! The blocking guard of LST: a non-preemptive step of a job with slack to
//! spare must not hold a worker that an app with a tight SLO needs for
//! longer than that app's requests can wait.
//!
//! For every app with an SLO whose requests arrive repeatedly, the guard
//! keeps its arrival rate `λ` (requests per ms, learnt from the arrivals
//! it has seen) and, from a fresh request's plan on idle workers, the
//! workers its plan starts on and its budget `b = SLO − expected latency`:
//! how long such a request may wait for its worker. A step of `d` ms on
//! one of those workers delays the app's requests that arrive while it
//! runs by up to `d`; about `λ · (d − b)` of them then miss their SLO. A
//! job of another model may therefore take a step of at most the `d` at
//! which the expected misses over all protected apps of that worker reach
//! one request: beyond it, the step costs more SLOs than the one it may
//! save. Apps whose budget is not positive cannot be helped and are not
//! protected.

use crate::core::{Job, JobId, JobSpec, View};
use crate::policy::plan::job_plan;
use std::collections::HashMap;

/// What the guard has seen of one app's arrivals.
#[derive(Clone, Debug)]
struct Arrivals {
    model: usize,
    slo_ms: f64,
    count: usize,
    first_ms: f64,
    last_ms: f64,
}

/// Arrival rates learnt across calls, and the caps they imply.
#[derive(Clone, Debug, Default)]
pub struct BlockingGuard {
    apps: HashMap<usize, Arrivals>,
    /// The highest job id counted.
    last_id: Option<JobId>,
}

impl BlockingGuard {
    /// Counts the arrivals not seen before: the jobs at the queue's tail
    /// with ids above every id seen (new requests join the tail, in order).
    pub fn observe(&mut self, view: &View) {
        let seen = self.last_id;
        let fresh: Vec<&Job> = view
            .queue
            .iter()
            .rev()
            .take_while(|t| seen.is_none_or(|s| t.job > s))
            .filter_map(|t| view.jobs.get(&t.job))
            .collect();
        for job in fresh.into_iter().rev() {
            self.last_id = self.last_id.max(Some(job.id));
            let Some(slo_ms) = job.spec.slo_ms else {
                continue;
            };
            let at = job.spec.arrival_ms;
            let e = self.apps.entry(job.spec.app).or_insert(Arrivals {
                model: job.spec.model,
                slo_ms,
                count: 0,
                first_ms: at,
                last_ms: f64::NEG_INFINITY,
            });
            if at > e.last_ms {
                e.count += 1;
                e.last_ms = at;
            }
        }
    }

    /// Per model, per worker: the longest step a job of that model may
    /// take on that worker (infinite where nothing is protected).
    pub fn caps(&self, view: &View) -> Vec<Vec<f64>> {
        let workers = view.workers.len();
        let mut protected: Vec<Vec<(usize, f64, f64)>> = vec![Vec::new(); workers];
        let idle = vec![0.0; workers];
        for (app, a) in &self.apps {
            if a.count < 2 || a.last_ms <= a.first_ms {
                continue;
            }
            let rate = (a.count - 1) as f64 / (a.last_ms - a.first_ms);
            let spec = JobSpec {
                app: *app,
                model: a.model,
                arrival_ms: view.now_ms,
                slo_ms: Some(a.slo_ms),
                frame: None,
                content: 0.0,
            };
            let fresh = Job::unstarted(JobId::MAX, spec, &view.models[a.model]);
            let plan = job_plan(view, &fresh, &idle, false);
            let budget = a.slo_ms - plan.latency;
            if budget.is_nan() || budget <= 0.0 {
                continue;
            }
            for (_, w) in plan.regions.iter().filter_map(|r| r.first) {
                protected[w].push((a.model, budget, rate));
            }
        }
        (0..view.models.len())
            .map(|m| {
                protected
                    .iter()
                    .map(|apps| {
                        let others: Vec<(f64, f64)> = apps
                            .iter()
                            .filter(|(pm, _, _)| *pm != m)
                            .map(|(_, b, r)| (*b, *r))
                            .collect();
                        cap(&others)
                    })
                    .collect()
            })
            .collect()
    }
}

/// The `d` at which `Σ rate · max(0, d − budget)` over `(budget, rate)`
/// reaches one; infinite for none.
pub fn cap(apps: &[(f64, f64)]) -> f64 {
    let mut sorted: Vec<(f64, f64)> = apps.to_vec();
    sorted.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut misses = 0.0;
    let mut rate = 0.0;
    for (i, (b, r)) in sorted.iter().enumerate() {
        rate += r;
        let next = sorted.get(i + 1).map_or(f64::INFINITY, |n| n.0);
        if misses + rate * (next - b) >= 1.0 {
            return b + (1.0 - misses) / rate;
        }
        misses += rate * (next - b);
    }
    f64::INFINITY
}

#[cfg(test)]
mod tests {
    use super::cap;

    #[test]
    fn the_cap_is_where_one_request_is_expected_to_miss() {
        assert_eq!(cap(&[]), f64::INFINITY);
        assert!((cap(&[(0.5, 0.25)]) - 4.5).abs() < 1e-12);
        // Two apps: 0.1/ms from 1 ms, 0.4/ms from 2 ms: 0.1 misses by 2 ms,
        // then 0.5/ms: the remaining 0.9 after 1.8 ms more.
        assert!((cap(&[(2.0, 0.4), (1.0, 0.1)]) - 3.8).abs() < 1e-12);
    }
}
