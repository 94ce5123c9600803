//! Softmax and LogSoftmax over one axis (ONNX opset 13 semantics).

use super::{Cost, OpSpec, expect_inputs, resolve_axis};
use crate::tensor::Fact;

/// `exp(x) / sum(exp(x))` along `axis`, or its logarithm when `log`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Softmax {
    pub axis: i64,
    pub log: bool,
}

impl Softmax {
    pub fn onnx_name(&self) -> &'static str {
        if self.log { "LogSoftmax" } else { "Softmax" }
    }
}

impl OpSpec for Softmax {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        let x = inputs[0];
        if !x.dtype.is_float() {
            return Err(format!("expects a float input, got {x}"));
        }
        resolve_axis(self.axis, x.rank())?;
        Ok(vec![x.clone()])
    }

    /// A max, a subtraction, an exponential (4), a sum and a division per
    /// element.
    fn cost(&self, _inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        Cost::elementwise(8, &outputs[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;

    #[test]
    fn keeps_the_shape_and_checks_the_axis() {
        let x = Fact::new(DType::F32, vec![2, 3, 4]);
        let s = Softmax { axis: -1, log: false };
        assert_eq!(s.infer(&[&x]).unwrap(), vec![x.clone()]);
        assert!(Softmax { axis: 3, log: true }.infer(&[&x]).is_err());
        assert_eq!(s.cost(&[&x], std::slice::from_ref(&x)).flops, 8 * 24);
    }
}
