//! Batch normalisation in inference form (ONNX `BatchNormalization`, one output).

use super::{Cost, OpSpec, expect_inputs};
use crate::tensor::Fact;

/// `Y = scale * (X - mean) / sqrt(var + epsilon) + B`, per channel (axis 1).
/// Inputs: `X, scale, B, mean, var`.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchNorm {
    pub epsilon: f32,
    pub momentum: f32,
}

impl Default for BatchNorm {
    fn default() -> Self {
        BatchNorm {
            epsilon: 1e-5,
            momentum: 0.9,
        }
    }
}

impl OpSpec for BatchNorm {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 5, 5)?;
        let x = inputs[0];
        if x.rank() < 2 {
            return Err(format!("input X must have rank >= 2, got {x}"));
        }
        let c = x.shape[1];
        for (name, f) in ["scale", "B", "mean", "var"].iter().zip(&inputs[1..]) {
            if f.shape != [c] {
                return Err(format!("{name} must be [{c}], got {f}"));
            }
        }
        Ok(vec![x.clone()])
    }

    fn cost(&self, _inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        Cost::elementwise(2, &outputs[0])
    }
}
