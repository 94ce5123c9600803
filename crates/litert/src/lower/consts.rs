//! Constants in the file: float32 as is, float16 stored as float16 with a
//! DEQUANTIZE to float32 (LiteRT's float16 weight format), permuted to
//! the layout the operator reading them expects.

use super::{Lower, TO_NHWC};
use crate::error::LiteRtError;
use crate::model::{Elem, EmptyOptions, Options};
use crate::schema::litert::BuiltinOperator as B;
use graph_ir::{DType, Outlet, Tensor};

/// `data` (elements of `size` bytes, row-major `shape`) transposed by
/// `perm`; the new shape.
pub(crate) fn permute(data: &[u8], shape: &[usize], perm: &[usize], size: usize) -> (Vec<u8>, Vec<usize>) {
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let rank = shape.len();
    let mut in_strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        in_strides[i] = in_strides[i + 1] * shape[i + 1];
    }
    let volume: usize = shape.iter().product();
    let mut out = vec![0u8; volume * size];
    let mut idx = vec![0usize; rank];
    for k in 0..volume {
        let src: usize = (0..rank).map(|d| idx[d] * in_strides[perm[d]]).sum();
        out[k * size..(k + 1) * size].copy_from_slice(&data[src * size..(src + 1) * size]);
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < out_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    (out, out_shape)
}

/// The element type and bytes of a float constant.
fn float_bytes(l: &Lower, c: &Tensor, what: &str) -> Result<(Elem, Vec<u8>), LiteRtError> {
    let elem = match c.dtype() {
        DType::F32 => Elem::F32,
        DType::F16 => Elem::F16,
        d => {
            return Err(LiteRtError::Internal {
                subgraph: l.subgraph.clone(),
                what: format!("{what}: a {d} constant where a float one is needed"),
            });
        }
    };
    let data = c.raw().ok_or_else(|| LiteRtError::Internal {
        subgraph: l.subgraph.clone(),
        what: format!("{what}: a constant without data"),
    })?;
    Ok((elem, data.to_vec()))
}

/// A float32 tensor of the file holding `data` (float16 data is stored
/// as float16 and dequantized).
pub(crate) fn float_tensor(l: &mut Lower, name: &str, elem: Elem, shape: Vec<usize>, data: Vec<u8>) -> i32 {
    match elem {
        Elem::F16 => {
            let h =
                l.m.constant(&format!("{name}_fp16"), Elem::F16, shape.clone(), data, None);
            let f = l.m.activation(name, Elem::F32, shape, None);
            l.emit(B::DEQUANTIZE, &[h], &[f], Options::Empty(EmptyOptions::Dequantize));
            f
        }
        _ => l.m.constant(name, elem, shape, data, None),
    }
}

/// Constant `c` (the value at `o`) as an operand of an elementwise
/// operator whose other operand has rank `peer_rank`: broadcast shapes
/// are aligned to rank 4 and permuted to NHWC beside a rank-4 activation.
pub(crate) fn activation_const(l: &mut Lower, o: Outlet, c: &Tensor, peer_rank: usize) -> Result<i32, LiteRtError> {
    let name = l.g.node(o.node).name.clone();
    let (elem, data) = float_bytes(l, c, &name)?;
    let mut shape = c.shape().to_vec();
    let rank4 = peer_rank == 4 || shape.len() == 4;
    let (data, shape) = if rank4 && shape.len() <= 4 && c.volume() > 1 {
        while shape.len() < 4 {
            shape.insert(0, 1);
        }
        permute(&data, &shape, &TO_NHWC, elem.size())
    } else {
        (data, shape)
    };
    Ok(float_tensor(l, &name, elem, shape, data))
}

/// Weights of a float operator: the constant's data permuted by `perm`.
pub(crate) fn weights(l: &mut Lower, name: &str, c: &Tensor, perm: &[usize]) -> Result<i32, LiteRtError> {
    let (elem, data) = float_bytes(l, c, name)?;
    let (data, shape) = permute(&data, c.shape(), perm, elem.size());
    Ok(float_tensor(l, name, elem, shape, data))
}

/// `values` as float32 bytes.
pub(crate) fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::permute;

    #[test]
    fn permute_moves_channels_last() {
        // NCHW [1, 2, 1, 3] holding 0..6 → NHWC [1, 1, 3, 2].
        let data: Vec<u8> = (0..6).collect();
        let (out, shape) = permute(&data, &[1, 2, 1, 3], &super::TO_NHWC, 1);
        assert_eq!(shape, [1, 1, 3, 2]);
        assert_eq!(out, [0, 3, 1, 4, 2, 5]);
        let (back, _) = permute(&out, &shape, &super::super::TO_NCHW, 1);
        assert_eq!(back, data);
    }
}
