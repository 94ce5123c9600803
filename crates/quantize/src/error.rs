//! Why a model could not be quantized.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum QuantizeError {
    #[error(transparent)]
    Graph(#[from] graph_ir::GraphError),
    #[error("{}processor `{processor}` is not one of the device's: {available}", node.as_ref().map(|n| format!("node `{n}`: ")).unwrap_or_default())]
    UnknownProcessor {
        node: Option<String>,
        processor: String,
        available: String,
    },
    #[error(
        "node `{node}` has no `processor` annotation: quantize a branched model (stretch branch writes them), or say which processor runs the whole model (--processor)"
    )]
    Unannotated { node: String },
    #[error("{got} calibrated ranges for {want} activations")]
    Ranges { want: usize, got: usize },
    #[error("the model is already quantized ({what}): quantize its fp32 original")]
    AlreadyQuantized { what: String },
    #[error("activation `{tensor}` saw no finite value on the calibration samples")]
    NoRange { tensor: String },
    #[error("`{name}` of the folded model matches no node of the model it was folded from")]
    Unmatched { name: String },
    #[error("{count} node(s) of int8 processors have no int8 form (--strict): {nodes}")]
    Strict { count: usize, nodes: String },
}
