//! Model-level HEFT, the Splash baseline: every queued task is placed at
//! once on the worker where it would finish earliest, busy or not.

use crate::core::{Assignment, Requeue, View};
use crate::policy::plan::{WorkerOptions, longest_options, waits};
use crate::policy::{Needs, Policy, PolicyEntry};

/// A task runs, on each worker, the longest candidate from its next unit
/// that the worker supports. Its rank is the mean estimate of that
/// candidate over the workers that can run it now; tasks are placed in
/// decreasing rank (ties: queue order), each on the worker with the
/// earliest finish `wait + estimate` (ties: lower index), into that
/// worker's own queue; the waits grow with each placement. A task no
/// available worker can run stays queued. The rest of a job goes back to
/// the queue's head.
#[derive(Clone, Debug, Default)]
pub struct Heft;

/// The registry's entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "heft",
    aliases: &[],
    summary: "model-level HEFT: each task where it would finish earliest (Splash's baseline)",
    needs: Needs::NOTHING,
    make: |_| Ok(Box::new(Heft)),
};

impl Policy for Heft {
    fn name(&self) -> &'static str {
        "heft"
    }

    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        let mut ranked: Vec<(f64, usize, WorkerOptions)> = Vec::new();
        for (q, task) in view.queue.iter().enumerate() {
            let Some(options) = longest_options(view, task) else {
                continue;
            };
            let runnable: Vec<f64> = options.iter().flatten().map(|(_, ms)| *ms).collect();
            if runnable.is_empty() {
                continue;
            }
            let rank = runnable.iter().sum::<f64>() / runnable.len() as f64;
            ranked.push((rank, q, options));
        }
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut waits = waits(view);
        let mut out = Vec::new();
        for (_, q, options) in ranked {
            let best = options
                .iter()
                .enumerate()
                .filter_map(|(k, o)| o.map(|(c, ms)| (k, c, ms, waits[k] + ms)))
                .filter(|x| x.3.is_finite())
                .min_by(|a, b| a.3.total_cmp(&b.3).then(a.0.cmp(&b.0)));
            if let Some((worker, candidate, ms, _)) = best {
                waits[worker] += ms;
                out.push(Assignment {
                    task: view.queue[q],
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
