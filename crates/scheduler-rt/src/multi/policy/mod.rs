//! Scheduling policies (Band §4.3.1), one per file. A policy sees a
//! [`View`] (time, queue, jobs, workers' states, estimates) and returns
//! assignments; it never reads a clock or touches a thread, so the
//! simulator runs the very same objects as the runtime.

pub mod fixed;
pub mod heft;
pub mod lst;
pub mod plan;
pub mod round_robin;
pub mod sel;

use super::core::{Assignment, Requeue, View};
pub use fixed::Fixed;
pub use heft::Heft;
pub use lst::Lst;
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
}

/// What policies may be configured with, beyond the view.
#[derive(Clone, Debug, Default)]
pub struct PolicyOptions {
    /// `fixed`: the processor of each model (index in the workers), `None`
    /// for the one with the shortest estimated whole-model latency.
    pub fixed: Vec<Option<usize>>,
    /// `lst`: consider whole-model (per region) subgraphs only, no splits.
    pub whole_model_only: bool,
}

/// The names [`policy_by_name`] accepts.
pub const POLICY_NAMES: &[&str] = &["fixed", "round-robin", "sel", "heft", "lst"];

/// Makes the policy called `name` (`rr` is accepted for `round-robin`).
pub fn policy_by_name(name: &str, options: &PolicyOptions) -> Option<Box<dyn Policy>> {
    match name {
        "fixed" => Some(Box::new(Fixed::new(options.fixed.clone()))),
        "round-robin" | "rr" => Some(Box::new(RoundRobin::default())),
        "sel" => Some(Box::new(Sel)),
        "heft" => Some(Box::new(Heft)),
        "lst" => Some(Box::new(Lst::new(options.whole_model_only))),
        _ => None,
    }
}
