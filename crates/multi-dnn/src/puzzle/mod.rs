//! Puzzle ('25): a static analyzer that searches, for a known set of
//! model groups, how to cut each model into subgraphs, where each runs
//! and which model goes first, with a genetic algorithm over a simulator
//! (§4), and a runtime that executes the plan (§5).
//!
//! - [`breakdown`]: where a plan's request latencies go;
//! - [`chromosome`]: the three chromosomes and their decoding;
//! - [`evaluate`]: a plan through the multi-DNN simulator, makespans;
//! - [`score`]: XRBench score, saturation multiplier;
//! - [`bound`]: the ideal α* no plan beats, on a relaxation of the costs;
//! - [`nsga`], [`ga`]: the search;
//! - [`plan_file`]: plans as JSON for `serve --plan` and `simulate --plan`;
//! - [`mapping`]: model-level mappings, the baselines;
//! - [`analysis`]: the whole static analysis as one call;
//! - [`measured`]: device-in-the-loop costs (§4.3), [`retime`]: choosing
//!   among the front on fresh timings.

pub mod analysis;
pub mod bound;
pub mod breakdown;
pub mod chromosome;
pub mod evaluate;
pub mod ga;
pub mod group_figures;
pub mod mapping;
pub mod measured;
pub mod nsga;
pub mod plan_file;
pub mod retime;
pub mod score;
pub mod served;
pub mod static_plan;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum PuzzleError {
    #[error("model '{model}': {reason}")]
    Model { model: String, reason: String },
    #[error("{file}: {reason}")]
    Plan { file: String, reason: String },
    #[error("{step}: {reason}")]
    Measure { step: String, reason: String },
    #[error(transparent)]
    Timing(#[from] scheduler_rt::timing::TimingError),
    #[error(transparent)]
    Costs(#[from] crate::predicted::CostError),
    #[error(transparent)]
    Workload(#[from] crate::core::workload::WorkloadError),
}
