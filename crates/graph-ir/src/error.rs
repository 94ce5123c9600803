//! Errors of graph construction, rewriting and checking.

use crate::tensor::Fact;
use thiserror::Error;

/// An error from building, rewriting or checking a [`crate::Graph`].
#[derive(Debug, Error, Clone, PartialEq)]
pub enum GraphError {
    #[error("node `{node}` ({op}): {reason}")]
    Inference {
        node: String,
        op: &'static str,
        reason: String,
    },
    #[error(
        "node `{node}`: input {slot} refers to output {outlet_slot} of a node that does not exist or has fewer outputs"
    )]
    BadOutlet {
        node: String,
        slot: usize,
        outlet_slot: usize,
    },
    #[error("node name `{name}` is used twice")]
    DuplicateName { name: String },
    #[error("the graph has a cycle through node `{node}`")]
    Cycle { node: String },
    #[error("check: node `{node}` output {slot} is stored as {stored} but re-inference gives {inferred}")]
    FactMismatch {
        node: String,
        slot: usize,
        stored: Fact,
        inferred: Fact,
    },
    #[error("patch: {reason}")]
    Patch { reason: String },
    #[error("graph output `{name}` refers to a node that does not exist")]
    BadOutput { name: String },
}
