//! Lowering of the elementwise activations (`Relu` … `Log`, `Clip`) to
//! [`Op::Unary`].

use super::ImportError;
use super::node_ctx::{Lowered, NodeCtx};
use crate::graph::Graph;
use crate::ops::*;

/// Lowers an elementwise activation; `None` for any other op type.
pub(super) fn lower(ctx: &NodeCtx, g: &Graph) -> Result<Option<Lowered>, ImportError> {
    let a = ctx.attrs();
    let op = match ctx.proto.op_type.as_str() {
        "Relu" => UnaryOp::Relu,
        "Clip" => return clip(ctx, g).map(Some),
        "Sigmoid" => UnaryOp::Sigmoid,
        "Tanh" => UnaryOp::Tanh,
        "HardSigmoid" => UnaryOp::HardSigmoid {
            alpha: a.float("alpha", 0.2)?,
            beta: a.float("beta", 0.5)?,
        },
        "HardSwish" => UnaryOp::HardSwish,
        "LeakyRelu" => UnaryOp::LeakyRelu {
            alpha: a.float("alpha", 0.01)?,
        },
        "Elu" => UnaryOp::Elu {
            alpha: a.float("alpha", 1.0)?,
        },
        "Selu" => UnaryOp::Selu {
            alpha: a.float("alpha", 1.673_263_2)?,
            gamma: a.float("gamma", 1.050_701)?,
        },
        "Softplus" => UnaryOp::Softplus,
        "Softsign" => UnaryOp::Softsign,
        "Exp" => UnaryOp::Exp,
        "Sqrt" => UnaryOp::Sqrt,
        "Neg" => UnaryOp::Neg,
        "Abs" => UnaryOp::Abs,
        "Erf" => UnaryOp::Erf,
        "Mish" => UnaryOp::Mish,
        "Log" => UnaryOp::Log,
        _ => return Ok(None),
    };
    unary(ctx, op).map(Some)
}

fn unary(ctx: &NodeCtx, op: UnaryOp) -> Result<Lowered, ImportError> {
    Ok(Lowered::Op(Op::Unary(Unary { op }), ctx.data_inputs(1)?))
}

/// `Clip`: bounds from attributes before opset 11, from constant inputs
/// since.
fn clip(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let a = ctx.attrs();
    let (min, max) = if ctx.opset < 11 {
        (
            a.has("min").then(|| a.float("min", 0.0)).transpose()?,
            a.has("max").then(|| a.float("max", 0.0)).transpose()?,
        )
    } else {
        (ctx.const_scalar_f32(g, 1)?, ctx.const_scalar_f32(g, 2)?)
    };
    unary(ctx, UnaryOp::Clip { min, max })
}
