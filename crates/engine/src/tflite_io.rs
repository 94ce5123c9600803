//! Values between their ONNX form and a `.tflite` file's form
//! ([`crate::tflite::Boundary`]): NCHW ↔ NHWC, uint8 ↔ int8 (shift by
//! 128), float32 ↔ int8 (affine, round half to even, clamped).

use crate::tflite::{Boundary, LiteElem, OnnxElem};
use tract_core::internal::{bail, ensure};
use tract_core::prelude::*;

/// `v` (ONNX form of `b`) as the file takes it, of datum type `dt` (the
/// model input's, QI8 with its parameters for a quantized input).
pub(crate) fn to_lite(v: &Tensor, b: &Boundary, dt: DatumType) -> TractResult<Tensor> {
    ensure!(
        v.shape() == &b.onnx_shape[..],
        "has shape {:?}, the bundle says {:?}",
        v.shape(),
        b.onnx_shape
    );
    let shape = v.shape();
    let t = match (b.onnx, b.lite) {
        (OnnxElem::F32, LiteElem::F32) => v.clone(),
        (OnnxElem::I8, LiteElem::I8 { .. }) => plain(v, DatumType::I8)?,
        (OnnxElem::U8, LiteElem::I8 { .. }) => {
            let data: Vec<i8> = view::<u8>(v)?.iter().map(|q| (*q as i16 - 128) as i8).collect();
            Tensor::from_shape(shape, &data)?
        }
        (OnnxElem::F32, LiteElem::I8 { scale, zero_point }) => {
            let data: Vec<i8> = view::<f32>(v)?
                .iter()
                .map(|x| quantize(*x, scale, zero_point))
                .collect();
            Tensor::from_shape(shape, &data)?
        }
        (onnx, lite) => bail!("no conversion from {onnx:?} to {lite:?}"),
    };
    let mut t = if b.nhwc { t.permute_axes(&[0, 2, 3, 1])? } else { t };
    if dt.unquantized() == t.datum_type().unquantized() {
        // SAFETY: the same element type (int8 or float32) with or
        // without quantization parameters; the storage is unchanged.
        unsafe { t.set_datum_type(dt) };
    }
    Ok(t)
}

/// `v` (the file's form of `b`) in ONNX form.
pub(crate) fn from_lite(v: &Tensor, b: &Boundary) -> TractResult<Tensor> {
    let t = if b.nhwc {
        v.clone().permute_axes(&[0, 3, 1, 2])?
    } else {
        v.clone()
    };
    ensure!(
        t.shape() == &b.onnx_shape[..],
        "has shape {:?} in ONNX form, the bundle says {:?}",
        t.shape(),
        b.onnx_shape
    );
    let shape = t.shape();
    Ok(match (b.onnx, b.lite) {
        (OnnxElem::F32, LiteElem::F32) => plain(&t, DatumType::F32)?,
        (OnnxElem::I8, LiteElem::I8 { .. }) => plain(&t, DatumType::I8)?,
        (OnnxElem::U8, LiteElem::I8 { .. }) => {
            let data: Vec<u8> = view::<i8>(&t)?.iter().map(|q| (*q as i16 + 128) as u8).collect();
            Tensor::from_shape(shape, &data)?
        }
        (OnnxElem::F32, LiteElem::I8 { scale, zero_point }) => {
            let data: Vec<f32> = view::<i8>(&t)?
                .iter()
                .map(|q| (*q as i32 - zero_point) as f32 * scale)
                .collect();
            Tensor::from_shape(shape, &data)?
        }
        (onnx, lite) => bail!("no conversion from {lite:?} to {onnx:?}"),
    })
}

/// The elements of `v`, which must hold `T` (quantized or not).
fn view<T: Datum>(v: &Tensor) -> TractResult<tract_core::prelude::tract_ndarray::ArrayViewD<'_, T>> {
    v.to_plain_array_view::<T>()
}

/// `v`'s data as plain `dt` (its quantization parameters dropped).
fn plain(v: &Tensor, dt: DatumType) -> TractResult<Tensor> {
    ensure!(
        v.datum_type().unquantized() == dt,
        "is {:?}, expected {dt:?}",
        v.datum_type()
    );
    let mut t = v.clone();
    // SAFETY: `dt` is `v`'s element type without quantization parameters.
    unsafe { t.set_datum_type(dt) };
    Ok(t)
}

/// ONNX QuantizeLinear to int8: `x / scale` rounded half to even, plus
/// the zero point, clamped to [-128, 127].
pub(crate) fn quantize(x: f32, scale: f32, zero_point: i32) -> i8 {
    ((x / scale).round_ties_even() + zero_point as f32).clamp(-128.0, 127.0) as i8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boundary(onnx: OnnxElem, lite: LiteElem, shape: &[usize], nhwc: bool) -> Boundary {
        Boundary {
            name: "t".into(),
            onnx,
            onnx_shape: shape.to_vec(),
            nhwc,
            lite,
        }
    }

    #[test]
    fn nchw_goes_nhwc_and_back() {
        let data: Vec<f32> = (0..24).map(|i| i as f32).collect();
        let v = Tensor::from_shape(&[1, 2, 3, 4], &data).unwrap();
        let b = boundary(OnnxElem::F32, LiteElem::F32, &[1, 2, 3, 4], true);
        let lite = to_lite(&v, &b, DatumType::F32).unwrap();
        assert_eq!(lite.shape(), [1, 3, 4, 2]);
        assert_eq!(
            lite.to_plain_array_view::<f32>().unwrap()[[0, 1, 2, 1]],
            12.0 + 4.0 + 2.0
        );
        assert_eq!(from_lite(&lite, &b).unwrap(), v);
    }

    #[test]
    fn uint8_shifts_and_float_quantizes_half_to_even() {
        let q = LiteElem::I8 {
            scale: 0.5,
            zero_point: -3,
        };
        let u = Tensor::from_shape(&[3], &[0u8, 128, 255]).unwrap();
        let b = boundary(OnnxElem::U8, q, &[3], false);
        let dt = DatumType::I8.with_zp_scale(-3, 0.5);
        let lite = to_lite(&u, &b, dt).unwrap();
        assert_eq!(lite.datum_type(), dt);
        assert_eq!(
            lite.to_plain_array_view::<i8>().unwrap().as_slice().unwrap(),
            [-128, 0, 127]
        );
        assert_eq!(from_lite(&lite, &b).unwrap(), u);
        let x = Tensor::from_shape(&[4], &[0.25f32, 0.75, 100.0, -100.0]).unwrap();
        let b = boundary(OnnxElem::F32, q, &[4], false);
        let lite = to_lite(&x, &b, dt).unwrap();
        assert_eq!(
            lite.to_plain_array_view::<i8>().unwrap().as_slice().unwrap(),
            [-3, -1, 127, -128]
        );
        let back = from_lite(&lite, &b).unwrap();
        assert_eq!(
            back.to_plain_array_view::<f32>().unwrap().as_slice().unwrap(),
            [0.0, 1.0, 65.0, -62.5]
        );
    }
}
