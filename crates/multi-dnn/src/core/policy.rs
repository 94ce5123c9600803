//! The policy interface the core schedules through: Band's `GetNextJob`
//! and `EnqueueRemaining` as a trait a policy implements, what it may be
//! configured with, and the entry through which the registry knows it.
//! Policies themselves live in `policy/` and in the papers' folders.

use crate::core::{Assignment, Completed, JobId, Requeue, View};
use std::any::Any;
use std::sync::Arc;

/// Band's `GetNextJob` and `EnqueueRemaining`.
pub trait Policy: Send {
    fn name(&self) -> &'static str;
    /// Called when a job arrives and when a worker finishes: the
    /// assignments to make now (possibly none). Each must name a queued
    /// task, a candidate starting at that task's next unit, and an
    /// available worker that supports the candidate.
    fn schedule(&mut self, view: &View) -> Vec<Assignment>;
    /// Where the rest of a job goes after one of its subgraphs finishes.
    fn requeue(&self) -> Requeue;
    /// With a workload that allows drops (`drop_late`), called before
    /// [`Policy::schedule`]: queued jobs with nothing running to drop now
    /// because they can no longer meet their SLO; by default those whose
    /// deadline has passed ([`expired`]).
    fn drops(&mut self, view: &View) -> Vec<JobId> {
        expired(view)
    }
    /// A subgraph of `job` (`model`, `candidate`) finished on `worker` at
    /// `now_ms` after `ms` in the engine.
    fn subgraph_done(&mut self, _now_ms: f64, _job: JobId, _model: usize, _candidate: usize, _worker: usize, _ms: f64) {
    }
    /// A job completed; `worker` ran its last subgraph.
    fn completed(&mut self, _done: &Completed, _worker: usize) {}
    /// Models this policy moved between processors: (ms, model, worker).
    fn moves(&self) -> &[(f64, usize, usize)] {
        &[]
    }
    /// Lines a report should print about this policy's decisions (for
    /// example how often it could not do what it aims at).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// What policies may be configured with, beyond the view: the core's
/// `fixed`, and one value per type an extension sets ([`PolicyOptions::set`])
/// and its policies read back ([`PolicyOptions::get`]).
#[derive(Clone, Debug, Default)]
pub struct PolicyOptions {
    /// `fixed`: the processor of each model (index in the workers), `None`
    /// for the one with the shortest estimated whole-model latency.
    pub fixed: Vec<Option<usize>>,
    extensions: Vec<Extension>,
}

/// One extension's options, by type.
#[derive(Clone)]
struct Extension {
    type_name: &'static str,
    value: Arc<dyn Any + Send + Sync>,
}

impl std::fmt::Debug for Extension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.type_name)
    }
}

impl PolicyOptions {
    /// What `workload` configures for the core's policies on processors
    /// `names` (in worker order): each app's `processor` for `fixed`.
    /// Extensions add theirs through the registry
    /// ([`crate::registry::Registry::options_for`]).
    pub fn for_workload(workload: &crate::core::workload::Workload, names: &[String]) -> PolicyOptions {
        let fixed = workload
            .apps
            .iter()
            .map(|a| a.processor.as_ref().and_then(|p| names.iter().position(|n| n == p)))
            .collect();
        PolicyOptions {
            fixed,
            extensions: Vec::new(),
        }
    }

    /// Sets the options of type `T`, replacing any set before.
    pub fn set<T: Any + Send + Sync>(&mut self, value: T) {
        self.extensions.retain(|e| !e.value.is::<T>());
        self.extensions.push(Extension {
            type_name: std::any::type_name::<T>(),
            value: Arc::new(value),
        });
    }

    /// These options with those of type `T` set to `value`.
    pub fn with<T: Any + Send + Sync>(mut self, value: T) -> PolicyOptions {
        self.set(value);
        self
    }

    /// The options of type `T`, if set.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.extensions.iter().find_map(|e| e.value.downcast_ref::<T>())
    }

    /// These options with every extension option of `other` set over them.
    pub fn overlaid(mut self, other: &PolicyOptions) -> PolicyOptions {
        for e in &other.extensions {
            self.extensions.retain(|x| (*x.value).type_id() != (*e.value).type_id());
            self.extensions.push(e.clone());
        }
        self
    }
}

/// What a policy needs from the run beyond the [`View`]'s queue, workers
/// and latency estimates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// A thermal oracle ([`View::thermal`]): without a run that models the
    /// device's heat the policy sees no temperature rise.
    pub thermal: bool,
    /// A workload with a rendering task, and its options.
    pub render: bool,
}

impl Needs {
    /// Nothing beyond the queue and the estimates.
    pub const NOTHING: Needs = Needs {
        thermal: false,
        render: false,
    };
    /// A thermal oracle.
    pub const THERMAL: Needs = Needs {
        thermal: true,
        render: false,
    };
    /// A rendering task.
    pub const RENDER: Needs = Needs {
        thermal: false,
        render: true,
    };
}

/// One policy as the registry knows it: declared by the file that
/// implements it and listed once in [`crate::registry::Registry::builtin`].
#[derive(Clone, Copy, Debug)]
pub struct PolicyEntry {
    /// The name a command line, a report and [`Policy::name`] use.
    pub name: &'static str,
    /// Other names accepted for it (`rr` for `round-robin`).
    pub aliases: &'static [&'static str],
    /// One line for `--help` and error messages.
    pub summary: &'static str,
    pub needs: Needs,
    /// Makes the policy from the options; the reason when the options lack
    /// what it needs.
    pub make: fn(&PolicyOptions) -> Result<Box<dyn Policy>, String>,
}

impl PolicyEntry {
    /// Whether `name` is this policy's name or one of its aliases.
    pub fn answers_to(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }
}

/// Queued jobs with nothing running whose deadline has passed, in queue order.
pub fn expired(view: &View) -> Vec<JobId> {
    let mut out: Vec<JobId> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for t in view.queue {
        let Some(job) = view.jobs.get(&t.job) else { continue };
        if job.running.iter().any(|r| *r) || !seen.insert(job.id) {
            continue;
        }
        if job.deadline_ms().is_some_and(|d| view.now_ms > d) {
            out.push(job.id);
        }
    }
    out
}
