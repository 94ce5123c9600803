//! Puzzle's runtime policy (§5.2): a static plan fixes every model's
//! subgraphs, their processors and the models' priorities; at run time
//! the coordinator only dispatches subgraphs whose inputs are ready.

use super::Policy;
use crate::multi::core::{Assignment, Requeue, View};

/// Each idle worker takes, among the queued tasks whose next subgraph is
/// planned on it, the one of the highest-priority model (lowest rank),
/// then the earliest arrival, then queue order. The models' units must
/// come from the plan ([`crate::multi::units::from_pieces`]): one
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

impl Policy for StaticPlan {
    fn name(&self) -> &'static str {
        "static-plan"
    }

    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        let mut out: Vec<Assignment> = Vec::new();
        for w in view.idle() {
            let mut best: Option<((usize, f64), Assignment)> = None;
            for t in view.queue {
                if out.iter().any(|a| a.task == *t) {
                    continue;
                }
                let job = view.job(t.job);
                let m = view.model_of(*t);
                let first = job.next_unit(m, t.region);
                let Some(c) = m.candidates_from(first).iter().rev().find_map(|c| {
                    let c = *c as usize;
                    (c < m.candidates.len() && m.candidates[c].support.contains(w)).then_some(c)
                }) else {
                    continue;
                };
                let key = (
                    self.rank.get(job.spec.model).copied().unwrap_or(usize::MAX),
                    job.spec.arrival_ms,
                );
                if best.as_ref().is_none_or(|(k, _)| key < *k) {
                    best = Some((
                        key,
                        Assignment {
                            task: *t,
                            candidate: c,
                            worker: w,
                        },
                    ));
                }
            }
            if let Some((_, a)) = best {
                out.push(a);
            }
        }
        out
    }

    fn requeue(&self) -> Requeue {
        Requeue::Tail
    }
}
