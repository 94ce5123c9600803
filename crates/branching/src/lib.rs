//! `branching` implements NN-Stretch's transformation (MobiSys '23, §3-4):
//! meeting points at stage boundaries, duplicating a stage once per processor
//! and scaling each branch in depth and width ([`branch`]), the constrained
//! search over the (depth, width) grid (paper Eq. 4-6, [`search`]), versioned
//! JSON plans ([`plan`]), the stem split by output channels
//! ([`stem_split`]) and the branched, annotated graph ([`rewrite`]).
//!
//! Every latency here comes from a [`predictor::LatencyModel`]: predicted
//! by a device profile, or measured on this machine where the model times
//! subgraphs (the CLI's `plan --measure-on`).

pub mod branch;
mod error;
pub mod init;
pub mod merge_cost;
pub mod plan;
pub mod rewrite;
pub mod search;
mod stage_search;
pub mod stem_split;

pub use error::BranchError;
pub use plan::{Merge, Plan, Settings};
pub use rewrite::apply_plan;

pub use search::{Candidate, SearchReport, search};
