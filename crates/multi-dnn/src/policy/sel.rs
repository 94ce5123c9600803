//! Shortest Expected Latency (Band's SEL baseline).

use crate::core::{Assignment, Requeue, View};
use crate::policy::plan::{PlanBook, waits};
use crate::policy::{Needs, Policy, PolicyEntry};

/// Repeatedly takes, among the queued tasks whose best first step
/// ([`job_plan`], with the workers' waits updated by this call's
/// assignments) lands on an idle worker that has had no work in this call,
/// the one whose job has the shortest expected latency (ties: earlier
/// arrival, lower job id, queue position), and assigns that first step;
/// stops when no such task is left. The rest of a job goes back to the
/// queue's head.
#[derive(Clone, Debug, Default)]
pub struct Sel;

/// Latency, arrival, job id, queue position: the order of preference.
type Key = (f64, f64, u64, usize);

/// The registry's entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "sel",
    aliases: &[],
    summary: "Band's Shortest Expected Latency baseline",
    needs: Needs::NOTHING,
    make: |_| Ok(Box::new(Sel)),
};

impl Policy for Sel {
    fn name(&self) -> &'static str {
        "sel"
    }

    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        let mut waits = waits(view);
        let mut given = vec![false; view.workers.len()];
        let mut taken = vec![false; view.queue.len()];
        let mut out = Vec::new();
        let mut book = PlanBook::new(false);
        loop {
            book.clear();
            let mut best: Option<(Key, Assignment, f64)> = None;
            for (q, task) in view.queue.iter().enumerate() {
                let Some(job) = view.jobs.get(&task.job).filter(|_| !taken[q]) else {
                    continue;
                };
                let i = book.plan(view, job, &waits);
                let plan = book.get(i);
                let Some((candidate, worker)) = plan.regions.get(task.region).and_then(|r| r.first) else {
                    continue;
                };
                if !view.workers[worker].idle() || given[worker] {
                    continue;
                }
                let key = (plan.latency, job.spec.arrival_ms, job.id, q);
                let better = best.as_ref().is_none_or(|(b, _, _)| {
                    key.0
                        .total_cmp(&b.0)
                        .then(key.1.total_cmp(&b.1))
                        .then(key.2.cmp(&b.2))
                        .then(key.3.cmp(&b.3))
                        .is_lt()
                });
                if better {
                    let ms = view.estimate(job.spec.model, candidate, worker);
                    best = Some((
                        key,
                        Assignment {
                            task: *task,
                            candidate,
                            worker,
                        },
                        ms,
                    ));
                }
            }
            let Some(((_, _, _, q), a, ms)) = best else {
                break;
            };
            taken[q] = true;
            given[a.worker] = true;
            waits[a.worker] += ms;
            out.push(a);
        }
        out
    }

    fn requeue(&self) -> Requeue {
        Requeue::Head
    }
}
