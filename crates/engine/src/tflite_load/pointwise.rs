//! Element-wise operators, activations, softmax and reductions, in float32.

use super::Loader;
use litert::schema::litert as fb;
use tract_core::internal::*;
use tract_core::ops::change_axes::wire_with_rank_broadcast;
use tract_core::ops::math;
use tract_core::ops::nn::{self, Reduce, Reducer, Softmax, SoftmaxKind};

fn broadcast(
    l: &mut Loader,
    name: &str,
    op: impl Into<Box<dyn TypedOp>>,
    inputs: &[OutletId],
) -> TractResult<OutletId> {
    let name = l.model.unique_name(name).into_owned();
    Ok(wire_with_rank_broadcast(name, &mut l.model, op, inputs)?[0])
}

fn scalar(l: &mut Loader, name: &str, v: f32) -> TractResult<OutletId> {
    l.konst(name, tensor0(v))
}

/// `x` clamped below by `low` and above by `high`.
pub(super) fn clip(
    l: &mut Loader,
    name: &str,
    x: OutletId,
    low: Option<f32>,
    high: Option<f32>,
) -> TractResult<OutletId> {
    let mut w = x;
    if let Some(low) = low {
        let c = scalar(l, &format!("{name}.low"), low)?;
        w = broadcast(l, &format!("{name}.max"), math::max(), &[w, c])?;
    }
    if let Some(high) = high {
        let c = scalar(l, &format!("{name}.high"), high)?;
        w = broadcast(l, &format!("{name}.min"), math::min(), &[w, c])?;
    }
    Ok(w)
}

/// ADD, SUB, MUL, DIV (with their fused activation), MAXIMUM, MINIMUM.
pub(super) fn binary(
    l: &mut Loader,
    name: &str,
    code: fb::BuiltinOperator,
    op: &fb::Operator,
    ins: &[i32],
) -> TractResult<OutletId> {
    use fb::BuiltinOperator as B;
    ensure!(ins.len() == 2, "has {} inputs", ins.len());
    let (a, b) = (l.float(ins[0])?, l.float(ins[1])?);
    let none = fb::ActivationFunctionType::NONE;
    let (mini, act) = match code {
        B::ADD => (
            math::add(),
            op.builtin_options_as_add_options()
                .map_or(none, |o| o.fused_activation_function()),
        ),
        B::SUB => (
            math::sub(),
            op.builtin_options_as_sub_options()
                .map_or(none, |o| o.fused_activation_function()),
        ),
        B::MUL => (
            math::mul(),
            op.builtin_options_as_mul_options()
                .map_or(none, |o| o.fused_activation_function()),
        ),
        B::DIV => (
            math::div(),
            op.builtin_options_as_div_options()
                .map_or(none, |o| o.fused_activation_function()),
        ),
        B::MAXIMUM => (math::max(), none),
        _ => (math::min(), none),
    };
    let w = broadcast(l, name, mini, &[a, b])?;
    l.activation(name, w, act)
}

/// RELU, RELU6, LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU.
pub(super) fn unary(
    l: &mut Loader,
    name: &str,
    code: fb::BuiltinOperator,
    op: &fb::Operator,
    x: i32,
) -> TractResult<OutletId> {
    use fb::BuiltinOperator as B;
    let x = l.float(x)?;
    match code {
        B::RELU => clip(l, name, x, Some(0.0), None),
        B::RELU6 => clip(l, name, x, Some(0.0), Some(6.0)),
        B::LOGISTIC => l.wire(name, nn::sigmoid(), &[x]),
        B::TANH => l.wire(name, math::tanh(), &[x]),
        B::HARD_SWISH => l.wire(name, nn::hard_swish(), &[x]),
        _ => {
            let alpha = op.builtin_options_as_leaky_relu_options().map_or(0.0, |o| o.alpha());
            l.wire(name, nn::leaky_relu(alpha), &[x])
        }
    }
}

/// SOFTMAX over the last axis, its input scaled by `beta`.
pub(super) fn softmax(l: &mut Loader, name: &str, op: &fb::Operator, x: i32) -> TractResult<OutletId> {
    let rank = l.shape(x)?.len();
    ensure!(rank > 0, "reads a scalar");
    let beta = op.builtin_options_as_softmax_options().map_or(1.0, |o| o.beta());
    let mut w = l.float(x)?;
    if beta != 1.0 {
        let b = scalar(l, &format!("{name}.beta"), beta)?;
        w = broadcast(l, &format!("{name}.scaled"), math::mul(), &[w, b])?;
    }
    let op = Softmax {
        axes: tvec!(rank - 1),
        quant_output_dt: None,
        kind: SoftmaxKind::Softmax,
    };
    l.wire(name, op, &[w])
}

/// MEAN, SUM, REDUCE_MAX over the axes of constant `ins[1]`; the reduced
/// axes are kept or removed as the output tensor's shape says.
pub(super) fn reduce(
    l: &mut Loader,
    name: &str,
    code: fb::BuiltinOperator,
    op: &fb::Operator,
    ins: &[i32],
    y: i32,
) -> TractResult<OutletId> {
    let xs = l.shape(ins[0])?;
    let rank = xs.len() as i64;
    let given = l.ints(*ins.get(1).context("has no axes input")?)?;
    let mut axes: Vec<usize> = Vec::new();
    for a in given {
        let a = if a < 0 { a + rank } else { a };
        ensure!((0..rank).contains(&a), "reduces axis {a} of a rank-{rank} tensor");
        if !axes.contains(&(a as usize)) {
            axes.push(a as usize);
        }
    }
    axes.sort_unstable();
    let keep = op.builtin_options_as_reducer_options().is_some_and(|o| o.keep_dims());
    let reducer = if code == fb::BuiltinOperator::REDUCE_MAX {
        Reducer::Max
    } else {
        Reducer::Sum
    };
    let x = l.float(ins[0])?;
    let mut w = l.wire(
        name,
        Reduce {
            axes: axes.iter().copied().collect(),
            reducer,
        },
        &[x],
    )?;
    if code == fb::BuiltinOperator::MEAN {
        let n: usize = axes.iter().map(|a| xs[*a]).product();
        let k = scalar(l, &format!("{name}.count"), n.max(1) as f32)?;
        w = broadcast(l, &format!("{name}.mean"), math::div(), &[w, k])?;
    }
    if !keep && l.shape(y)?.len() != xs.len() {
        for a in axes.iter().rev() {
            w = l.wire(&format!("{name}.rm{a}"), AxisOp::Rm(*a), &[w])?;
        }
    }
    Ok(w)
}
