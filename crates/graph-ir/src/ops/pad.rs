//! Constant, reflect and edge padding (ONNX `Pad`) with constant pads.

use super::{Cost, OpSpec, expect_inputs};
use crate::tensor::Fact;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    Constant,
    Reflect,
    Edge,
}

impl PadMode {
    pub fn onnx_name(self) -> &'static str {
        match self {
            PadMode::Constant => "constant",
            PadMode::Reflect => "reflect",
            PadMode::Edge => "edge",
        }
    }
}

/// Pads every axis: `pads` holds all begins, then all ends (ONNX order).
#[derive(Clone, Debug, PartialEq)]
pub struct Pad {
    pub pads: Vec<i64>,
    pub mode: PadMode,
    pub value: f32,
}

impl OpSpec for Pad {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        let x = inputs[0];
        let r = x.rank();
        if self.pads.len() != 2 * r {
            return Err(format!("pads {:?} must have {} entries for {x}", self.pads, 2 * r));
        }
        let mut shape = Vec::with_capacity(r);
        for (i, &d) in x.shape.iter().enumerate() {
            let size = (d as i128) + (self.pads[i] as i128) + (self.pads[i + r] as i128);
            if size < 0 || size > i64::MAX as i128 {
                return Err(format!("pads {:?} do not leave a valid size on axis {i}", self.pads));
            }
            shape.push(size as usize);
        }
        Ok(vec![Fact::new(x.dtype, shape)])
    }

    fn cost(&self, _inputs: &[&Fact], _outputs: &[Fact]) -> Cost {
        Cost::default()
    }
}
