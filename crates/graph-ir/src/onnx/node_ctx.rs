//! One ONNX node being imported ([`NodeCtx`]: its inputs, attributes and
//! error) and what it becomes ([`Lowered`]), shared by the lowering of
//! every operator and by import-time folding.

use super::ImportError;
use super::attrs::Attrs;
use crate::graph::{Graph, Outlet};
use crate::ops::Op;
use crate::tensor::Tensor;
use onnx_ir::NodeProto;

/// The most values a shape-deciding integer input (Reshape target, pads,
/// axes, Slice ranges, Split sizes) may hold.
pub(super) const MAX_SHAPE_OPERAND_LEN: usize = 1024;

/// One ONNX node being imported.
pub(super) struct NodeCtx<'a> {
    pub proto: &'a NodeProto,
    pub name: String,
    pub inputs: Vec<Option<Outlet>>,
    pub opset: i64,
    /// Bytes folding may still allocate in this import ([`super::fold::fold_budget`]).
    pub fold_budget: &'a std::cell::Cell<usize>,
}

/// What an ONNX node becomes.
pub(super) enum Lowered {
    /// Its outputs are these existing values (Identity, Dropout).
    Alias(Vec<Outlet>),
    /// An IR node reading these inputs.
    Op(Op, Vec<Outlet>),
    /// Constants computed at import time.
    Consts(Vec<Tensor>),
    /// Several IR nodes in order: the last one takes the ONNX node's name
    /// and gives its outputs; earlier ones are named `<node>.<suffix>`.
    Chain(Vec<Step>),
}

/// One node of a [`Lowered::Chain`].
pub(super) struct Step {
    pub suffix: &'static str,
    pub op: Op,
    pub inputs: Vec<Src>,
}

/// Where a chained node reads a value.
pub(super) enum Src {
    /// An existing value.
    Value(Outlet),
    /// Output 0 of an earlier step of the chain.
    Step(usize),
    /// A new constant.
    Const(Tensor),
}

impl<'a> NodeCtx<'a> {
    pub fn attrs(&self) -> Attrs<'_> {
        Attrs {
            node: self.proto,
            name: &self.name,
        }
    }

    pub fn err(&self, reason: impl Into<String>) -> ImportError {
        ImportError::Node {
            node: self.name.clone(),
            op_type: self.proto.op_type.clone(),
            reason: reason.into(),
        }
    }

    /// Required input `i`.
    pub fn input(&self, i: usize) -> Result<Outlet, ImportError> {
        self.inputs
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| self.err(format!("missing required input {i}")))
    }

    /// Inputs 0 and 1, and input 2 (a bias) when the node has it.
    pub fn inputs_with_bias(&self) -> Result<Vec<Outlet>, ImportError> {
        let n = if self.inputs.get(2).copied().flatten().is_some() {
            3
        } else {
            2
        };
        self.data_inputs(n)
    }

    /// The first `n` inputs, all required.
    pub fn data_inputs(&self, n: usize) -> Result<Vec<Outlet>, ImportError> {
        (0..n).map(|i| self.input(i)).collect()
    }

    /// Optional constant input `i` as a tensor with data.
    pub fn const_input<'g>(&self, g: &'g Graph, i: usize) -> Result<Option<&'g Tensor>, ImportError> {
        let Some(Some(o)) = self.inputs.get(i) else {
            return Ok(None);
        };
        let what = self.proto.input.get(i).cloned().unwrap_or_default();
        let t = g.const_tensor(*o).ok_or_else(|| {
            self.err(format!(
                "input {i} (`{what}`) must be a constant; computed values are not supported here"
            ))
        })?;
        if !t.has_data() {
            return Err(self.err(format!(
                "input {i} (`{what}`) is a constant without data (structure-only model), but its values decide shapes"
            )));
        }
        Ok(Some(t))
    }

    pub fn const_ints(&self, g: &Graph, i: usize) -> Result<Option<Vec<i64>>, ImportError> {
        match self.const_input(g, i)? {
            None => Ok(None),
            Some(t) if t.volume() > MAX_SHAPE_OPERAND_LEN => Err(self.err(format!(
                "input {i} holds {} values, more than the {MAX_SHAPE_OPERAND_LEN} a shape operand may have",
                t.volume()
            ))),
            Some(t) => t
                .to_i64_vec()
                .map(Some)
                .ok_or_else(|| self.err(format!("input {i} must hold integers"))),
        }
    }

    pub fn const_scalar_f32(&self, g: &Graph, i: usize) -> Result<Option<f32>, ImportError> {
        match self.const_input(g, i)? {
            None => Ok(None),
            Some(t) => match t.to_f64_vec().as_deref() {
                Some([v]) => Ok(Some(*v as f32)),
                _ => Err(self.err(format!("input {i} must be a scalar"))),
            },
        }
    }
}
