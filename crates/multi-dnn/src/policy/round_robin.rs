//! Band's round-robin baseline.

use crate::core::{Assignment, Requeue, View};
use crate::policy::plan::longest_from;
use crate::policy::{Needs, Policy, PolicyEntry};

/// Visits the workers in rotation from a pointer; each idle one takes the
/// first task in queue order whose next unit it supports and runs the
/// longest candidate from that unit it supports. The pointer moves past
/// the last worker given work, so the next call starts with the worker
/// after it. The rest of a job goes to the queue's tail.
#[derive(Clone, Debug, Default)]
pub struct RoundRobin {
    next: usize,
}

/// The registry's entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "round-robin",
    aliases: &["rr"],
    summary: "Band's round-robin baseline",
    needs: Needs::NOTHING,
    make: |_| Ok(Box::new(RoundRobin::default())),
};

impl Policy for RoundRobin {
    fn name(&self) -> &'static str {
        "round-robin"
    }

    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        let p = view.workers.len();
        let mut taken = vec![false; view.queue.len()];
        let mut out = Vec::new();
        if p == 0 {
            return out;
        }
        let from = self.next % p;
        for w in (0..p).map(|i| (from + i) % p) {
            if !view.workers[w].idle() {
                continue;
            }
            let pick = view
                .queue
                .iter()
                .enumerate()
                .filter(|(q, _)| !taken[*q])
                .find_map(|(q, task)| {
                    let job = view.jobs.get(&task.job)?;
                    let m = &view.models[job.spec.model];
                    let next = job.next_unit(m, task.region);
                    m.units.get(next).filter(|u| u.support.contains(w))?;
                    longest_from(m, next, w).map(|c| (q, c))
                });
            if let Some((q, candidate)) = pick {
                taken[q] = true;
                self.next = w + 1;
                out.push(Assignment {
                    task: view.queue[q],
                    candidate,
                    worker: w,
                });
            }
        }
        out
    }

    fn requeue(&self) -> Requeue {
        Requeue::Tail
    }
}
