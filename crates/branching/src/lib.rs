//! `branching` implements NN-Stretch's transformation (MobiSys '23, §3-4):
//! meeting points at stage boundaries, duplicating a stage once per processor
//! and scaling each branch in depth and width ([`branch`]), the constrained
//! search over the (depth, width) grid (paper Eq. 4-6, [`search`]), versioned
//! JSON plans ([`plan`]) and the branched, annotated graph ([`rewrite`]).
//!
//! Every latency here is predicted by a [`predictor::LatencyModel`].

pub mod branch;
mod error;
pub mod init;
pub mod merge_cost;
pub mod plan;
pub mod rewrite;
pub mod search;
pub mod stem_split;

pub use error::BranchError;
pub use plan::{Merge, Plan, Settings};
pub use rewrite::apply_plan;

pub use search::{Candidate, SearchReport, search};
