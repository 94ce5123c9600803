//! Local response normalisation across channels (ONNX `LRN`).

use super::{Cost, OpSpec, expect_float_channels, expect_inputs};
use crate::tensor::Fact;

/// `y = x / (bias + alpha / size * sum of x² over the `size` channels
/// around c)^beta`, the window reaching `floor((size - 1) / 2)` channels
/// back and `ceil((size - 1) / 2)` forward.
#[derive(Clone, Debug, PartialEq)]
pub struct Lrn {
    pub size: usize,
    pub alpha: f32,
    pub beta: f32,
    pub bias: f32,
}

impl Lrn {
    /// Channels before and after `c` in its window.
    pub fn window(&self) -> (usize, usize) {
        let s = self.size.max(1) - 1;
        (s / 2, s - s / 2)
    }
}

impl OpSpec for Lrn {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        let x = inputs[0];
        expect_float_channels(x)?;
        if self.size == 0 {
            return Err("size must be at least 1".into());
        }
        Ok(vec![x.clone()])
    }

    /// A square, `size` additions, a power and a division per element.
    fn cost(&self, _inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        Cost::elementwise(self.size as u64 + 6, &outputs[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;

    #[test]
    fn window_and_shape() {
        let lrn = |size| Lrn {
            size,
            alpha: 1e-4,
            beta: 0.75,
            bias: 1.0,
        };
        assert_eq!(lrn(5).window(), (2, 2));
        assert_eq!(lrn(4).window(), (1, 2));
        let x = Fact::new(DType::F32, vec![1, 8, 4, 4]);
        assert_eq!(lrn(5).infer(&[&x]).unwrap(), vec![x.clone()]);
        assert!(lrn(0).infer(&[&x]).is_err());
    }
}
