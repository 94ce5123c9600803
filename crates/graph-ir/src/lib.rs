//! `graph-ir`: the intermediate representation every part of stretch builds on.
//!
//! A [`Graph`] holds named nodes with a typed [`Op`], the [`Outlet`]s they
//! read, the [`Fact`] (dtype and static shape) of each output and free-form
//! annotations. Adding a node runs its shape inference and fails with the
//! node's name; [`Graph::check`] re-infers every node. Weights are constant
//! nodes owned by the graph. Rewrites go through [`Patch`]. [`onnx`] imports
//! and exports ONNX models; [`analysis`] finds blocks and stages.
//!
//! This crate knows nothing of execution, threads, devices or training.

pub mod analysis;
pub mod builder;
mod cost;
mod error;
mod fingerprint;
mod graph;
mod metadata;
pub mod onnx;
pub mod ops;
mod patch;
pub mod plain_file;
mod random;
pub mod rng;
pub mod stats;
mod tensor;
pub mod zoo;

pub use cost::NodeCost;
pub use error::GraphError;
pub use graph::{Graph, Node, NodeId, Outlet};
pub use ops::{Cost, Op};
pub use patch::{Patch, PatchNode, PatchOutlet};
pub use random::uniform_tensor;
pub use tensor::{DType, DataLengthMismatch, Fact, Tensor};

/// Annotation keys shared by the crates that write and read them.
pub mod keys {
    /// The processor a node runs on (`cpu`, `gpu`, `dsp`, ...).
    pub const PROCESSOR: &str = "processor";
    /// Marks the node that merges branches (`true`), or names the meeting point.
    pub const MEETING_POINT: &str = "meeting_point";
    /// Index of the stage a node belongs to.
    pub const STAGE: &str = "stage";
    /// Index of the branch a node belongs to within its stage.
    pub const BRANCH: &str = "branch";
    /// Model metadata of a branched model: the MACs of the model it was
    /// branched from.
    pub const ORIGINAL_MACS: &str = "stretch.original_macs";
    /// Model metadata of a branched model: the
    /// [`fingerprint`](crate::Graph::fingerprint) of the model it was
    /// branched from.
    pub const ORIGINAL_FINGERPRINT: &str = "stretch.original_fingerprint";
    /// Model metadata: the precision each processor's nodes compute in
    /// (`cpu=int8,gpu=fp16`), written by quantization; absent, everything
    /// is fp32.
    pub const PRECISIONS: &str = "stretch.precisions";
    /// Model metadata of a trained model: the per-channel mean subtracted
    /// from pixel values in `[0, 1]` before its input (`0.49,0.48,0.45`).
    pub const INPUT_MEAN: &str = "stretch.input_mean";
    /// Model metadata of a trained model: the per-channel divisor applied
    /// after the mean is subtracted.
    pub const INPUT_STD: &str = "stretch.input_std";
}
