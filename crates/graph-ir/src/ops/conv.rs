//! 2-D convolution (ONNX `Conv`).

use super::{Cost, OpSpec, expect_inputs, expect_rank, window_out};
use crate::tensor::Fact;

/// Convolution of `X[N,C,H,W]` with `W[M, C/group, kh, kw]` and optional bias `B[M]`.
/// Padding is explicit (`auto_pad` is resolved on import).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conv {
    pub strides: [usize; 2],
    /// `[top, left, bottom, right]`, the ONNX `pads` order.
    pub pads: [usize; 4],
    pub dilations: [usize; 2],
    pub group: usize,
}

impl Default for Conv {
    fn default() -> Self {
        Conv {
            strides: [1, 1],
            pads: [0; 4],
            dilations: [1, 1],
            group: 1,
        }
    }
}

impl Conv {
    /// Whether this is a depthwise convolution (one group per input channel).
    pub fn is_depthwise(&self, input_channels: usize) -> bool {
        self.group > 1 && self.group == input_channels
    }
}

impl OpSpec for Conv {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 2, 3)?;
        let (x, w) = (inputs[0], inputs[1]);
        expect_rank(x, 4, "input X")?;
        expect_rank(w, 4, "weight W")?;
        let (n, c, h, wd) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
        let (m, cg, kh, kw) = (w.shape[0], w.shape[1], w.shape[2], w.shape[3]);
        if self.group == 0 || c % self.group != 0 || m % self.group != 0 {
            return Err(format!(
                "group {} must divide input channels {c} and output channels {m}",
                self.group
            ));
        }
        if cg.checked_mul(self.group) != Some(c) {
            return Err(format!(
                "weight has {cg} input channels per group but X has {c} channels in {} groups",
                self.group
            ));
        }
        if let Some(b) = inputs.get(2)
            && b.shape != [m]
        {
            return Err(format!("bias must be [{m}], got {b}"));
        }
        let oh = window_out(
            h,
            kh,
            self.strides[0],
            self.dilations[0],
            (self.pads[0], self.pads[2]),
            false,
        )?;
        let ow = window_out(
            wd,
            kw,
            self.strides[1],
            self.dilations[1],
            (self.pads[1], self.pads[3]),
            false,
        )?;
        Ok(vec![Fact::new(x.dtype, [n, m, oh, ow])])
    }

    fn cost(&self, inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        let w = &inputs[1].shape;
        let macs = (outputs[0].volume() as u64).saturating_mul((w[1] * w[2] * w[3]) as u64);
        Cost::multiply_accumulate(macs, inputs, &outputs[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_padded_grouped() {
        let conv = Conv {
            strides: [2, 2],
            pads: [1, 1, 1, 1],
            group: 4,
            ..Conv::default()
        };
        let x = Fact::f32([1, 8, 15, 16]);
        let w = Fact::f32([12, 2, 3, 3]);
        let out = conv.infer(&[&x, &w]).unwrap();
        assert_eq!(out[0].shape, [1, 12, 8, 8]);
        assert_eq!(conv.cost(&[&x, &w], &out).macs, 12 * 8 * 8 * 2 * 9);
    }

    #[test]
    fn rejects_group_mismatch() {
        let conv = Conv {
            group: 3,
            ..Conv::default()
        };
        let err = conv
            .infer(&[&Fact::f32([1, 8, 4, 4]), &Fact::f32([6, 2, 1, 1])])
            .unwrap_err();
        assert!(err.contains("group 3"), "{err}");
    }
}
