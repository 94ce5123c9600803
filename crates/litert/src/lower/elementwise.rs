//! Activations, arithmetic and inference BatchNorm: one LiteRT operator
//! each where LiteRT has it (int8 where its quantized kernel takes the
//! ONNX file's parameters), compositions of MUL, ADD, MAXIMUM and
//! MINIMUM otherwise.

use super::quant::{finish, result};
use super::{Lower, Value, consts, quant};
use crate::error::LiteRtError;
use crate::model::{Act, Elem, EmptyOptions, Options, Quant};
use crate::schema::litert::BuiltinOperator as B;
use graph_ir::NodeId;
use graph_ir::ops::{BinaryOp, UnaryOp};

/// The one-input LiteRT operator for `op`, its options, and the output
/// parameters its int8 kernel fixes (`None`: any).
fn unary_code(op: &UnaryOp) -> Option<(B, Options, Option<Quant>)> {
    let empty = |e| Options::Empty(e);
    Some(match op {
        UnaryOp::Relu => (B::RELU, Options::None, None),
        UnaryOp::Clip {
            min: Some(lo),
            max: Some(hi),
        } if *lo == 0.0 && *hi == 6.0 => (B::RELU6, Options::None, None),
        UnaryOp::Sigmoid => (B::LOGISTIC, Options::None, Some(Quant::tensor(1.0 / 256.0, -128))),
        UnaryOp::Tanh => (B::TANH, Options::None, Some(Quant::tensor(1.0 / 128.0, 0))),
        UnaryOp::HardSwish => (B::HARD_SWISH, empty(EmptyOptions::HardSwish), None),
        UnaryOp::LeakyRelu { alpha } => (B::LEAKY_RELU, Options::LeakyRelu(*alpha), None),
        _ => return None,
    })
}

pub(crate) fn unary(l: &mut Lower, id: NodeId, op: &UnaryOp) -> Result<(), LiteRtError> {
    let Some((code, options, fixed)) = unary_code(op) else {
        return composed(l, id, op);
    };
    let (input, target) = quant::operand_fixed(l, id, fixed.as_ref())?;
    let (out, last) = result(l, id, input, &target, false)?;
    l.emit(code, &[input], &[out], options);
    finish(l, out, last);
    Ok(())
}

/// Clip and HardSigmoid as MUL/ADD and MAXIMUM/MINIMUM, in float.
fn composed(l: &mut Lower, id: NodeId, op: &UnaryOp) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    let (scale, shift, lo, hi) = match op {
        UnaryOp::Clip { min, max } => (None, None, *min, *max),
        UnaryOp::HardSigmoid { alpha, beta } => (Some(*alpha), Some(*beta), Some(0.0), Some(1.0)),
        _ => return Err(l.refuse(id, "LiteRT has no operator stretch maps this activation to")),
    };
    let mut t = l.float(n.inputs[0])?;
    let shape = l.shape(t);
    let mut step = |l: &mut Lower, code: B, v: f32, options: Options, tag: &str| {
        let c = l.m.const_f32(&format!("{}_{tag}", n.name), vec![], &[v]);
        let out =
            l.m.activation(&format!("{}_{tag}_out", n.name), Elem::F32, shape.clone(), None);
        l.emit(code, &[t, c], &[out], options);
        t = out;
    };
    if let Some(a) = scale {
        step(l, B::MUL, a, Options::Mul(Act::None), "alpha");
    }
    if let Some(b) = shift {
        step(l, B::ADD, b, Options::Add(Act::None), "beta");
    }
    let mm = || Options::Empty(EmptyOptions::MaximumMinimum);
    if let Some(lo) = lo {
        step(l, B::MAXIMUM, lo, mm(), "min");
    }
    if let Some(hi) = hi {
        step(l, B::MINIMUM, hi, mm(), "max");
    }
    l.set(id.out(0), Value::T(t));
    Ok(())
}

pub(crate) fn binary(l: &mut Lower, id: NodeId, op: BinaryOp) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    let (code, options, fuses) = match op {
        BinaryOp::Add => (B::ADD, Options::Add as fn(Act) -> Options, true),
        BinaryOp::Sub => (B::SUB, Options::Sub as fn(Act) -> Options, true),
        BinaryOp::Mul => (B::MUL, Options::Mul as fn(Act) -> Options, true),
        BinaryOp::Div => (B::DIV, Options::Div as fn(Act) -> Options, false),
        BinaryOp::Max | BinaryOp::Min => {
            let code = if op == BinaryOp::Max { B::MAXIMUM } else { B::MINIMUM };
            (
                code,
                (|_| Options::Empty(EmptyOptions::MaximumMinimum)) as fn(Act) -> Options,
                false,
            )
        }
        _ => return Err(l.refuse(id, "LiteRT has no operator stretch maps this arithmetic to")),
    };
    let (a, b) = (n.inputs[0], n.inputs[1]);
    let ranks = (l.fact(a).rank(), l.fact(b).rank());
    let is_const = |l: &Lower, o| l.constant(o).is_some();
    if ranks.0 != ranks.1 && !is_const(l, a) && !is_const(l, b) && (ranks.0 == 4 || ranks.1 == 4) {
        return Err(l.refuse(id, "broadcasts a rank-4 activation against one of another rank"));
    }
    let quantizable = matches!(op, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul);
    let target = if quantizable { quant::target(l, id, fuses) } else { None };
    if let (Some(t), Some(ins)) = (&target, quant::int8_inputs(l, &[a, b])) {
        let out = quant::output(l, t)?;
        l.emit(code, &ins, &[out], options(t.act));
        return Ok(());
    }
    let peer = ranks.0.max(ranks.1);
    let operand = |l: &mut Lower, o| -> Result<i32, LiteRtError> {
        match l.value(o)?.clone() {
            Value::Const(c) => consts::activation_const(l, o, &c, peer),
            Value::QConst(q) => consts::activation_const(l, o, &q.dequantized(), peer),
            _ => l.float(o),
        }
    };
    let (ta, tb) = (operand(l, a)?, operand(l, b)?);
    let out = l.f32_out(id, 0);
    l.set(id.out(0), Value::T(out));
    l.emit(code, &[ta, tb], &[out], options(Act::None));
    Ok(())
}

/// Inference BatchNorm as MUL and ADD by per-channel constants (the
/// channel is the last axis of an NHWC or `[N, C]` tensor).
pub(crate) fn batch_norm(l: &mut Lower, id: NodeId, eps: f32) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    let rank = l.fact(n.inputs[0]).rank();
    if rank != 4 && rank != 2 {
        return Err(l.refuse(id, format!("a BatchNorm of a rank-{rank} input")));
    }
    let get = |l: &Lower, k: usize| -> Result<Vec<f32>, LiteRtError> {
        l.constant(n.inputs[k])
            .and_then(|t| t.to_f32_vec())
            .ok_or_else(|| l.refuse(id, "a BatchNorm whose statistics are not float32 constants"))
    };
    let (gamma, beta, mean, var) = (get(l, 1)?, get(l, 2)?, get(l, 3)?, get(l, 4)?);
    let a: Vec<f32> = gamma.iter().zip(&var).map(|(g, v)| g / (v + eps).sqrt()).collect();
    let b: Vec<f32> = beta.iter().zip(&mean).zip(&a).map(|((b, m), a)| b - m * a).collect();
    let x = l.float(n.inputs[0])?;
    let c = a.len();
    let at = l.m.const_f32(&format!("{}_scale", n.name), vec![c], &a);
    let bt = l.m.const_f32(&format!("{}_shift", n.name), vec![c], &b);
    let shape = l.shape(x);
    let mid = l.m.activation(&format!("{}_scaled", n.name), Elem::F32, shape, None);
    l.emit(B::MUL, &[x, at], &[mid], Options::Mul(Act::None));
    let out = l.f32_out(id, 0);
    l.emit(B::ADD, &[mid, bt], &[out], Options::Add(Act::None));
    l.set(id.out(0), Value::T(out));
    Ok(())
}
