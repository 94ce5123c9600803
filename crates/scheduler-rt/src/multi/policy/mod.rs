//! Scheduling policies (Band §4.3.1), one per file. A policy sees a
//! [`View`] (time, queue, jobs, workers' states, estimates) and returns
//! assignments; it never reads a clock or touches a thread, so the
//! simulator runs the very same objects as the runtime.

pub mod fifo;
pub mod fixed;
pub mod heft;
pub mod lst;
pub mod max_weighted_ppt;
pub mod min_heat;
pub mod offload;
pub mod plan;
pub mod round_robin;
pub mod sel;
pub mod static_plan;
pub mod utility;

use super::core::{Assignment, Completed, JobId, Requeue, View};
pub use fixed::Fixed;
pub use heft::Heft;
pub use lst::Lst;
pub use max_weighted_ppt::MaxWeightedPpt;
pub use min_heat::MinHeat;
pub use round_robin::RoundRobin;
pub use sel::Sel;

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
    /// `lst`: consider whole-model (per region) subgraphs only, no splits.
    pub whole_model_only: bool,
    /// The render-workload policies ([`HEIMDALL_POLICY_NAMES`]).
    pub heimdall: Option<HeimdallOptions>,
    /// `max-weighted-ppt`: η of `η · latency (ms) + (1 − η) · Δtemp (°C)`;
    /// `None` for [`MaxWeightedPpt::DEFAULT_ETA`].
    pub eta: Option<f64>,
}

/// What Heimdall's coordinator and its baselines are configured with.
#[derive(Clone, Debug, Default)]
pub struct HeimdallOptions {
    /// Per app.
    pub utility: Vec<crate::multi::workload::Utility>,
    /// Per model: the worker it starts on.
    pub home: Vec<usize>,
    pub margin_ms: f64,
    /// (render worker, CPU worker, m, cycle ms) for the `-offload` variants.
    pub offload: Option<(usize, usize, f64, f64)>,
}

/// The policies of render workloads: `whole` (whole models in arrival
/// order), `ops5` (5-operator chunks in arrival order), and Heimdall's
/// utility policies, with or without CPU offloading.
pub const HEIMDALL_POLICY_NAMES: &[&str] = &[
    "whole",
    "ops5",
    "maxmin-utility",
    "maxtotal-utility",
    "maxmin-utility-offload",
    "maxtotal-utility-offload",
];

/// The names [`policy_by_name`] accepts.
pub const POLICY_NAMES: &[&str] = &["fixed", "round-robin", "sel", "heft", "lst"];

/// Splash's thermal-aware policies: they need a run that models the
/// device's heat (without one they see no temperature rise).
pub const THERMAL_POLICY_NAMES: &[&str] = &["min-heat", "max-weighted-ppt"];

/// Makes the policy called `name` (`rr` is accepted for `round-robin`).
pub fn policy_by_name(name: &str, options: &PolicyOptions) -> Option<Box<dyn Policy>> {
    match name {
        "fixed" => Some(Box::new(Fixed::new(options.fixed.clone()))),
        "round-robin" | "rr" => Some(Box::new(RoundRobin::default())),
        "sel" => Some(Box::new(Sel)),
        "heft" => Some(Box::new(Heft)),
        "lst" => Some(Box::new(Lst::new(options.whole_model_only))),
        "min-heat" => Some(Box::new(MinHeat::default())),
        "max-weighted-ppt" => Some(Box::new(MaxWeightedPpt::new(
            options.eta.unwrap_or(MaxWeightedPpt::DEFAULT_ETA),
        ))),
        "whole" | "ops5" => Some(Box::new(fifo::Fifo::new(options.heimdall.as_ref()?.home.clone()))),
        "maxmin-utility" | "maxtotal-utility" | "maxmin-utility-offload" | "maxtotal-utility-offload" => {
            let h = options.heimdall.as_ref()?;
            let objective = if name.starts_with("maxmin") {
                utility::Objective::MaxMin
            } else {
                utility::Objective::MaxTotal
            };
            let offload = if name.ends_with("-offload") {
                let (acc, cpu, m, cycle) = h.offload?;
                Some(offload::Offloader::new(acc, cpu, m, cycle))
            } else {
                None
            };
            Some(Box::new(utility::UtilityPolicy::new(
                objective,
                h.utility.clone(),
                h.home.clone(),
                h.margin_ms,
                offload,
            )))
        }
        _ => None,
    }
}
