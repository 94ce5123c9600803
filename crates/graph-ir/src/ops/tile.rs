//! Repetition of a value along its axes (ONNX `Tile`) with constant repeats.

use super::{Cost, OpSpec, expect_inputs};
use crate::tensor::Fact;

/// The input laid `repeats[i]` times end to end along each axis `i`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tile {
    pub repeats: Vec<usize>,
}

impl OpSpec for Tile {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        let x = inputs[0];
        if self.repeats.len() != x.rank() {
            return Err(format!("{} repeats for {x} of rank {}", self.repeats.len(), x.rank()));
        }
        let shape = x
            .shape
            .iter()
            .zip(&self.repeats)
            .map(|(&d, &r)| d.checked_mul(r))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| format!("repeating {x} {:?} times overflows", self.repeats))?;
        let out = Fact::new(x.dtype, shape);
        out.checked_bytes()
            .ok_or_else(|| format!("repeating {x} {:?} times overflows", self.repeats))?;
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
    fn shape_and_errors() {
        let t = Tile { repeats: vec![1, 2, 3] };
        assert_eq!(t.infer(&[&Fact::f32([2, 3, 4])]).unwrap()[0].shape, [2, 6, 12]);
        assert!(t.infer(&[&Fact::f32([2, 3])]).is_err());
        let huge = Tile {
            repeats: vec![usize::MAX, 2],
        };
        assert!(huge.infer(&[&Fact::f32([2, 3])]).unwrap_err().contains("overflows"));
    }
}
