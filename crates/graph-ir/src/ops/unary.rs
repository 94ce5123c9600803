//! Element-wise activations with one input.

use super::{Cost, OpSpec, expect_inputs};
use crate::tensor::Fact;

/// The activation function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    Relu,
    /// `min(max(x, min), max)`; ReLU6 is `Clip(0, 6)`.
    Clip {
        min: Option<f32>,
        max: Option<f32>,
    },
    Sigmoid,
    /// `max(0, min(1, alpha * x + beta))`.
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    /// `x * HardSigmoid(x)` with alpha 1/6, beta 0.5.
    HardSwish,
    Tanh,
}

impl UnaryOp {
    pub fn onnx_name(&self) -> &'static str {
        match self {
            UnaryOp::Relu => "Relu",
            UnaryOp::Clip { .. } => "Clip",
            UnaryOp::Sigmoid => "Sigmoid",
            UnaryOp::HardSigmoid { .. } => "HardSigmoid",
            UnaryOp::HardSwish => "HardSwish",
            UnaryOp::Tanh => "Tanh",
        }
    }

    /// Floating-point operations per element.
    fn flops_per_element(&self) -> u64 {
        match self {
            UnaryOp::Relu => 1,
            UnaryOp::Clip { .. } => 2,
            UnaryOp::Sigmoid | UnaryOp::Tanh => 4,
            UnaryOp::HardSigmoid { .. } => 4,
            UnaryOp::HardSwish => 5,
        }
    }
}

/// An element-wise activation.
#[derive(Clone, Debug, PartialEq)]
pub struct Unary {
    pub op: UnaryOp,
}

impl OpSpec for Unary {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        if !inputs[0].dtype.is_float() {
            return Err(format!("expects a float input, got {}", inputs[0]));
        }
        Ok(vec![inputs[0].clone()])
    }

    fn cost(&self, _inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        Cost {
            macs: 0,
            flops: self.op.flops_per_element() * outputs[0].volume() as u64,
        }
    }
}
