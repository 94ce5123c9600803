//! Lowering of the operators of ConvNeXt-style blocks and pixel-shuffle
//! heads (`LayerNormalization`, `Gelu`, `DepthToSpace`, `SpaceToDepth`) and
//! of quantized graphs (`QuantizeLinear`, `DequantizeLinear`, `Cast`).

use super::ImportError;
use super::node_ctx::{Lowered, NodeCtx};
use crate::ops::*;

/// `LayerNormalization` (opset 17): Y, Mean and InvStdDev, statistics in
/// float32 (`stash_type` 1, the only one supported).
pub(super) fn layer_norm(ctx: &NodeCtx) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    let stash = a.int("stash_type", 1)?;
    if stash != 1 {
        return Err(a.err(
            "stash_type",
            format!("{stash} is not supported (1, float32 statistics, is)"),
        ));
    }
    let op = LayerNorm {
        axis: a.int("axis", -1)?,
        epsilon: a.float("epsilon", 1e-5)?,
    };
    Ok(Lowered::Op(Op::LayerNorm(op), ctx.inputs_with_bias()?))
}

/// `Gelu` (opset 20), exact or with `approximate = "tanh"`.
pub(super) fn gelu(ctx: &NodeCtx) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    let tanh = match a.string("approximate", "none")?.as_str() {
        "none" => false,
        "tanh" => true,
        other => return Err(a.err("approximate", format!("`{other}` is not `none` or `tanh`"))),
    };
    Ok(Lowered::Op(
        Op::Unary(Unary {
            op: UnaryOp::Gelu { tanh },
        }),
        ctx.data_inputs(1)?,
    ))
}

fn blocksize(ctx: &NodeCtx) -> Result<usize, ImportError> {
    let a = ctx.attrs();
    let b = a.int("blocksize", 0)?;
    usize::try_from(b)
        .ok()
        .filter(|&b| b > 0)
        .ok_or_else(|| a.err("blocksize", format!("{b} is not a positive integer")))
}

/// The `mode` attribute (DCR by default; SpaceToDepth has it from opset 28).
fn order(ctx: &NodeCtx) -> Result<DepthOrder, ImportError> {
    let a = ctx.attrs();
    match a.string("mode", "DCR")?.as_str() {
        "DCR" => Ok(DepthOrder::Dcr),
        "CRD" => Ok(DepthOrder::Crd),
        other => Err(a.err("mode", format!("`{other}` is not `DCR` or `CRD`"))),
    }
}

pub(super) fn depth_to_space(ctx: &NodeCtx) -> Result<Lowered, ImportError> {
    let op = DepthToSpace {
        block: blocksize(ctx)?,
        order: order(ctx)?,
    };
    Ok(Lowered::Op(Op::DepthToSpace(op), ctx.data_inputs(1)?))
}

pub(super) fn space_to_depth(ctx: &NodeCtx) -> Result<Lowered, ImportError> {
    let op = SpaceToDepth {
        block: blocksize(ctx)?,
        order: order(ctx)?,
    };
    Ok(Lowered::Op(Op::SpaceToDepth(op), ctx.data_inputs(1)?))
}

/// `QuantizeLinear` with its zero point (which fixes the quantized type).
pub(super) fn quantize_linear(ctx: &NodeCtx) -> Result<Lowered, ImportError> {
    if ctx.inputs.get(2).copied().flatten().is_none() {
        return Err(ctx.err("has no zero point: give one (uint8 or int8) so the quantized type is explicit"));
    }
    let op = QuantizeLinear {
        axis: ctx.attrs().int("axis", 1)?,
    };
    Ok(Lowered::Op(Op::QuantizeLinear(op), ctx.data_inputs(3)?))
}

/// `DequantizeLinear`, with or without its zero point.
pub(super) fn dequantize_linear(ctx: &NodeCtx) -> Result<Lowered, ImportError> {
    let op = DequantizeLinear {
        axis: ctx.attrs().int("axis", 1)?,
    };
    Ok(Lowered::Op(Op::DequantizeLinear(op), ctx.inputs_with_bias()?))
}

/// `Cast` of a computed value (constant casts are folded at import).
pub(super) fn cast(ctx: &NodeCtx) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    let to = a.int("to", 0)?;
    let dtype = crate::tensor::DType::from_onnx(to as i32)
        .ok_or_else(|| a.err("to", format!("type {to} is not one the IR carries")))?;
    Ok(Lowered::Op(Op::Cast(Cast { to: dtype }), ctx.data_inputs(1)?))
}
