//! Least Slack Time, Band's default policy (§4.3.1, Fig. 12), with our
//! blocking guard ([`crate::policy::blocking`]).

use crate::core::{Assignment, Job, Requeue, View};
use crate::policy::blocking::BlockingGuard;
use crate::policy::plan::{JobPlan, PlanBook, waits};
use crate::policy::{Needs, Policy, PolicyEntry};

/// Orders queued tasks by slack = deadline − now − expected latency
/// (+∞ without an SLO), ties by earlier arrival, then lower
/// job id, then queue position. Walking that order, a task's plan is
/// recomputed under the workers' waits as updated so far, and its first
/// step is assigned when its worker is idle and has had no work in this
/// call; other tasks wait, but their first step still joins the wait of
/// the worker it is planned on (a queue in rank order), so that a task
/// further down sees the backlog ahead of it and may start on an idle
/// worker instead of queueing behind it. A job that can no longer meet its
/// deadline (negative slack: now + expected latency > deadline) comes after
/// every job that still can, shortest expected latency first (it is late
/// whatever its order; the shortest frees its worker soonest for jobs that
/// can still make it): Band drops such jobs at once, here they still run,
/// on a worker no feasible job wants now, and count as violations; with a
/// workload that allows drops (`drop_late`) those whose deadline has
/// passed are dropped ([`crate::core::Policy::drops`]). The rest of a job
/// goes back to the queue's head.
///
/// Expected latencies and first steps come from Band's shortest sequence
/// ([`crate::policy::plan::job_plan_capped`]) without steps longer than the
/// blocking guard's caps ([`BlockingGuard`]), which it learns from the
/// arrivals it sees.
#[derive(Clone, Debug, Default)]
pub struct Lst {
    /// Only whole-region candidates (see [`crate::policy::plan::region_plan`]).
    pub whole_model_only: bool,
    guard: BlockingGuard,
}

impl Lst {
    pub fn new(whole_model_only: bool) -> Lst {
        Lst {
            whole_model_only,
            guard: BlockingGuard::default(),
        }
    }

    /// Slack in ms of the job of each queued task, in queue order.
    pub fn slacks(&self, view: &View) -> Vec<f64> {
        let waits = waits(view);
        let caps = self.guard.caps(view);
        let mut book = PlanBook::capped(self.whole_model_only, &caps);
        view.queue
            .iter()
            .map(|t| {
                view.jobs.get(&t.job).map_or(f64::INFINITY, |job| {
                    let i = book.plan(view, job, &waits);
                    slack(view, job, book.get(i))
                })
            })
            .collect()
    }
}

fn slack(view: &View, job: &Job, plan: &JobPlan) -> f64 {
    job.deadline_ms()
        .map_or(f64::INFINITY, |d| d - view.now_ms - plan.latency)
}

/// A queued task's place in LST's order, least first: jobs that can still
/// meet their deadline by slack, then late ones by expected latency; ties
/// by arrival, job id, queue position.
struct Rank<'a> {
    late: bool,
    /// Slack, or expected latency when late.
    by: f64,
    job: &'a Job,
    q: usize,
    /// The job's plan under the call's first waits ([`PlanBook::get`]).
    plan: usize,
}

impl Rank<'_> {
    fn order(&self, o: &Rank) -> std::cmp::Ordering {
        self.late
            .cmp(&o.late)
            .then(self.by.total_cmp(&o.by))
            .then(self.job.spec.arrival_ms.total_cmp(&o.job.spec.arrival_ms))
            .then(self.job.id.cmp(&o.job.id))
            .then(self.q.cmp(&o.q))
    }
}

/// The registry's entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "lst",
    aliases: &[],
    summary: "Least Slack Time, Band's default, with a blocking guard for tight frequent apps",
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

    /// Walks the order as the type's contract says.
    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        self.guard.observe(view);
        let mut waits = waits(view);
        let mut given: Vec<bool> = view.workers.iter().map(|w| !w.idle()).collect();
        if given.iter().all(|g| *g) {
            return Vec::new();
        }
        let caps = self.guard.caps(view);
        let mut book = PlanBook::capped(self.whole_model_only, &caps);
        let mut ranks = Vec::with_capacity(view.queue.len());
        for (q, t) in view.queue.iter().enumerate() {
            let Some(job) = view.jobs.get(&t.job) else {
                continue;
            };
            let plan = book.plan(view, job, &waits);
            let s = slack(view, job, book.get(plan));
            let late = s < 0.0;
            ranks.push(Rank {
                late,
                by: if late { book.get(plan).latency } else { s },
                job,
                q,
                plan,
            });
        }
        ranks.sort_by(Rank::order);
        let mut changed = false;
        let mut out = Vec::new();
        for r in &ranks {
            let replanned;
            let plan = if changed {
                replanned = book.uncached(view, r.job, &waits);
                &replanned
            } else {
                book.get(r.plan)
            };
            let Some((candidate, worker)) = plan.regions.get(view.queue[r.q].region).and_then(|x| x.first) else {
                continue;
            };
            waits[worker] += view.estimate(r.job.spec.model, candidate, worker);
            changed = true;
            if given[worker] {
                continue;
            }
            given[worker] = true;
            out.push(Assignment {
                task: view.queue[r.q],
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
