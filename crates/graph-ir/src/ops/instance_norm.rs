//! Instance normalisation (ONNX `InstanceNormalization`).

use super::{Cost, OpSpec, expect_float_channels, expect_inputs};
use crate::tensor::Fact;

/// Per sample and channel, `(x - mean) / sqrt(var + epsilon) * scale +
/// bias` over the spatial axes; inputs `x [N, C, ...]`, `scale [C]`,
/// `bias [C]`.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceNorm {
    pub epsilon: f32,
}

impl OpSpec for InstanceNorm {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 3, 3)?;
        let x = inputs[0];
        expect_float_channels(x)?;
        for (what, f) in [("scale", inputs[1]), ("bias", inputs[2])] {
            if f.shape != [x.shape[1]] {
                return Err(format!("{what} {f} must have one value per channel of {x}"));
            }
        }
        Ok(vec![x.clone()])
    }

    /// Mean, variance, normalisation, scale and shift: 8 per element.
    fn cost(&self, _inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        Cost::elementwise(8, &outputs[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;

    #[test]
    fn per_channel_parameters_are_checked() {
        let x = Fact::new(DType::F32, vec![1, 4, 5, 5]);
        let c = Fact::new(DType::F32, vec![4]);
        let op = InstanceNorm { epsilon: 1e-5 };
        assert_eq!(op.infer(&[&x, &c, &c]).unwrap(), vec![x.clone()]);
        let wrong = Fact::new(DType::F32, vec![3]);
        assert!(op.infer(&[&x, &wrong, &c]).unwrap_err().contains("scale"));
        let flat = Fact::new(DType::F32, vec![1, 4]);
        assert!(op.infer(&[&flat, &c, &c]).is_err());
    }
}
