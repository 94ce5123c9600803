//! TFLite-style fixed processors: each model runs on its own processor,
//! with the operators that processor lacks falling back to another.

use crate::core::units::ModelUnits;
use crate::core::{Assignment, Requeue, View};
use crate::policy::{Needs, Policy, PolicyEntry};
use std::collections::HashMap;

/// Each model has one processor `p`: the configured one, or else the
/// worker whose fixed plan has the smallest estimated total (ties: lower
/// index), chosen on the model's first use once some plan's total is
/// known (until then the lowest-index worker supporting the whole model,
/// or worker 0). A configured index outside the workers counts as unset.
///
/// A job's units that `p` supports run on `p`, the longest run of them as
/// one candidate. A run of units `p` does not support (every unit while
/// `p` is unavailable) falls back to the lowest-index available worker
/// supporting all of it; where no worker does, to the one supporting the
/// longest prefix of it (ties: lower index). Every queued task is assigned
/// at once, in queue order, to its worker's own queue, busy or not. The
/// rest of a job goes to the queue's tail.
#[derive(Clone, Debug, Default)]
pub struct Fixed {
    configured: Vec<Option<usize>>,
    chosen: HashMap<usize, usize>,
}

impl Fixed {
    /// `configured[model]`: that model's processor, `None` to choose it.
    pub fn new(configured: Vec<Option<usize>>) -> Fixed {
        Fixed {
            configured,
            chosen: HashMap::new(),
        }
    }

    /// The processor of `model` (choosing it if needed).
    pub fn processor(&mut self, view: &View, model: usize) -> usize {
        let workers = view.workers.len();
        if let Some(Some(p)) = self.configured.get(model).filter(|p| p.is_some_and(|p| p < workers)) {
            return *p;
        }
        if let Some(p) = self.chosen.get(&model) {
            return *p;
        }
        let best = (0..workers)
            .map(|p| (p, total(view, model, p)))
            .filter(|(_, t)| t.is_finite())
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        match best {
            Some((p, _)) => {
                self.chosen.insert(model, p);
                p
            }
            None => view.models[model]
                .whole_model_support()
                .iter()
                .find(|p| *p < workers)
                .unwrap_or(0),
        }
    }
}

/// The candidate and worker running units from `from` of `model` with
/// processor `p`; `ignore_outages` treats every worker as available.
fn step(view: &View, model: usize, from: usize, p: usize, ignore_outages: bool) -> Option<(usize, usize)> {
    let m: &ModelUnits = &view.models[model];
    let end = m.regions.get(m.units.get(from)?.region)?.units.end;
    let up = |k: usize| ignore_outages || view.workers.get(k).is_some_and(|w| w.available);
    let on_p = |u: usize| up(p) && m.units[u].support.contains(p);
    if on_p(from) {
        let last = (from..end).take_while(|u| on_p(*u)).last()?;
        return m.candidate(from, last).map(|c| (c, p));
    }
    let run_end = (from..end).find(|u| on_p(*u)).unwrap_or(end);
    let (len, worker) = (0..view.workers.len())
        .filter(|k| up(*k))
        .map(|k| {
            (
                (from..run_end).take_while(|u| m.units[*u].support.contains(k)).count(),
                k,
            )
        })
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))?;
    if len == 0 {
        return None;
    }
    m.candidate(from, from + len - 1).map(|c| (c, worker))
}

/// Estimated ms of the whole of `model` on processor `p` with its fallbacks.
fn total(view: &View, model: usize, p: usize) -> f64 {
    let m = &view.models[model];
    let mut sum = 0.0;
    for region in &m.regions {
        let mut u = region.units.start;
        while u < region.units.end {
            let Some((c, k)) = step(view, model, u, p, true) else {
                return f64::INFINITY;
            };
            sum += view.estimator.estimate(model, c, k);
            u = m.candidates[c].last + 1;
        }
    }
    sum
}

/// The registry's entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "fixed",
    aliases: &[],
    summary: "TFLite-style: each model on its own processor, operators it lacks falling back",
    needs: Needs::NOTHING,
    make: |o| Ok(Box::new(Fixed::new(o.fixed.clone()))),
};

impl Policy for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        let mut out = Vec::new();
        for task in view.queue {
            let Some(job) = view.jobs.get(&task.job) else {
                continue;
            };
            let model = job.spec.model;
            let p = self.processor(view, model);
            let next = job.next_unit(&view.models[model], task.region);
            if let Some((candidate, worker)) = step(view, model, next, p, false) {
                out.push(Assignment {
                    task: *task,
                    candidate,
                    worker,
                });
            }
        }
        out
    }

    fn requeue(&self) -> Requeue {
        Requeue::Tail
    }
}
