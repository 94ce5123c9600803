//! Splash's "minimum heat within SLO" policy (§4.5): among the workers that
//! would finish the task by its deadline, the one whose temperature is
//! predicted to rise least.

use crate::core::{Assignment, Requeue, View};
use crate::policy::plan::{longest_options, waits};
use crate::policy::{Needs, Policy, PolicyEntry};

/// One worker's option for a task: the candidate it would run, its
/// estimate, the expected finish (wait + estimate, relative to now) and
/// the predicted temperature rise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThermalOption {
    pub worker: usize,
    pub candidate: usize,
    pub ms: f64,
    pub finish_ms: f64,
    /// °C; 0 for a worker the thermal model has not learnt yet, so that
    /// every worker gets tried.
    pub rise_c: f64,
}

/// Places queued tasks first-in first-out (Splash Algorithm 1), each on the
/// worker `choose` picks among the options of the workers that can run
/// it, into that worker's own queue; the waits grow with each placement.
/// A worker's latency is the thermal oracle's for its temperature bin where
/// it has one (Splash §4.3), else the estimator's.
/// A task that no available worker can run stays queued.
pub fn place_fifo(view: &View, mut choose: impl FnMut(f64, &[ThermalOption]) -> usize) -> Vec<Assignment> {
    let mut waits = waits(view);
    let mut out = Vec::new();
    for task in view.queue {
        let Some(per_worker) = longest_options(view, task) else {
            continue;
        };
        let options: Vec<ThermalOption> = per_worker
            .into_iter()
            .enumerate()
            .filter_map(|(k, o)| {
                let (c, estimate) = o?;
                let model = view.job(task.job).spec.model;
                let ms = view.thermal.and_then(|t| t.latency_ms(model, c, k)).unwrap_or(estimate);
                let cand = &view.model_of(*task).candidates[c];
                let io = (cand.in_bytes, cand.out_bytes);
                let finish_ms = waits[k] + ms;
                finish_ms.is_finite().then(|| ThermalOption {
                    worker: k,
                    candidate: c,
                    ms,
                    finish_ms,
                    rise_c: view.thermal.and_then(|t| t.rise_c(k, ms, io)).unwrap_or(0.0).max(0.0),
                })
            })
            .collect();
        if options.is_empty() {
            continue;
        }
        let budget = view
            .job(task.job)
            .deadline_ms()
            .map_or(f64::INFINITY, |d| d - view.now_ms);
        let pick = options[choose(budget, &options).min(options.len() - 1)];
        waits[pick.worker] += pick.ms;
        out.push(Assignment {
            task: *task,
            candidate: pick.candidate,
            worker: pick.worker,
        });
    }
    out
}

/// Lowest `key`, ties to the earlier finish, then the lower worker index.
pub fn argmin_by(options: &[ThermalOption], key: impl Fn(&ThermalOption) -> f64) -> usize {
    (0..options.len())
        .min_by(|a, b| {
            let (x, y) = (&options[*a], &options[*b]);
            key(x)
                .total_cmp(&key(y))
                .then(x.finish_ms.total_cmp(&y.finish_ms))
                .then(x.worker.cmp(&y.worker))
        })
        .unwrap_or(0)
}

/// Minimum predicted temperature rise among the workers that meet the
/// task's SLO with their waiting time; when none meets it, the earliest
/// finish, and the decision is counted in [`MinHeat::fallbacks`].
#[derive(Clone, Debug, Default)]
pub struct MinHeat {
    fallbacks: u64,
    decisions: u64,
}

impl MinHeat {
    /// Decisions where no worker met the SLO and the fastest was taken.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks
    }

    /// The index in `options` this policy picks for a task with `budget_ms` left.
    pub fn choose(&mut self, budget_ms: f64, options: &[ThermalOption]) -> usize {
        self.decisions += 1;
        if options.iter().all(|o| o.finish_ms > budget_ms) {
            self.fallbacks += 1;
            return argmin_by(options, |o| o.finish_ms);
        }
        argmin_by(options, |o| {
            if o.finish_ms <= budget_ms {
                o.rise_c.min(f64::MAX)
            } else {
                f64::INFINITY
            }
        })
    }
}

/// The registry's entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "min-heat",
    aliases: &[],
    summary: "Splash: the least predicted heating among workers that meet the SLO",
    needs: Needs::THERMAL,
    make: |_| Ok(Box::new(MinHeat::default())),
};

impl Policy for MinHeat {
    fn name(&self) -> &'static str {
        "min-heat"
    }

    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        place_fifo(view, |budget, options| self.choose(budget, options))
    }

    fn requeue(&self) -> Requeue {
        Requeue::Head
    }

    fn notes(&self) -> Vec<String> {
        if self.fallbacks == 0 {
            return Vec::new();
        }
        vec![format!(
            "min-heat: {} of {} decisions found no worker that meets the SLO and took the fastest",
            self.fallbacks, self.decisions
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opt(worker: usize, finish_ms: f64, rise_c: f64) -> ThermalOption {
        ThermalOption {
            worker,
            candidate: 0,
            ms: finish_ms,
            finish_ms,
            rise_c,
        }
    }

    #[test]
    fn coolest_among_those_in_time_else_fastest() {
        let mut p = MinHeat::default();
        let options = [opt(0, 10.0, 5.0), opt(1, 30.0, 0.5), opt(2, 50.0, 0.1)];
        assert_eq!(p.choose(35.0, &options), 1, "the NPU-like worker 2 misses the SLO");
        assert_eq!(p.choose(60.0, &options), 2);
        assert_eq!(p.fallbacks(), 0);
        assert_eq!(p.choose(5.0, &options), 0, "none in time: fastest");
        assert_eq!(p.fallbacks(), 1);
        assert_eq!(p.notes().len(), 1);
    }
}
