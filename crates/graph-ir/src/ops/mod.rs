//! The closed set of operators the IR knows, with typed attributes mirroring
//! ONNX. Each operator's shape inference and cost live in its own file.
//!
//! Inputs follow ONNX order, but operands that ONNX passes as constant inputs
//! in recent opsets (Reshape's shape, Slice's ranges, Pad's pads, Clip's bounds,
//! Split's sizes, reduction axes, Tile's repeats, Resize's scales) are attributes here: a node's inputs are
//! only values that flow (activations and weights).

mod batch_norm;
pub(crate) mod binary;
mod concat;
mod conv;
mod conv_transpose;
mod depth_space;
mod gather;
mod gemm;
mod instance_norm;
mod layer_norm;
pub(crate) mod layout;
mod lrn;
mod pad;
mod pool;
mod quantize;
mod reduce;
mod resize;
pub(crate) mod slice;
mod softmax;
mod split;
mod tile;
mod unary;

pub use batch_norm::BatchNorm;
pub use binary::{Binary, BinaryOp};
pub use concat::Concat;
pub use conv::Conv;
pub use conv_transpose::ConvTranspose;
pub use depth_space::{DepthOrder, DepthToSpace, SpaceToDepth};
pub use gather::Gather;
pub use gemm::{Gemm, MatMul};
pub use instance_norm::InstanceNorm;
pub use layer_norm::LayerNorm;
pub use layout::{Flatten, Reshape, Transpose};
pub use lrn::Lrn;
pub use pad::{Pad, PadMode};
pub use pool::{GlobalAveragePool, GlobalMaxPool, Pool, PoolKind};
pub use quantize::{Cast, DequantizeLinear, QuantizeLinear};
pub use reduce::{Reduce, ReduceKind};
pub use resize::{CoordMode, NearestMode, Resize, ResizeMode, ResizeTarget};
pub use slice::Slice;
pub use softmax::Softmax;
pub use split::Split;
pub use tile::Tile;
pub use unary::{Unary, UnaryOp};

use crate::tensor::{Fact, Tensor};
use serde::Serialize;

/// Arithmetic work of one node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Cost {
    /// Multiply-accumulates of Conv, Gemm and MatMul.
    pub macs: u64,
    /// Floating-point operations: 2 per MAC plus element-wise work
    /// (bias adds, normalisation, activations, pooling windows).
    pub flops: u64,
}

/// An operator with its typed attributes.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// A graph input; its fact is given, not inferred.
    Input(Fact),
    /// A constant tensor (weight, bias, statistics) owned by the graph.
    Const(Tensor),
    Conv(Conv),
    BatchNorm(BatchNorm),
    Unary(Unary),
    Binary(Binary),
    Concat(Concat),
    Split(Split),
    Slice(Slice),
    Reshape(Reshape),
    Flatten(Flatten),
    Transpose(Transpose),
    Pool(Pool),
    GlobalAveragePool(GlobalAveragePool),
    Reduce(Reduce),
    Gemm(Gemm),
    MatMul(MatMul),
    Pad(Pad),
    Softmax(Softmax),
    InstanceNorm(InstanceNorm),
    Lrn(Lrn),
    ConvTranspose(ConvTranspose),
    Resize(Resize),
    Tile(Tile),
    Gather(Gather),
    GlobalMaxPool(GlobalMaxPool),
    LayerNorm(LayerNorm),
    DepthToSpace(DepthToSpace),
    SpaceToDepth(SpaceToDepth),
    QuantizeLinear(QuantizeLinear),
    DequantizeLinear(DequantizeLinear),
    Cast(Cast),
}

/// Shape inference and cost of one operator kind.
pub(crate) trait OpSpec {
    /// Output facts from input facts; the error says what is wrong with the inputs.
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String>;
    /// Arithmetic cost given input and output facts (already inferred).
    fn cost(&self, inputs: &[&Fact], outputs: &[Fact]) -> Cost;
}

impl Op {
    /// A short name for messages and tables (the ONNX op type where one exists).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Input(_) => "Input",
            Op::Const(_) => "Const",
            Op::Conv(_) => "Conv",
            Op::BatchNorm(_) => "BatchNormalization",
            Op::Unary(u) => u.op.onnx_name(),
            Op::Binary(b) => b.op.onnx_name(),
            Op::Concat(_) => "Concat",
            Op::Split(_) => "Split",
            Op::Slice(_) => "Slice",
            Op::Reshape(_) => "Reshape",
            Op::Flatten(_) => "Flatten",
            Op::Transpose(_) => "Transpose",
            Op::Pool(p) => match p.kind {
                PoolKind::Max => "MaxPool",
                PoolKind::Average { .. } => "AveragePool",
            },
            Op::GlobalAveragePool(_) => "GlobalAveragePool",
            Op::Reduce(r) => r.onnx_name(),
            Op::Gemm(_) => "Gemm",
            Op::MatMul(_) => "MatMul",
            Op::Pad(_) => "Pad",
            Op::Softmax(s) => s.onnx_name(),
            Op::InstanceNorm(_) => "InstanceNormalization",
            Op::Lrn(_) => "LRN",
            Op::ConvTranspose(_) => "ConvTranspose",
            Op::Resize(_) => "Resize",
            Op::Tile(_) => "Tile",
            Op::Gather(_) => "Gather",
            Op::GlobalMaxPool(_) => "GlobalMaxPool",
            Op::LayerNorm(_) => "LayerNormalization",
            Op::DepthToSpace(_) => "DepthToSpace",
            Op::SpaceToDepth(_) => "SpaceToDepth",
            Op::QuantizeLinear(_) => "QuantizeLinear",
            Op::DequantizeLinear(_) => "DequantizeLinear",
            Op::Cast(_) => "Cast",
        }
    }

    fn spec(&self) -> Option<&dyn OpSpec> {
        Some(match self {
            Op::Input(_) | Op::Const(_) => return None,
            Op::Conv(o) => o,
            Op::BatchNorm(o) => o,
            Op::Unary(o) => o,
            Op::Binary(o) => o,
            Op::Concat(o) => o,
            Op::Split(o) => o,
            Op::Slice(o) => o,
            Op::Reshape(o) => o,
            Op::Flatten(o) => o,
            Op::Transpose(o) => o,
            Op::Pool(o) => o,
            Op::GlobalAveragePool(o) => o,
            Op::Reduce(o) => o,
            Op::Gemm(o) => o,
            Op::MatMul(o) => o,
            Op::Pad(o) => o,
            Op::Softmax(o) => o,
            Op::InstanceNorm(o) => o,
            Op::Lrn(o) => o,
            Op::ConvTranspose(o) => o,
            Op::Resize(o) => o,
            Op::Tile(o) => o,
            Op::Gather(o) => o,
            Op::GlobalMaxPool(o) => o,
            Op::LayerNorm(o) => o,
            Op::DepthToSpace(o) => o,
            Op::SpaceToDepth(o) => o,
            Op::QuantizeLinear(o) => o,
            Op::DequantizeLinear(o) => o,
            Op::Cast(o) => o,
        })
    }

    /// Output facts for the given input facts.
    pub fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        match self {
            Op::Input(f) => expect_inputs(inputs, 0, 0).map(|_| vec![f.clone()]),
            Op::Const(t) => expect_inputs(inputs, 0, 0).map(|_| vec![t.fact().clone()]),
            _ => self.spec().map_or(Ok(vec![]), |s| s.infer(inputs)),
        }
    }

    /// Arithmetic cost of the node given its input and output facts.
    pub fn cost(&self, inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        self.spec().map_or(Cost::default(), |s| s.cost(inputs, outputs))
    }
}

impl Cost {
    /// No MACs and `per_element` flops for every element of `out`.
    pub(crate) fn elementwise(per_element: u64, out: &Fact) -> Cost {
        Cost {
            macs: 0,
            flops: per_element.saturating_mul(out.volume() as u64),
        }
    }

    /// `macs` multiply-accumulates (2 flops each) plus one flop per output
    /// element for the bias when the node has one (a third input).
    pub(crate) fn multiply_accumulate(macs: u64, inputs: &[&Fact], out: &Fact) -> Cost {
        let bias = if inputs.len() > 2 { out.volume() as u64 } else { 0 };
        Cost {
            macs,
            flops: macs.saturating_mul(2).saturating_add(bias),
        }
    }
}

/// Fails unless `x` is a float value `[N, C, ...]` of rank 3 or more.
pub(crate) fn expect_float_channels(x: &Fact) -> Result<(), String> {
    if !x.dtype.is_float() || x.rank() < 3 {
        return Err(format!("expects a float input [N, C, ...] of rank 3 or more, got {x}"));
    }
    Ok(())
}

/// Fails unless the input count lies in `min..=max`.
pub(crate) fn expect_inputs(inputs: &[&Fact], min: usize, max: usize) -> Result<(), String> {
    if inputs.len() < min || inputs.len() > max {
        return Err(if min == max {
            format!("expects {min} inputs, got {}", inputs.len())
        } else {
            format!("expects {min} to {max} inputs, got {}", inputs.len())
        });
    }
    Ok(())
}

/// Fails unless the fact has the given rank.
pub(crate) fn expect_rank(fact: &Fact, rank: usize, what: &str) -> Result<(), String> {
    if fact.rank() != rank {
        return Err(format!("{what} must have rank {rank}, got {fact}"));
    }
    Ok(())
}

/// Resolves a possibly negative axis against a rank (a scalar has no axis).
pub(crate) fn resolve_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

/// Output size of a sliding window along one spatial axis.
pub(crate) fn window_out(
    input: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    pads: (usize, usize),
    ceil_mode: bool,
) -> Result<usize, String> {
    if kernel == 0 {
        return Err("kernel size 0 is not a valid window".into());
    }
    let too_big = || {
        format!(
            "window (kernel {kernel}, dilation {dilation}, padding {}+{}) is too large",
            pads.0, pads.1
        )
    };
    let eff = dilation
        .checked_mul(kernel.max(1) - 1)
        .and_then(|e| e.checked_add(1))
        .ok_or_else(too_big)?;
    let padded = input
        .checked_add(pads.0)
        .and_then(|p| p.checked_add(pads.1))
        .ok_or_else(too_big)?;
    if padded < eff || stride == 0 {
        return Err(format!(
            "window {eff} (kernel {kernel}, dilation {dilation}) does not fit input {input} with padding {}+{}, stride {stride}",
            pads.0, pads.1
        ));
    }
    let span = padded - eff;
    let mut out = if ceil_mode {
        span.div_ceil(stride)
    } else {
        span / stride
    } + 1;
    if ceil_mode && (out - 1) * stride >= input + pads.0 {
        out -= 1;
    }
    Ok(out)
}
