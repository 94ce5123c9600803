//! Indexing along one axis (ONNX `Gather`).

use super::{Cost, OpSpec, expect_inputs, resolve_axis};
use crate::tensor::{DType, Fact};

/// `out[.., i.., ..] = data[.., indices[i..], ..]` along `axis`: the axis of
/// `data` is replaced by the shape of the integer `indices` (negative
/// indices count from the end). An embedding lookup is a Gather of a
/// constant table along axis 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gather {
    pub axis: i64,
}

impl OpSpec for Gather {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 2, 2)?;
        let (data, idx) = (inputs[0], inputs[1]);
        if !matches!(idx.dtype, DType::I64 | DType::I32) {
            return Err(format!("indices must be integers, got {idx}"));
        }
        if data.rank() == 0 {
            return Err("data must have rank 1 or more".into());
        }
        let axis = resolve_axis(self.axis, data.rank())?;
        let mut shape = data.shape[..axis].to_vec();
        shape.extend_from_slice(&idx.shape);
        shape.extend_from_slice(&data.shape[axis + 1..]);
        let out = Fact::new(data.dtype, shape);
        out.checked_bytes()
            .ok_or_else(|| format!("gathering {idx} from {data} overflows"))?;
        Ok(vec![out])
    }

    /// One copy per output element.
    fn cost(&self, _inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        Cost::elementwise(1, &outputs[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedding_shape() {
        let g = Gather { axis: 0 };
        let out = g.infer(&[&Fact::f32([10, 3]), &Fact::new(DType::I64, [2, 4])]).unwrap();
        assert_eq!(out[0].shape, [2, 4, 3]);
        let g = Gather { axis: -1 };
        let out = g.infer(&[&Fact::f32([5, 6]), &Fact::new(DType::I64, [])]).unwrap();
        assert_eq!(out[0].shape, [5]);
        assert!(g.infer(&[&Fact::f32([5, 6]), &Fact::f32([2])]).is_err());
    }
}
