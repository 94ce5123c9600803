//! Splitting along an axis (ONNX `Split`).

use super::{Cost, OpSpec, expect_inputs, resolve_axis};
use crate::tensor::Fact;

/// Splits the input along `axis` into pieces of the given sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    pub axis: i64,
    pub sizes: Vec<usize>,
}

impl OpSpec for Split {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        let x = inputs[0];
        let axis = resolve_axis(self.axis, x.rank())?;
        let total = self.sizes.iter().try_fold(0usize, |t, &s| t.checked_add(s));
        if total != Some(x.shape[axis]) || self.sizes.is_empty() {
            return Err(format!(
                "split sizes {:?} do not add up to {} on axis {axis} of {x}",
                self.sizes, x.shape[axis]
            ));
        }
        Ok(self
            .sizes
            .iter()
            .map(|&s| {
                let mut shape = x.shape.clone();
                shape[axis] = s;
                Fact::new(x.dtype, shape)
            })
            .collect())
    }

    fn cost(&self, _inputs: &[&Fact], _outputs: &[Fact]) -> Cost {
        Cost::default()
    }
}
