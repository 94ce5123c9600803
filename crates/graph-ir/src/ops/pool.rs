//! Windowed pooling (`MaxPool`, `AveragePool`), `GlobalAveragePool` and
//! `GlobalMaxPool`.

use super::{Cost, OpSpec, expect_inputs, expect_rank, window_out};
use crate::tensor::Fact;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    Average { count_include_pad: bool },
}

/// 2-D pooling over `X[N,C,H,W]` with explicit padding (`auto_pad` resolved on import).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    pub kind: PoolKind,
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    /// `[top, left, bottom, right]`.
    pub pads: [usize; 4],
    pub dilations: [usize; 2],
    pub ceil_mode: bool,
}

impl OpSpec for Pool {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        let x = inputs[0];
        expect_rank(x, 4, "input X")?;
        let oh = window_out(
            x.shape[2],
            self.kernel[0],
            self.strides[0],
            self.dilations[0],
            (self.pads[0], self.pads[2]),
            self.ceil_mode,
        )?;
        let ow = window_out(
            x.shape[3],
            self.kernel[1],
            self.strides[1],
            self.dilations[1],
            (self.pads[1], self.pads[3]),
            self.ceil_mode,
        )?;
        Ok(vec![Fact::new(x.dtype, [x.shape[0], x.shape[1], oh, ow])])
    }

    fn cost(&self, _inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        let window = (self.kernel[0] * self.kernel[1]) as u64;
        Cost {
            macs: 0,
            flops: window.saturating_mul(outputs[0].volume() as u64),
        }
    }
}

/// Mean over all spatial positions: `[N,C,H,W] -> [N,C,1,1]`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GlobalAveragePool;

impl OpSpec for GlobalAveragePool {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        let x = inputs[0];
        if x.rank() < 3 {
            return Err(format!("input must have rank >= 3, got {x}"));
        }
        let mut shape = x.shape.clone();
        shape[2..].iter_mut().for_each(|d| *d = 1);
        Ok(vec![Fact::new(x.dtype, shape)])
    }

    fn cost(&self, inputs: &[&Fact], _outputs: &[Fact]) -> Cost {
        Cost {
            macs: 0,
            flops: inputs[0].volume() as u64,
        }
    }
}

/// Maximum over all spatial positions: `[N,C,H,W] -> [N,C,1,1]`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GlobalMaxPool;

impl OpSpec for GlobalMaxPool {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        GlobalAveragePool.infer(inputs)
    }

    fn cost(&self, inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        GlobalAveragePool.cost(inputs, outputs)
    }
}
