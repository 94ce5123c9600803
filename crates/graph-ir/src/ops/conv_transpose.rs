//! 2-D transposed convolution (ONNX `ConvTranspose`).

use super::{Cost, OpSpec, expect_inputs, expect_rank};
use crate::tensor::Fact;

/// Transposed convolution of `X[N,C,H,W]` with `W[C, M/group, kh, kw]` and
/// optional bias `B[M]`. Padding is explicit: `output_shape` and `auto_pad`
/// are resolved to `pads` on import. Along each axis the output has
/// `stride·(in − 1) + output_padding + dilation·(k − 1) + 1 − pad_begin − pad_end`
/// values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvTranspose {
    pub strides: [usize; 2],
    /// `[top, left, bottom, right]`, the ONNX `pads` order.
    pub pads: [usize; 4],
    pub dilations: [usize; 2],
    pub output_padding: [usize; 2],
    pub group: usize,
}

impl Default for ConvTranspose {
    fn default() -> Self {
        ConvTranspose {
            strides: [1, 1],
            pads: [0; 4],
            dilations: [1, 1],
            output_padding: [0, 0],
            group: 1,
        }
    }
}

impl ConvTranspose {
    /// Output length along spatial axis `i` (0 or 1) for input length `input`
    /// and kernel size `kernel`.
    pub fn out_len(&self, i: usize, input: usize, kernel: usize) -> Result<usize, String> {
        let (s, d, op) = (self.strides[i], self.dilations[i], self.output_padding[i]);
        if s == 0 || d == 0 || kernel == 0 {
            return Err(format!(
                "stride {s}, dilation {d} and kernel {kernel} must all be positive"
            ));
        }
        if op >= s.max(d) {
            return Err(format!(
                "output_padding {op} must be smaller than the stride {s} or the dilation {d}"
            ));
        }
        let full = input
            .checked_sub(1)
            .and_then(|v| v.checked_mul(s))
            .and_then(|v| v.checked_add(op))
            .and_then(|v| d.checked_mul(kernel - 1).and_then(|e| v.checked_add(e + 1)))
            .ok_or_else(|| format!("input length {input} with stride {s} and kernel {kernel} overflows"))?;
        let cut = self.pads[i] + self.pads[i + 2];
        full.checked_sub(cut).filter(|&o| o > 0).ok_or_else(|| {
            format!(
                "padding {}+{} removes all {full} values of axis {}",
                self.pads[i],
                self.pads[i + 2],
                2 + i
            )
        })
    }
}

impl OpSpec for ConvTranspose {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 2, 3)?;
        let (x, w) = (inputs[0], inputs[1]);
        expect_rank(x, 4, "input X")?;
        expect_rank(w, 4, "weight W")?;
        let c = x.shape[1];
        if w.shape[0] != c {
            return Err(format!(
                "weight {w} must have {c} input channels (its first axis), as X {x}"
            ));
        }
        if self.group == 0 || c % self.group != 0 {
            return Err(format!("group {} must divide the input channels {c}", self.group));
        }
        let m = w.shape[1]
            .checked_mul(self.group)
            .ok_or_else(|| format!("output channels of {w} in {} groups overflow", self.group))?;
        if let Some(b) = inputs.get(2)
            && b.shape != [m]
        {
            return Err(format!("bias must be [{m}], got {b}"));
        }
        let oh = self.out_len(0, x.shape[2], w.shape[2])?;
        let ow = self.out_len(1, x.shape[3], w.shape[3])?;
        Ok(vec![Fact::new(x.dtype, [x.shape[0], m, oh, ow])])
    }

    /// Every input value is multiplied into `M/group · kh · kw` outputs.
    fn cost(&self, inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        let w = &inputs[1].shape;
        let macs = (inputs[0].volume() as u64).saturating_mul((w[1] * w[2] * w[3]) as u64);
        Cost::multiply_accumulate(macs, inputs, &outputs[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upsampling_shape_and_cost() {
        let ct = ConvTranspose {
            strides: [2, 2],
            pads: [1, 1, 1, 1],
            output_padding: [1, 1],
            ..ConvTranspose::default()
        };
        let x = Fact::f32([1, 8, 16, 16]);
        let w = Fact::f32([8, 4, 3, 3]);
        let out = ct.infer(&[&x, &w]).unwrap();
        assert_eq!(out[0].shape, [1, 4, 32, 32]);
        assert_eq!(ct.cost(&[&x, &w], &out).macs, 8 * 16 * 16 * 4 * 9);
    }

    #[test]
    fn grouped_and_dilated() {
        let ct = ConvTranspose {
            dilations: [2, 1],
            group: 2,
            ..ConvTranspose::default()
        };
        let out = ct.infer(&[&Fact::f32([1, 4, 5, 5]), &Fact::f32([4, 3, 3, 3])]).unwrap();
        assert_eq!(out[0].shape, [1, 6, 9, 7]);
    }

    #[test]
    fn rejects_bad_output_padding_and_channels() {
        let ct = ConvTranspose {
            output_padding: [1, 0],
            ..ConvTranspose::default()
        };
        let err = ct
            .infer(&[&Fact::f32([1, 4, 5, 5]), &Fact::f32([4, 3, 3, 3])])
            .unwrap_err();
        assert!(err.contains("output_padding 1"), "{err}");
        let err = ConvTranspose::default()
            .infer(&[&Fact::f32([1, 4, 5, 5]), &Fact::f32([3, 3, 3, 3])])
            .unwrap_err();
        assert!(err.contains("4 input channels"), "{err}");
    }
}
