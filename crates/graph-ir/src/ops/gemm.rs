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

/// Numpy-style matrix product with batch broadcasting. A 1-D `A` is a row
/// (`[K]` read as `[1, K]`) and a 1-D `B` a column (`[K]` as `[K, 1]`); the
/// axis added for it is removed from the result.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MatMul;

impl OpSpec for MatMul {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 2, 2)?;
        let (a, b) = (inputs[0], inputs[1]);
        if a.rank() == 0 || b.rank() == 0 {
            return Err(format!(
                "inputs must have rank >= 1 (scalars are not matrices), got {a} and {b}"
            ));
        }
        let row = if a.rank() == 1 {
            vec![1, a.shape[0]]
        } else {
            a.shape.clone()
        };
        let col = if b.rank() == 1 {
            vec![b.shape[0], 1]
        } else {
            b.shape.clone()
        };
        let (m, ka) = (row[row.len() - 2], row[row.len() - 1]);
        let (kb, n) = (col[col.len() - 2], col[col.len() - 1]);
        if ka != kb {
            return Err(format!("inner dimensions differ: {a} and {b}"));
        }
        let mut shape = broadcast(&row[..row.len() - 2], &col[..col.len() - 2])?;
        if a.rank() > 1 {
            shape.push(m);
        }
        if b.rank() > 1 {
            shape.push(n);
        }
        Ok(vec![Fact::new(a.dtype, shape)])
    }

    fn cost(&self, inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        let a = &inputs[0].shape;
        let k = a[a.len() - 1] as u64;
        Cost::multiply_accumulate((outputs[0].volume() as u64).saturating_mul(k), inputs, &outputs[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matmul(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
        let (a, b) = (Fact::f32(a.to_vec()), Fact::f32(b.to_vec()));
        MatMul.infer(&[&a, &b]).map(|f| f[0].shape.clone())
    }

    #[test]
    fn vectors_lose_the_axis_numpy_adds_for_them() {
        assert_eq!(matmul(&[3], &[3]).unwrap(), Vec::<usize>::new());
        assert_eq!(matmul(&[3], &[3, 4]).unwrap(), [4]);
        assert_eq!(matmul(&[2, 5, 3], &[3]).unwrap(), [2, 5]);
        assert_eq!(matmul(&[3], &[2, 3, 4]).unwrap(), [2, 4]);
        assert_eq!(matmul(&[2, 3], &[3, 4]).unwrap(), [2, 4]);
        assert!(matmul(&[3], &[4]).unwrap_err().contains("inner dimensions"));
        assert!(matmul(&[], &[4]).is_err());
        let cost = MatMul.cost(&[&Fact::f32([2, 3]), &Fact::f32([3])], &[Fact::f32([2])]);
        assert_eq!(cost.macs, 6);
    }
}
