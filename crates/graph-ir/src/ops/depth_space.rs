//! Moving blocks of values between the channel axis and the spatial axes
//! of `[N, C, H, W]` (ONNX `DepthToSpace` and `SpaceToDepth`).

use super::{Cost, OpSpec, expect_inputs, expect_rank};
use crate::tensor::Fact;

/// How the channels of a block are ordered (`DepthToSpace` reads them so,
/// `SpaceToDepth` writes them so).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DepthOrder {
    /// Depth-column-row: channel `(by·b + bx)·C' + c` goes to block offset
    /// `(by, bx)` of output channel `c` (ONNX's default).
    Dcr,
    /// Column-row-depth: channel `c·b² + by·b + bx` (PyTorch's `PixelShuffle`).
    Crd,
}

impl DepthOrder {
    /// The ONNX `mode` attribute value.
    pub fn onnx_name(self) -> &'static str {
        match self {
            DepthOrder::Dcr => "DCR",
            DepthOrder::Crd => "CRD",
        }
    }
}

/// `[N, C·b², H, W] → [N, C, H·b, W·b]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DepthToSpace {
    pub block: usize,
    pub order: DepthOrder,
}

/// `[N, C, H·b, W·b] → [N, C·b², H, W]`, the inverse of [`DepthToSpace`]
/// of the same order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpaceToDepth {
    pub block: usize,
    pub order: DepthOrder,
}

/// The one rank-4 input, the block size and its square, checked.
fn block_input<'f>(inputs: &[&'f Fact], block: usize) -> Result<(&'f Fact, usize, usize), String> {
    expect_inputs(inputs, 1, 1)?;
    let x = inputs[0];
    expect_rank(x, 4, "input")?;
    if block == 0 {
        return Err("blocksize must be positive".into());
    }
    let bb = block
        .checked_mul(block)
        .ok_or_else(|| format!("blocksize {block} is too large"))?;
    Ok((x, block, bb))
}

impl OpSpec for DepthToSpace {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        let (x, b, bb) = block_input(inputs, self.block)?;
        if !x.shape[1].is_multiple_of(bb) {
            return Err(format!(
                "{} channels of {x} are not a multiple of blocksize² {bb}",
                x.shape[1]
            ));
        }
        let (h, w) = (x.shape[2].checked_mul(b), x.shape[3].checked_mul(b));
        let (Some(h), Some(w)) = (h, w) else {
            return Err(format!("blocksize {b} makes {x} too large"));
        };
        Ok(vec![Fact::new(x.dtype, [x.shape[0], x.shape[1] / bb, h, w])])
    }

    fn cost(&self, _inputs: &[&Fact], _outputs: &[Fact]) -> Cost {
        Cost::default()
    }
}

impl OpSpec for SpaceToDepth {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        let (x, b, bb) = block_input(inputs, self.block)?;
        if !x.shape[2].is_multiple_of(b) || !x.shape[3].is_multiple_of(b) {
            return Err(format!("the spatial size of {x} is not a multiple of blocksize {b}"));
        }
        let c = x.shape[1]
            .checked_mul(bb)
            .ok_or_else(|| format!("blocksize {b} makes {x} too large"))?;
        Ok(vec![Fact::new(
            x.dtype,
            [x.shape[0], c, x.shape[2] / b, x.shape[3] / b],
        )])
    }

    fn cost(&self, _inputs: &[&Fact], _outputs: &[Fact]) -> Cost {
        Cost::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_move_between_channels_and_space() {
        let d = DepthToSpace {
            block: 2,
            order: DepthOrder::Crd,
        };
        assert_eq!(d.infer(&[&Fact::f32([1, 12, 3, 5])]).unwrap()[0].shape, [1, 3, 6, 10]);
        let err = d.infer(&[&Fact::f32([1, 6, 3, 5])]).unwrap_err();
        assert!(err.contains("multiple of blocksize² 4"), "{err}");
        let s = SpaceToDepth {
            block: 3,
            order: DepthOrder::Dcr,
        };
        assert_eq!(s.infer(&[&Fact::f32([2, 2, 6, 9])]).unwrap()[0].shape, [2, 18, 2, 3]);
        assert!(s.infer(&[&Fact::f32([2, 2, 6, 8])]).is_err());
        assert!(
            SpaceToDepth {
                block: 0,
                order: DepthOrder::Crd
            }
            .infer(&[&Fact::f32([1, 1, 1, 1])])
            .is_err()
        );
    }
}
