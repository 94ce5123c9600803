//! Element-wise arithmetic with two inputs and numpy broadcasting.

use super::{Cost, OpSpec, expect_inputs};
use crate::tensor::Fact;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
    /// `x` if positive, else `slope * x`; the slope (input 1) broadcasts
    /// to `x`.
    PRelu,
}

impl BinaryOp {
    pub fn onnx_name(&self) -> &'static str {
        match self {
            BinaryOp::Add => "Add",
            BinaryOp::Sub => "Sub",
            BinaryOp::Mul => "Mul",
            BinaryOp::Div => "Div",
            BinaryOp::Pow => "Pow",
            BinaryOp::Max => "Max",
            BinaryOp::Min => "Min",
            BinaryOp::PRelu => "PRelu",
        }
    }
}

/// An element-wise binary operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binary {
    pub op: BinaryOp,
}

/// The numpy broadcast of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(format!("shapes {a:?} and {b:?} do not broadcast")),
        };
    }
    Ok(out)
}

impl OpSpec for Binary {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 2, 2)?;
        let (a, b) = (inputs[0], inputs[1]);
        if a.dtype != b.dtype {
            return Err(format!("input types differ: {a} and {b}"));
        }
        let shape = broadcast(&a.shape, &b.shape)?;
        if self.op == BinaryOp::PRelu && shape != a.shape {
            return Err(format!("the slope {b} does not broadcast to the input {a}"));
        }
        Ok(vec![Fact::new(a.dtype, shape)])
    }

    fn cost(&self, _inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        Cost::elementwise(1, &outputs[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting() {
        assert_eq!(broadcast(&[1, 8, 4, 4], &[8, 1, 1]).unwrap(), [1, 8, 4, 4]);
        assert_eq!(broadcast(&[3], &[2, 1]).unwrap(), [2, 3]);
        assert!(broadcast(&[2, 3], &[4]).is_err());
    }
}
