//! Strided slicing (ONNX `Slice`) with constant ranges.

use super::{Cost, OpSpec, expect_inputs, resolve_axis};
use crate::tensor::Fact;

/// Per listed axis, elements `starts..ends` by `steps` (ONNX clamping rules,
/// negative indices count from the end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slice {
    pub starts: Vec<i64>,
    pub ends: Vec<i64>,
    pub axes: Vec<i64>,
    pub steps: Vec<i64>,
}

/// Number of elements a slice selects on an axis of length `dim`.
pub fn slice_len(dim: usize, start: i64, end: i64, step: i64) -> usize {
    if dim == 0 {
        return 0;
    }
    let (d, start, end, step) = (dim as i128, start as i128, end as i128, step as i128);
    let fix = |v: i128, lo: i128, hi: i128| {
        let v = if v < 0 { v + d } else { v };
        v.clamp(lo, hi)
    };
    let n = if step > 0 {
        let (s, e) = (fix(start, 0, d), fix(end, 0, d));
        if e > s { (e - s + step - 1) / step } else { 0 }
    } else {
        let (s, e) = (fix(start, 0, d - 1), fix(end, -1, d - 1));
        if s > e { (s - e - step - 1) / -step } else { 0 }
    };
    n as usize
}

impl OpSpec for Slice {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        let x = inputs[0];
        let n = self.starts.len();
        if self.ends.len() != n || self.axes.len() != n || self.steps.len() != n {
            return Err("starts, ends, axes and steps must have the same length".into());
        }
        let mut shape = x.shape.clone();
        for i in 0..n {
            let axis = resolve_axis(self.axes[i], x.rank())?;
            if self.steps[i] == 0 {
                return Err(format!("step on axis {axis} is 0"));
            }
            shape[axis] = slice_len(x.shape[axis], self.starts[i], self.ends[i], self.steps[i]);
        }
        Ok(vec![Fact::new(x.dtype, shape)])
    }

    fn cost(&self, _inputs: &[&Fact], _outputs: &[Fact]) -> Cost {
        Cost::default()
    }
}

#[cfg(test)]
mod tests {
    use super::slice_len;

    #[test]
    fn onnx_clamping() {
        assert_eq!(slice_len(10, 0, i64::MAX, 1), 10);
        assert_eq!(slice_len(10, 2, -2, 2), 3);
        assert_eq!(slice_len(10, -1, i64::MIN, -1), 10);
        assert_eq!(slice_len(10, 5, 2, 1), 0);
        assert_eq!(slice_len(0, -1, i64::MIN, -1), 0);
    }
}
