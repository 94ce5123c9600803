//! The baselines of Heimdall's evaluation (MobiCom '20 §9.1): DNNs share a
//! processor in arrival order with no notion of rendering, either as whole
//! models (a multi-threaded engine) or as model-agnostic chunks of a few
//! operators (MACE's partial runs), depending on how the models were cut.

use crate::core::{Assignment, JobId, Requeue, View};
use crate::heimdall::{Placement, chunk_from, options};
use crate::policy::{Needs, Policy, PolicyEntry, PolicyOptions};

fn make(o: &PolicyOptions) -> Result<Box<dyn Policy>, String> {
    let h = options::render(o)?;
    Ok(Box::new(Fifo::new(h.home.clone())))
}

/// The registry's entries: whole models, and 5-operator chunks, in arrival
/// order (how the models were cut decides which).
pub const ENTRIES: [PolicyEntry; 2] = [
    PolicyEntry {
        name: "whole",
        aliases: &[],
        summary: "Heimdall's baseline: whole models in arrival order",
        needs: Needs::RENDER,
        make,
    },
    PolicyEntry {
        name: "ops5",
        aliases: &[],
        summary: "Heimdall's baseline: 5-operator chunks in arrival order",
        needs: Needs::RENDER,
        make,
    },
];

/// Each idle worker takes the first queued task, in queue order, of a job
/// placed on it and runs that job's next chunk there. The rest of a job
/// goes to the queue's tail, so jobs sharing a worker take turns chunk by
/// chunk.
#[derive(Clone, Debug)]
pub struct Fifo {
    placement: Placement,
}

impl Fifo {
    /// `home[model]`: the worker each model runs on.
    pub fn new(home: Vec<usize>) -> Fifo {
        Fifo {
            placement: Placement::new(home),
        }
    }
}

impl Policy for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }

    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        let mut out = Vec::new();
        for w in view.idle() {
            let pick = view.queue.iter().find_map(|t| {
                let job = view.job(t.job);
                (self.placement.of(job) == w)
                    .then(|| chunk_from(view, job, t.region, w))
                    .flatten()
                    .map(|c| (*t, c))
            });
            if let Some((task, candidate)) = pick {
                self.placement.place(task.job, w);
                out.push(Assignment {
                    task,
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

    fn completed(&mut self, done: &crate::Completed, _worker: usize) {
        self.placement.forget(done.job as JobId);
    }
}
