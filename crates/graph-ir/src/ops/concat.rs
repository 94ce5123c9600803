//! Concatenation along an axis (ONNX `Concat`).

use super::{Cost, OpSpec, resolve_axis};
use crate::tensor::Fact;

/// Concatenates inputs along `axis` (negative counts from the end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Concat {
    pub axis: i64,
}

impl OpSpec for Concat {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        let first = inputs.first().ok_or("expects at least one input")?;
        let axis = resolve_axis(self.axis, first.rank())?;
        let mut shape = first.shape.clone();
        for f in &inputs[1..] {
            let same_rest = f.rank() == first.rank()
                && f.shape
                    .iter()
                    .zip(&first.shape)
                    .enumerate()
                    .all(|(i, (a, b))| i == axis || a == b);
            if !same_rest || f.dtype != first.dtype {
                return Err(format!("input {f} does not match {first} outside axis {axis}"));
            }
            shape[axis] = shape[axis]
                .checked_add(f.shape[axis])
                .ok_or("concatenated axis is too large")?;
        }
        Ok(vec![Fact::new(first.dtype, shape)])
    }

    fn cost(&self, _inputs: &[&Fact], _outputs: &[Fact]) -> Cost {
        Cost::default()
    }
}
