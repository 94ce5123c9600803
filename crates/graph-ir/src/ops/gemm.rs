//! Matrix products: `Gemm` (fully connected layers) and `MatMul`.

use super::{Cost, OpSpec, binary::broadcast, expect_inputs, expect_rank};
use crate::tensor::Fact;

/// `Y = alpha * A' * B' + beta * C` with `A'`, `B'` optionally transposed.
#[derive(Clone, Debug, PartialEq)]
pub struct Gemm {
    pub alpha: f32,
    pub beta: f32,
    pub trans_a: bool,
    pub trans_b: bool,
}

impl Default for Gemm {
    fn default() -> Self {
        Gemm {
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b: false,
        }
    }
}

impl OpSpec for Gemm {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 2, 3)?;
        let (a, b) = (inputs[0], inputs[1]);
        expect_rank(a, 2, "A")?;
        expect_rank(b, 2, "B")?;
        let (m, ka) = if self.trans_a {
            (a.shape[1], a.shape[0])
        } else {
            (a.shape[0], a.shape[1])
        };
        let (kb, n) = if self.trans_b {
            (b.shape[1], b.shape[0])
        } else {
            (b.shape[0], b.shape[1])
        };
        if ka != kb {
            return Err(format!("inner dimensions differ: A gives {ka}, B gives {kb}"));
        }
        if let Some(c) = inputs.get(2) {
            let bc = broadcast(&c.shape, &[m, n])?;
            if bc != [m, n] {
                return Err(format!("C {c} does not broadcast to [{m}, {n}]"));
            }
        }
        Ok(vec![Fact::new(a.dtype, [m, n])])
    }

    fn cost(&self, inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        let a = &inputs[0].shape;
        let k = if self.trans_a { a[0] } else { a[1] } as u64;
        Cost::multiply_accumulate((outputs[0].volume() as u64).saturating_mul(k), inputs, &outputs[0])
    }
}

/// Numpy-style matrix product with batch broadcasting.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MatMul;

impl OpSpec for MatMul {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 2, 2)?;
        let (a, b) = (inputs[0], inputs[1]);
        if a.rank() < 2 || b.rank() < 2 {
            return Err(format!(
                "inputs must have rank >= 2 (vectors are not supported), got {a} and {b}"
            ));
        }
        let (m, ka) = (a.shape[a.rank() - 2], a.shape[a.rank() - 1]);
        let (kb, n) = (b.shape[b.rank() - 2], b.shape[b.rank() - 1]);
        if ka != kb {
            return Err(format!("inner dimensions differ: {a} and {b}"));
        }
        let mut shape = broadcast(&a.shape[..a.rank() - 2], &b.shape[..b.rank() - 2])?;
        shape.extend([m, n]);
        Ok(vec![Fact::new(a.dtype, shape)])
    }

    fn cost(&self, inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        let a = &inputs[0].shape;
        let k = a[a.len() - 1] as u64;
        Cost::multiply_accumulate((outputs[0].volume() as u64).saturating_mul(k), inputs, &outputs[0])
    }
}
