//! Least Slack Time, Band's default policy (§4.3.1, Fig. 12).

use crate::core::{Assignment, Job, Requeue, View};
use crate::policy::plan::{JobPlan, job_plan, waits};
use crate::policy::{Needs, Policy, PolicyEntry};
use std::collections::HashMap;

/// Orders queued tasks by slack = deadline − now − expected latency
/// ([`job_plan`]; +∞ without an SLO), ties by earlier arrival, then lower
/// job id, then queue position. Walking that order with the workers' waits
/// updated by each assignment of the call, a task's plan is recomputed and
/// its first step is assigned when its worker is idle and has had no work
/// in this call; other tasks wait. A job that can no longer meet its
/// deadline (negative slack: now + expected latency > deadline) comes after
/// every job that still can, shortest expected latency first (it is late
/// whatever its order; the shortest frees its worker soonest for jobs that
/// can still make it): Band drops such jobs at once, here they still run,
/// on a worker no feasible job wants now, and count as violations; with a
/// workload that allows drops (`drop_late`) those whose deadline has
/// passed are dropped ([`crate::core::Policy::drops`]). The rest of a job
/// goes back to the queue's head.
#[derive(Clone, Debug, Default)]
pub struct Lst {
    /// Only whole-region candidates (see [`crate::policy::plan::region_plan`]).
    pub whole_model_only: bool,
}

impl Lst {
    pub fn new(whole_model_only: bool) -> Lst {
        Lst { whole_model_only }
    }

    /// Slack in ms of the job of each queued task, in queue order.
    pub fn slacks(&self, view: &View) -> Vec<f64> {
        self.plans(view, &waits(view))
            .into_iter()
            .map(|p| p.map_or(f64::INFINITY, |p| p.1))
            .collect()
    }

    /// Each queued task's job plan and slack under `waits` (`None` for a
    /// task whose job is gone). Jobs of one model at the same progress with
    /// nothing in flight have the same plan; it is computed once.
    fn plans(&self, view: &View, waits: &[f64]) -> Vec<Option<(JobPlan, f64)>> {
        let mut same = PlanCache::default();
        view.queue
            .iter()
            .map(|t| {
                let job = view.jobs.get(&t.job)?;
                let plan = self.plan(view, job, waits, &mut same);
                let slack = job
                    .deadline_ms()
                    .map_or(f64::INFINITY, |d| d - view.now_ms - plan.latency);
                Some((plan, slack))
            })
            .collect()
    }

    fn plan(&self, view: &View, job: &Job, waits: &[f64], same: &mut PlanCache) -> JobPlan {
        if job.running.iter().any(|r| *r) {
            return job_plan(view, job, waits, self.whole_model_only);
        }
        same.entry((job.spec.model, job.done.clone()))
            .or_insert_with(|| job_plan(view, job, waits, self.whole_model_only))
            .clone()
    }
}

/// Plans of jobs with nothing in flight by (model, units done per region),
/// valid for one set of waits.
type PlanCache = HashMap<(usize, Vec<usize>), JobPlan>;

/// The registry's entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "lst",
    aliases: &[],
    summary: "Least Slack Time, Band's default",
    needs: Needs::NOTHING,
    make: |_| Ok(Box::new(Lst::new(false))),
};

/// The registry's entry for LST over whole-model (per region) subgraphs
/// only, no splits.
pub const WHOLE: PolicyEntry = PolicyEntry {
    name: "lst-whole",
    aliases: &[],
    summary: "LST over whole-model subgraphs only",
    needs: Needs::NOTHING,
    make: |_| Ok(Box::new(Lst::new(true))),
};

impl Policy for Lst {
    fn name(&self) -> &'static str {
        "lst"
    }

    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        let mut waits = waits(view);
        let mut given: Vec<bool> = view.workers.iter().map(|w| !w.idle()).collect();
        if given.iter().all(|g| *g) {
            return Vec::new();
        }
        let mut plans = self.plans(view, &waits);
        let slack = |q: usize, plans: &[Option<(JobPlan, f64)>]| plans[q].as_ref().map_or(f64::INFINITY, |p| p.1);
        let mut order: Vec<usize> = (0..view.queue.len()).filter(|q| plans[*q].is_some()).collect();
        order.sort_by(|a, b| {
            let (ja, jb) = (&view.jobs[&view.queue[*a].job], &view.jobs[&view.queue[*b].job]);
            let (sa, sb) = (slack(*a, &plans), slack(*b, &plans));
            let late = |s: f64, q: usize| (s < 0.0).then(|| plans[q].as_ref().map_or(f64::INFINITY, |p| p.0.latency));
            let (la, lb) = (late(sa, *a), late(sb, *b));
            la.is_some()
                .cmp(&lb.is_some())
                .then(match (la, lb) {
                    (Some(x), Some(y)) => x.total_cmp(&y),
                    _ => sa.total_cmp(&sb),
                })
                .then(ja.spec.arrival_ms.total_cmp(&jb.spec.arrival_ms))
                .then(ja.id.cmp(&jb.id))
                .then(a.cmp(b))
        });
        let mut stale = false;
        let mut same = PlanCache::default();
        let mut out = Vec::new();
        for q in order {
            let task = view.queue[q];
            let job = &view.jobs[&task.job];
            if stale {
                plans[q] = Some((self.plan(view, job, &waits, &mut same), 0.0));
            }
            let first = plans[q]
                .as_ref()
                .and_then(|p| p.0.regions.get(task.region))
                .and_then(|r| r.first);
            let Some((candidate, worker)) = first else {
                continue;
            };
            if given[worker] {
                continue;
            }
            waits[worker] += view.estimate(job.spec.model, candidate, worker);
            given[worker] = true;
            stale = true;
            same.clear();
            out.push(Assignment {
                task,
                candidate,
                worker,
            });
            if given.iter().all(|g| *g) {
                break;
            }
        }
        out
    }

    fn requeue(&self) -> Requeue {
        Requeue::Head
    }
}
