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
    /// `x` if positive, else `alpha * x`.
    LeakyRelu {
        alpha: f32,
    },
    /// `x` if positive, else `alpha * (exp(x) - 1)`.
    Elu {
        alpha: f32,
    },
    /// `gamma * Elu(x, alpha)`.
    Selu {
        alpha: f32,
        gamma: f32,
    },
    /// `ln(1 + exp(x))`.
    Softplus,
    /// `x / (1 + |x|)`.
    Softsign,
    Exp,
    Sqrt,
    Neg,
    Abs,
    /// `x · Φ(x)` (ONNX `Gelu`, opset 20); with `tanh`, the tanh
    /// approximation `0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))`.
    Gelu {
        tanh: bool,
    },
    /// The Gauss error function.
    Erf,
    /// `x · tanh(softplus(x))`.
    Mish,
    /// The natural logarithm.
    Log,
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
            UnaryOp::LeakyRelu { .. } => "LeakyRelu",
            UnaryOp::Elu { .. } => "Elu",
            UnaryOp::Selu { .. } => "Selu",
            UnaryOp::Softplus => "Softplus",
            UnaryOp::Softsign => "Softsign",
            UnaryOp::Exp => "Exp",
            UnaryOp::Sqrt => "Sqrt",
            UnaryOp::Neg => "Neg",
            UnaryOp::Abs => "Abs",
            UnaryOp::Gelu { .. } => "Gelu",
            UnaryOp::Erf => "Erf",
            UnaryOp::Mish => "Mish",
            UnaryOp::Log => "Log",
        }
    }

    /// Floating-point operations per element.
    fn flops_per_element(&self) -> u64 {
        match self {
            UnaryOp::Relu | UnaryOp::Neg | UnaryOp::Abs => 1,
            UnaryOp::LeakyRelu { .. } => 2,
            UnaryOp::Softsign => 3,
            UnaryOp::Exp | UnaryOp::Sqrt | UnaryOp::Softplus => 4,
            UnaryOp::Elu { .. } => 5,
            UnaryOp::Selu { .. } => 6,
            UnaryOp::Clip { .. } => 2,
            UnaryOp::Sigmoid | UnaryOp::Tanh => 4,
            UnaryOp::HardSigmoid { .. } => 4,
            UnaryOp::HardSwish => 5,
            UnaryOp::Log => 4,
            UnaryOp::Erf => 8,
            UnaryOp::Gelu { .. } | UnaryOp::Mish => 10,
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
        Cost::elementwise(self.op.flops_per_element(), &outputs[0])
    }
}
