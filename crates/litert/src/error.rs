//! Why a subgraph has no LiteRT file.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum LiteRtError {
    /// A node LiteRT has no form for (or none stretch writes).
    #[error("subgraph {subgraph}: node `{node}` ({op}) has no LiteRT form: {reason}")]
    Unsupported {
        subgraph: String,
        node: String,
        op: String,
        reason: String,
    },
    /// Quantization parameters LiteRT's int8 rules cannot take.
    #[error("subgraph {subgraph}: node `{node}`: {reason}")]
    Quantization {
        subgraph: String,
        node: String,
        reason: String,
    },
    #[error("subgraph {subgraph}: input `{tensor}` has rank {rank}; LiteRT files here take rank 4 at most")]
    Rank {
        subgraph: String,
        tensor: String,
        rank: usize,
    },
    #[error("subgraph {subgraph}: input `{tensor}` is {dtype}; LiteRT files here take f32, f16, u8 or i8 inputs")]
    InputType {
        subgraph: String,
        tensor: String,
        dtype: String,
    },
    /// A LiteRT file that cannot be read back.
    #[error("{file}: {reason}")]
    Read { file: String, reason: String },
    #[error("subgraph {subgraph}: {what}")]
    Internal { subgraph: String, what: String },
}
