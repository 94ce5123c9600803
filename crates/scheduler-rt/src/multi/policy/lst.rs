//! Least Slack Time, Band's default policy (§4.3.1, Fig. 12).

use super::Policy;
use super::plan::{job_plan, waits};
use crate::multi::core::{Assignment, Requeue, View};

/// Orders queued tasks by slack = deadline − now − expected latency
/// ([`job_plan`]; +∞ without an SLO), ties by earlier arrival, then lower
/// job id, then queue position. Walking that order with the workers' waits
/// updated by each assignment of the call, a task's plan is recomputed and
/// its first step is assigned when its worker is idle and has had no work
/// in this call; other tasks wait. A job that can no longer meet its
/// deadline (negative slack: now + expected latency > deadline) comes after
/// every job that still can, in the same order among themselves: Band drops
/// such jobs at once, here they still run, on a worker no feasible job
/// wants now, and count as violations. The rest of a job goes back to the
/// queue's head.
#[derive(Clone, Debug, Default)]
pub struct Lst {
    /// Only whole-region candidates (see [`super::plan::region_plan`]).
    pub whole_model_only: bool,
}

impl Lst {
    pub fn new(whole_model_only: bool) -> Lst {
        Lst { whole_model_only }
    }

    /// Slack in ms of the job of each queued task, in queue order.
    pub fn slacks(&self, view: &View) -> Vec<f64> {
        let w = waits(view);
        view.queue
            .iter()
            .map(|t| match view.jobs.get(&t.job) {
                Some(job) => {
                    let latency = job_plan(view, job, &w, self.whole_model_only).latency;
                    job.deadline_ms().map_or(f64::INFINITY, |d| d - view.now_ms - latency)
                }
                None => f64::INFINITY,
            })
            .collect()
    }
}

impl Policy for Lst {
    fn name(&self) -> &'static str {
        "lst"
    }

    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        let slacks = self.slacks(view);
        let mut order: Vec<usize> = (0..view.queue.len())
            .filter(|q| view.jobs.contains_key(&view.queue[*q].job))
            .collect();
        order.sort_by(|a, b| {
            let (ja, jb) = (&view.jobs[&view.queue[*a].job], &view.jobs[&view.queue[*b].job]);
            (slacks[*a] < 0.0)
                .cmp(&(slacks[*b] < 0.0))
                .then(slacks[*a].total_cmp(&slacks[*b]))
                .then(ja.spec.arrival_ms.total_cmp(&jb.spec.arrival_ms))
                .then(ja.id.cmp(&jb.id))
                .then(a.cmp(b))
        });
        let mut waits = waits(view);
        let mut given = vec![false; view.workers.len()];
        let mut out = Vec::new();
        for q in order {
            let task = view.queue[q];
            let job = &view.jobs[&task.job];
            let plan = job_plan(view, job, &waits, self.whole_model_only);
            let Some((candidate, worker)) = plan.regions.get(task.region).and_then(|r| r.first) else {
                continue;
            };
            if view.workers[worker].idle() && !given[worker] {
                waits[worker] += view.estimate(job.spec.model, candidate, worker);
                given[worker] = true;
                out.push(Assignment {
                    task,
                    candidate,
                    worker,
                });
            }
        }
        out
    }

    fn requeue(&self) -> Requeue {
        Requeue::Head
    }
}
