//! Mean and sum reductions over constant axes (ONNX `ReduceMean`, `ReduceSum`).

use super::{Cost, OpSpec, expect_inputs, resolve_axis};
use crate::tensor::Fact;

/// What a [`Reduce`] computes over its axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    Mean,
    Sum,
}

/// Mean or sum over `axes` (all axes when empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reduce {
    pub kind: ReduceKind,
    pub axes: Vec<i64>,
    pub keepdims: bool,
}

impl Reduce {
    /// The ONNX op type.
    pub fn onnx_name(&self) -> &'static str {
        match self.kind {
            ReduceKind::Mean => "ReduceMean",
            ReduceKind::Sum => "ReduceSum",
        }
    }

    /// The resolved, sorted axes reduced for an input of the given rank.
    pub fn resolved_axes(&self, rank: usize) -> Result<Vec<usize>, String> {
        if self.axes.is_empty() {
            return Ok((0..rank).collect());
        }
        let mut axes = self
            .axes
            .iter()
            .map(|&a| resolve_axis(a, rank))
            .collect::<Result<Vec<_>, _>>()?;
        axes.sort_unstable();
        axes.dedup();
        Ok(axes)
    }
}

impl OpSpec for Reduce {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        let x = inputs[0];
        let axes = self.resolved_axes(x.rank())?;
        let shape: Vec<usize> = x
            .shape
            .iter()
            .enumerate()
            .filter_map(|(i, &d)| match (axes.contains(&i), self.keepdims) {
                (false, _) => Some(d),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        Ok(vec![Fact::new(x.dtype, shape)])
    }

    fn cost(&self, inputs: &[&Fact], _outputs: &[Fact]) -> Cost {
        Cost {
            macs: 0,
            flops: inputs[0].volume() as u64,
        }
    }
}
