//! Puzzle's runtime policy (§5.2): a static plan fixes every model's
//! subgraphs, their processors and the models' priorities; at run time
//! the coordinator only dispatches subgraphs whose inputs are ready.

use crate::core::{Assignment, Job, Requeue, Task, View};
use crate::policy::Policy;

/// Each idle worker takes, among the queued tasks whose next subgraph is
/// planned on it, the one of the highest-priority model (lowest rank),
/// then the earliest arrival, then queue order. The models' units must
/// come from the plan ([`crate::core::units::from_pieces`]): one
/// candidate per region, runnable on its planned processor only.
#[derive(Clone, Debug)]
pub struct StaticPlan {
    rank: Vec<usize>,
}

impl StaticPlan {
    /// `rank[model]`: 0 runs first.
    pub fn new(rank: Vec<usize>) -> StaticPlan {
        StaticPlan { rank }
    }
}

/// Sort key of a queued task: the model's rank, then its arrival.
type Key = (usize, f64);

impl StaticPlan {
    fn key(&self, job: &Job) -> Key {
        (
            self.rank.get(job.spec.model).copied().unwrap_or(usize::MAX),
            job.spec.arrival_ms,
        )
    }

    /// Each idle worker in turn takes its best task among those the
    /// workers before it left (the policy's rule, spelled out).
    fn in_turn(&self, view: &View, idle: &[usize]) -> Vec<Assignment> {
        let mut out: Vec<Assignment> = Vec::new();
        for &w in idle {
            let mut best: Option<(Key, Assignment)> = None;
            for t in view.queue {
                if out.iter().any(|a| a.task == *t) {
                    continue;
                }
                let job = view.job(t.job);
                let key = self.key(job);
                if !best.as_ref().is_none_or(|(k, _)| key < *k) {
                    continue;
                }
                if let Some(a) = assignment(view, job, *t, w) {
                    best = Some((key, a));
                }
            }
            out.extend(best.map(|(_, a)| a));
        }
        out
    }
}

/// Task `t` (of `job`) on worker `w`: the widest candidate from its next
/// unit that `w` runs, if any.
fn assignment(view: &View, job: &Job, t: Task, w: usize) -> Option<Assignment> {
    let m = &view.models[job.spec.model];
    let candidate = m
        .candidates_from(job.next_unit(m, t.region))
        .iter()
        .rev()
        .find_map(|c| {
            let c = *c as usize;
            (c < m.candidates.len() && m.candidates[c].support.contains(w)).then_some(c)
        })?;
    Some(Assignment {
        task: t,
        candidate,
        worker: w,
    })
}

impl Policy for StaticPlan {
    fn name(&self) -> &'static str {
        "static-plan"
    }

    /// One pass over the queue finds every idle worker's best task; where
    /// two workers would take the same task, [`StaticPlan::in_turn`]
    /// decides (a plan's pieces run on one processor each, so this is rare).
    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        let idle = view.idle();
        if idle.is_empty() || view.queue.is_empty() {
            return Vec::new();
        }
        let mut best: Vec<Option<(Key, Assignment)>> = vec![None; idle.len()];
        for t in view.queue {
            let job = view.job(t.job);
            let key = self.key(job);
            for (slot, &w) in best.iter_mut().zip(&idle) {
                if !slot.as_ref().is_none_or(|(k, _)| key < *k) {
                    continue;
                }
                if let Some(a) = assignment(view, job, *t, w) {
                    *slot = Some((key, a));
                }
            }
        }
        let out: Vec<Assignment> = best.into_iter().flatten().map(|(_, a)| a).collect();
        let clash = out
            .iter()
            .enumerate()
            .any(|(i, a)| out[..i].iter().any(|b| b.task == a.task));
        if clash { self.in_turn(view, &idle) } else { out }
    }

    fn requeue(&self) -> Requeue {
        Requeue::Tail
    }
}
