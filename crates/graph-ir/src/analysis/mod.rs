//! Structure of a sequential CNN found from its graph (never from names):
//! stem, stages made of blocks, and head.
//!
//! - A *cut* is a value every input-to-output path goes through.
//! - An *identity-residual block* is the region between two cuts closed by an
//!   `Add` whose other input is the region's entry (plus a trailing activation).
//! - *Boundaries* are cuts where one unit of the network ends: the stem's end
//!   (first convolution with its activation and pooling), residual block entries
//!   and exits, linear bottleneck outputs (a Conv/BatchNorm value read by a
//!   Conv, as in MobileNetV2 and EfficientNet), pooling outputs, module
//!   outputs that a Concat joins (SqueezeNet's fire, Inception, ShuffleNet
//!   units), and the head's start. A unit without a convolution or matrix
//!   product (a lone pooling) joins the unit before it, so no stage is empty.
//! - A *stage* is a transition unit plus the following run of blocks of its
//!   output's shape (identity-residual ones, or modules that keep the
//!   shape); a block whose shape differs from the stage's starts a new stage.
//! - The *head* starts at the last boundary before the first value whose spatial
//!   dimensions are reduced away (global pooling, flatten to rank below 4,
//!   fully connected), or before the first segment that enlarges a map
//!   (Resize, ConvTranspose: a decoder), whichever comes first; it holds the
//!   rest of the graph, every output of a multi-output model included.
//!   [`Structure::head_reason`] says which.

mod blocks;
mod cuts;
mod stages;
mod summary;

pub use stages::analyze;
pub use summary::{PartSummary, Summary};

use crate::graph::{NodeId, Outlet};
use serde::Serialize;
use thiserror::Error;

/// Why a graph could not be analysed as a sequential CNN.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum AnalysisError {
    #[error(
        "stage analysis needs exactly one graph input and at least one output, found {inputs} inputs and {outputs} outputs"
    )]
    NotSingleInputOutput { inputs: usize, outputs: usize },
    #[error("stage analysis needs a convolution, the graph has none")]
    NoConvolution,
    #[error(transparent)]
    Graph(#[from] crate::GraphError),
}

/// Nodes between an entry value and an exit value (constants and inputs excluded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub input: Outlet,
    pub output: Outlet,
    pub nodes: Vec<NodeId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockKind {
    /// Changes shape or has no identity shortcut (downsampling block, stem-like layers).
    Transition,
    /// Closed by an `Add` of its own entry: input and output shapes are equal.
    Residual,
}

/// One block of a stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub kind: BlockKind,
    pub segment: Segment,
}

/// A stage: blocks in order; `blocks[0]` is the transition when there is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stage {
    pub index: usize,
    pub blocks: Vec<Block>,
}

impl Stage {
    pub fn input(&self) -> Outlet {
        self.blocks[0].segment.input
    }

    pub fn output(&self) -> Outlet {
        self.blocks[self.blocks.len() - 1].segment.output
    }

    /// All nodes of the stage in order.
    pub fn nodes(&self) -> Vec<NodeId> {
        self.blocks
            .iter()
            .flat_map(|b| b.segment.nodes.iter().copied())
            .collect()
    }

    /// Number of residual blocks.
    pub fn residual_blocks(&self) -> usize {
        self.blocks.iter().filter(|b| b.kind == BlockKind::Residual).count()
    }
}

/// The structure of a sequential CNN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Structure {
    pub stem: Segment,
    pub stages: Vec<Stage>,
    pub head: Segment,
    /// Why the head starts where it does (names the node that decides it).
    pub head_reason: String,
}
