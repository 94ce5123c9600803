//! ONNX import and export.
//!
//! Import reads a `ModelProto` (zero-copy: weights keep pointing into the
//! file's bytes), fixes every dimension to a static size, folds `Identity`,
//! `Dropout` and constant subgraphs away, and builds a checked [`Graph`].
//! Export writes a model at opset [`EXPORT_OPSET`] that `onnx.checker` and
//! onnxruntime accept; node annotations travel as `NodeProto.metadata_props`.

mod attrs;
mod export;
mod export_attrs;
mod export_compose;

mod fold;
mod fp16_host;
mod import;
mod import_blocks;
mod import_matmul;
mod import_ops;
mod import_resize;
mod import_unary;
mod import_window;
mod node_ctx;
mod qlinear;
mod qlinear_add;
mod qlinear_conv_float;
mod qlinear_quantize;
mod qlinear_view;
mod tensor_proto;

pub use export::{EXPORT_OPSET, export_bytes, export_file};

pub use fp16_host::fp16_rounded;

/// The file tract computes for `onnx`: float16 as float32 rounded after
/// each operator ([`fp16_rounded`]), then QDQ patterns in onnxruntime's
/// integer arithmetic ([`fuse_qdq`]); `None` when neither applies.
pub fn tract_form(onnx: &[u8]) -> Option<Vec<u8>> {
    let rounded = fp16_rounded(onnx);
    let base = rounded.as_deref().unwrap_or(onnx);
    match fuse_qdq(base) {
        Some((fused, _)) => Some(fused),
        None => rounded,
    }
}
pub use import::{ImportOptions, InputShape, import_bytes, import_file};
pub use qlinear::{Fused, fuse_qdq};

/// ONNX operators (default domain) that import as IR nodes (those in
/// [`IMPORTED_AS_OTHER_OPS`] as another operator, or as none).
pub const SUPPORTED_OPS: &[&str] = &[
    "Abs",
    "Add",
    "AveragePool",
    "BatchNormalization",
    "Cast",
    "Clip",
    "Concat",
    "Conv",
    "ConvTranspose",
    "DepthToSpace",
    "DequantizeLinear",
    "Div",
    "Dropout",
    "Elu",
    "Erf",
    "Exp",
    "Flatten",
    "Gather",
    "Gelu",
    "Gemm",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "InstanceNormalization",
    "LRN",
    "LayerNormalization",
    "LeakyRelu",
    "Log",
    "LogSoftmax",
    "MatMul",
    "Max",
    "MaxPool",
    "Min",
    "Mish",
    "Mul",
    "Neg",
    "PRelu",
    "Pad",
    "Pow",
    "QuantizeLinear",
    "ReduceMean",
    "ReduceSum",
    "Relu",
    "Reshape",
    "Resize",
    "Selu",
    "Sigmoid",
    "Slice",
    "Softmax",
    "Softplus",
    "Softsign",
    "SpaceToDepth",
    "Split",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Sum",
    "Tanh",
    "Tile",
    "Transpose",
    "Unsqueeze",
    "Upsample",
];

/// ONNX operators that import only where every input is a constant (shape
/// computations): they are evaluated at import time (`Constant` and `Shape`
/// always).
pub const FOLDED_OPS: &[&str] = &[
    "Cast",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Expand",
    "Gather",
    "Reshape",
    "Shape",
    "Slice",
    "Squeeze",
    "Unsqueeze",
    "Tile",
    "Add",
    "Sub",
    "Mul",
    "Div",
];

/// Entries of [`SUPPORTED_OPS`] that no IR node is named after: `Sum` becomes
/// `Add`, `Squeeze`/`Unsqueeze` become `Reshape`, `Upsample` becomes
/// `Resize`, `Identity`/`Dropout` disappear.
pub const IMPORTED_AS_OTHER_OPS: &[&str] = &["Dropout", "Identity", "Squeeze", "Sum", "Unsqueeze", "Upsample"];

use crate::error::GraphError;
use thiserror::Error;

/// An error from reading an ONNX model.
#[derive(Debug, Error)]
pub enum ImportError {
    #[error(transparent)]
    File(#[from] crate::plain_file::PlainFileError),
    #[error("{path}: not a valid ONNX model ({reason})")]
    NotOnnx { path: String, reason: String },
    #[error("unsupported operator `{op_type}` (node `{node}`, domain `{domain}`, opset {opset})")]
    Unsupported {
        op_type: String,
        node: String,
        domain: String,
        opset: i64,
    },
    #[error("node `{node}` ({op_type}): attribute `{attribute}`: {reason}")]
    BadAttribute {
        node: String,
        op_type: String,
        attribute: String,
        reason: String,
    },
    #[error("node `{node}` ({op_type}): input `{input}` is not produced by any node, initializer or graph input")]
    DanglingInput {
        node: String,
        op_type: String,
        input: String,
    },
    #[error("the graph has a cycle: node `{node}` ({op_type}) depends on its own output")]
    Cycle { node: String, op_type: String },
    #[error("tensor `{name}`: {actual} bytes of data but {dtype} dims {dims:?} need {expected}")]
    WeightLength {
        name: String,
        dims: Vec<i64>,
        dtype: String,
        expected: usize,
        actual: usize,
    },
    #[error("tensor `{name}`: {reason}")]
    BadTensor { name: String, reason: String },
    #[error("node `{node}` ({op_type}): {reason}")]
    Node {
        node: String,
        op_type: String,
        reason: String,
    },
    #[error("graph input `{name}`: {reason}")]
    Input { name: String, reason: String },
    #[error("graph output `{name}` is not produced by any node")]
    Output { name: String },
    #[error("model: {reason}")]
    Model { reason: String },
    #[error("opset import of domain `{domain}`: version {version} {reason}")]
    Opset {
        domain: String,
        version: i64,
        reason: String,
    },
    #[error(
        "IR version {version} is newer than this importer reads (up to {newest}); save the model with an older onnx"
    )]
    IrVersion { version: i64, newest: i64 },
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// An error from writing an ONNX model.
#[derive(Debug, Error)]
pub enum ExportError {
    /// The I/O error is in the message and is not returned by `source()`.
    #[error("{path}: cannot write file: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("node `{node}` ({op}): cannot be written at opset {opset}: {reason}")]
    Node {
        node: String,
        op: &'static str,
        opset: i64,
        reason: String,
    },
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error("protobuf encoding failed: {reason}")]
    Encode { reason: String },
}

#[cfg(test)]
mod op_list_tests {
    use super::*;

    /// The quoted names at the start of match arms in `source` between
    /// `from` and the next line equal to `    };`.
    fn arms(source: &str, from: &str) -> Vec<String> {
        let start = source.find(from).expect("marker");
        let mut out = Vec::new();
        for line in source[start..].lines().skip(1) {
            let t = line.trim_start();
            if line.starts_with("    };") {
                break;
            }
            if t.starts_with('"') && t.contains("=>") {
                let head = t.split("=>").next().unwrap_or_default();
                out.extend(head.split('|').map(|n| n.trim().trim_matches('"').to_string()));
            }
        }
        out
    }

    #[test]
    fn supported_ops_list_every_lowered_op_type_and_nothing_else() {
        let mut lowered = arms(
            include_str!("import_ops.rs"),
            "let lowered = match ctx.proto.op_type.as_str() {",
        );
        lowered.extend(arms(
            include_str!("import_unary.rs"),
            "let op = match ctx.proto.op_type.as_str() {",
        ));
        lowered.sort();
        let mut listed: Vec<String> = SUPPORTED_OPS.iter().map(|s| s.to_string()).collect();
        listed.sort();
        assert_eq!(lowered, listed);
    }

    #[test]
    fn ops_imported_as_others_are_supported_ops() {
        for op in IMPORTED_AS_OTHER_OPS {
            assert!(SUPPORTED_OPS.contains(op), "{op}");
        }
    }
}
