//! Layer normalisation (ONNX `LayerNormalization`, opset 17): every value
//! is normalised over the axes from `axis` to the last, then scaled and
//! shifted element-wise.

use super::{Cost, OpSpec, expect_inputs, resolve_axis};
use crate::tensor::{DType, Fact};

/// `Y = (X − mean) / sqrt(var + epsilon) · Scale + Bias`, the statistics
/// taken over `X.shape[axis..]`. Inputs: X, Scale, optional Bias (both
/// broadcast to `X.shape[axis..]`). Outputs: Y, Mean and InvStdDev (the
/// last two shaped `X.shape[..axis]` followed by ones).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerNorm {
    pub axis: i64,
    pub epsilon: f32,
}

impl LayerNorm {
    /// The first normalised axis of a rank-`rank` input.
    pub fn first_axis(&self, rank: usize) -> Result<usize, String> {
        resolve_axis(self.axis, rank)
    }
}

impl OpSpec for LayerNorm {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 2, 3)?;
        let x = inputs[0];
        if !x.dtype.is_float() || x.rank() == 0 {
            return Err(format!("expects a float input of rank 1 or more, got {x}"));
        }
        let a = self.first_axis(x.rank())?;
        let normalised = &x.shape[a..];
        for (what, p) in ["Scale", "Bias"].iter().zip(&inputs[1..]) {
            let fits = p.rank() <= normalised.len()
                && p.shape
                    .iter()
                    .rev()
                    .zip(normalised.iter().rev())
                    .all(|(&d, &n)| d == n || d == 1);
            if !fits {
                return Err(format!(
                    "{what} {p} does not broadcast to the normalised shape {normalised:?} (axis {})",
                    self.axis
                ));
            }
        }
        let mut stats = x.shape[..a].to_vec();
        stats.resize(x.rank(), 1);
        let stat = Fact::new(DType::F32, stats);
        Ok(vec![x.clone(), stat.clone(), stat])
    }

    /// Mean, centring, square, variance, normalisation, scale and shift.
    fn cost(&self, _inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        Cost::elementwise(8, &outputs[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_keep_the_leading_axes_and_scale_must_fit() {
        let ln = LayerNorm {
            axis: -1,
            epsilon: 1e-5,
        };
        let x = Fact::f32([2, 7, 7, 96]);
        let out = ln.infer(&[&x, &Fact::f32([96]), &Fact::f32([96])]).unwrap();
        assert_eq!(out[0].shape, [2, 7, 7, 96]);
        assert_eq!(out[1].shape, [2, 7, 7, 1]);
        let ln1 = LayerNorm { axis: 1, epsilon: 1e-5 };
        let out = ln1.infer(&[&x, &Fact::f32([7, 1, 96])]).unwrap();
        assert_eq!(out[2].shape, [2, 1, 1, 1]);
        let err = ln.infer(&[&x, &Fact::f32([95])]).unwrap_err();
        assert!(err.contains("Scale") && err.contains("[96]"), "{err}");
        assert!(
            LayerNorm { axis: 4, epsilon: 1e-5 }
                .infer(&[&x, &Fact::f32([1])])
                .is_err()
        );
        assert_eq!(ln.cost(&[], &out).flops, 8 * 2 * 7 * 7 * 96);
    }
}
