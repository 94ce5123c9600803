//! A LiteRT file opened for reading: its first subgraph, tensors, buffers
//! and operator codes, what every reader of stretch's `.tflite` files
//! (the cost graph here, the runner's tract loader) starts from.

use crate::schema::litert as fb;
use thiserror::Error;

/// Why bytes do not open as a LiteRT file.
#[derive(Debug, Error)]
pub enum OpenError {
    #[error("not a LiteRT model: {0}")]
    NotLiteRt(String),
    #[error("no subgraph")]
    NoSubgraph,
}

/// The first subgraph of a LiteRT file and what its operators index into.
pub struct FileView<'a> {
    pub subgraph: fb::SubGraph<'a>,
    pub tensors: Vec<fb::Tensor<'a>>,
    pub buffers: Vec<fb::Buffer<'a>>,
    /// The builtin code of each operator code, by index.
    pub codes: Vec<fb::BuiltinOperator>,
}

impl<'a> FileView<'a> {
    /// `bytes` as a LiteRT model with at least one subgraph.
    pub fn open(bytes: &'a [u8]) -> Result<FileView<'a>, OpenError> {
        let model = fb::root_as_model(bytes).map_err(|e| OpenError::NotLiteRt(e.to_string()))?;
        let subgraph = model
            .subgraphs()
            .and_then(|s| (!s.is_empty()).then(|| s.get(0)))
            .ok_or(OpenError::NoSubgraph)?;
        Ok(FileView {
            subgraph,
            tensors: subgraph.tensors().map(|t| t.iter().collect()).unwrap_or_default(),
            buffers: model.buffers().map(|b| b.iter().collect()).unwrap_or_default(),
            codes: model
                .operator_codes()
                .map(|c| c.iter().map(|c| c.builtin_code()).collect())
                .unwrap_or_default(),
        })
    }

    /// Tensor `i`, `None` where the file has none.
    pub fn tensor(&self, i: i32) -> Option<fb::Tensor<'a>> {
        usize::try_from(i).ok().and_then(|k| self.tensors.get(k).copied())
    }

    /// The name of tensor `i`, `t{i}` where it has none.
    pub fn name(&self, i: i32) -> String {
        self.tensor(i)
            .and_then(|t| t.name().map(str::to_string))
            .unwrap_or_else(|| format!("t{i}"))
    }

    /// The bytes of constant tensor `i`; `None` for a computed tensor (no
    /// buffer, or an empty one).
    pub fn data(&self, i: i32) -> Option<&'a [u8]> {
        let t = self.tensor(i)?;
        self.buffers
            .get(t.buffer() as usize)
            .and_then(|b| b.data())
            .map(|d| d.bytes())
            .filter(|d| !d.is_empty())
    }

    /// The builtin code operator `op` names, `None` for an index past the
    /// file's operator codes.
    pub fn code(&self, op: &fb::Operator) -> Option<fb::BuiltinOperator> {
        self.codes.get(op.opcode_index() as usize).copied()
    }
}
