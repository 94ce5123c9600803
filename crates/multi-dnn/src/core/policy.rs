//! The policy interface the core schedules through: Band's `GetNextJob`
//! and `EnqueueRemaining` as a trait a policy implements, what it may be
//! configured with, and the entry through which the registry knows it.
//! Policies themselves live in `policy/` and in the papers' folders.

use crate::core::{Assignment, Completed, JobId, Requeue, View};

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

/// What policies may be configured with, beyond the view.
#[derive(Clone, Debug, Default)]
pub struct PolicyOptions {
    /// `fixed`: the processor of each model (index in the workers), `None`
    /// for the one with the shortest estimated whole-model latency.
    pub fixed: Vec<Option<usize>>,
    /// The policies that need a rendering task ([`Needs::render`]).
    pub heimdall: Option<HeimdallOptions>,
    /// `max-weighted-ppt`: η of `η · latency (ms) + (1 − η) · Δtemp (°C)`;
    /// `None` for the policy's default.
    pub eta: Option<f64>,
}

impl PolicyOptions {
    /// The render-task options, or why a render policy cannot be made.
    pub fn render(&self) -> Result<&HeimdallOptions, String> {
        self.heimdall
            .as_ref()
            .ok_or_else(|| "needs a workload with a [render] task".to_string())
    }

    /// What `workload` configures on processors `names` (in worker order):
    /// each app's `processor` for `fixed`, and with a `[render]` task the
    /// render-task options (each app starts on its `processor`, else the
    /// render processor; offloading to `render.offload_to`). `eta` stays
    /// unset.
    pub fn for_workload(workload: &crate::core::workload::Workload, names: &[String]) -> PolicyOptions {
        let index = |p: &str| names.iter().position(|n| n == p).unwrap_or(0);
        let fixed = workload
            .apps
            .iter()
            .map(|a| a.processor.as_ref().and_then(|p| names.iter().position(|n| n == p)))
            .collect();
        let heimdall = workload.render.as_ref().map(|r| HeimdallOptions {
            utility: workload.apps.iter().map(|a| a.utility).collect(),
            home: workload
                .apps
                .iter()
                .map(|a| index(a.processor.as_deref().unwrap_or(&r.processor)))
                .collect(),
            margin_ms: r.margin_ms,
            offload: r.offload_to.as_ref().map(|cpu| {
                (
                    index(&r.processor),
                    index(cpu),
                    r.offload_margin,
                    r.offload_cycle_s * 1e3,
                )
            }),
        });
        PolicyOptions {
            fixed,
            heimdall,
            eta: None,
        }
    }
}

/// What Heimdall's coordinator and its baselines are configured with.
#[derive(Clone, Debug, Default)]
pub struct HeimdallOptions {
    /// Per app.
    pub utility: Vec<crate::core::workload::Utility>,
    /// Per model: the worker it starts on.
    pub home: Vec<usize>,
    pub margin_ms: f64,
    /// (render worker, CPU worker, m, cycle ms) for the `-offload` variants.
    pub offload: Option<(usize, usize, f64, f64)>,
}

/// What a policy needs from the run beyond the [`View`]'s queue, workers
/// and latency estimates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// A thermal oracle ([`View::thermal`]): without a run that models the
    /// device's heat the policy sees no temperature rise.
    pub thermal: bool,
    /// A workload with a rendering task, and [`PolicyOptions::render`].
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
