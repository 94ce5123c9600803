//! Linear quantization and type conversion (ONNX `QuantizeLinear`,
//! `DequantizeLinear`, `Cast`): the QDQ form in which a float graph carries
//! int8 computation, and the casts at the edges of an fp16 subgraph.
//!
//! `QuantizeLinear(x, scale, zero_point)` gives
//! `saturate(round_half_even(x / scale) + zero_point)` in the zero point's
//! type (u8 or i8); `DequantizeLinear(q, scale, zero_point)` gives
//! `(q − zero_point) · scale` in f32. `scale` and `zero_point` are scalars
//! (per tensor) or vectors along `axis` (per channel). The zero point is
//! required here: it fixes the quantized type.

use super::{Cost, OpSpec, expect_inputs, resolve_axis};
use crate::tensor::{DType, Fact};

/// ONNX `QuantizeLinear` (opset 13 and later).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantizeLinear {
    pub axis: i64,
}

/// ONNX `DequantizeLinear` (opset 13 and later).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DequantizeLinear {
    pub axis: i64,
}

/// ONNX `Cast` of a computed value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cast {
    pub to: DType,
}

/// Checks `scale` (f32) and `zero_point` (same shape) against `x` along
/// `axis`: scalars, or vectors as long as `x`'s axis.
fn check_params(x: &Fact, scale: &Fact, zero: Option<&Fact>, axis: i64) -> Result<(), String> {
    if scale.dtype != DType::F32 {
        return Err(format!("scale must be f32, got {scale}"));
    }
    match scale.rank() {
        0 => {}
        1 => {
            let a = resolve_axis(axis, x.rank())?;
            if scale.shape[0] != x.shape[a] {
                return Err(format!(
                    "per-axis scale {scale} does not match axis {a} of {x} ({} long)",
                    x.shape[a]
                ));
            }
        }
        _ => return Err(format!("scale must be a scalar or a vector, got {scale}")),
    }
    if let Some(z) = zero
        && z.shape != scale.shape
    {
        return Err(format!("zero point {z} and scale {scale} differ in shape"));
    }
    Ok(())
}

impl OpSpec for QuantizeLinear {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 3, 3)?;
        let (x, scale, zero) = (inputs[0], inputs[1], inputs[2]);
        if x.dtype != DType::F32 {
            return Err(format!("quantizes f32 values, got {x}"));
        }
        if !matches!(zero.dtype, DType::U8 | DType::I8) {
            return Err(format!("zero point must be u8 or i8, got {zero}"));
        }
        check_params(x, scale, Some(zero), self.axis)?;
        Ok(vec![Fact::new(zero.dtype, x.shape.clone())])
    }

    /// A divide, a round and an add per element.
    fn cost(&self, _inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        Cost::elementwise(3, &outputs[0])
    }
}

impl OpSpec for DequantizeLinear {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 2, 3)?;
        let (q, scale) = (inputs[0], inputs[1]);
        if !matches!(q.dtype, DType::U8 | DType::I8 | DType::I32) {
            return Err(format!("dequantizes u8, i8 or i32 values, got {q}"));
        }
        let zero = inputs.get(2).copied();
        if let Some(z) = zero
            && z.dtype != q.dtype
        {
            return Err(format!("zero point {z} is not of the quantized type {}", q.dtype));
        }
        check_params(q, scale, zero, self.axis)?;
        Ok(vec![Fact::new(DType::F32, q.shape.clone())])
    }

    /// A subtract and a multiply per element.
    fn cost(&self, _inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        Cost::elementwise(2, &outputs[0])
    }
}

impl OpSpec for Cast {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        Ok(vec![Fact::new(self.to, inputs[0].shape.clone())])
    }

    fn cost(&self, _inputs: &[&Fact], outputs: &[Fact]) -> Cost {
        Cost::elementwise(1, &outputs[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantized_types_follow_the_zero_point() {
        let x = Fact::f32([1, 8, 4, 4]);
        let (s, z) = (Fact::f32([]), Fact::new(DType::U8, []));
        let q = QuantizeLinear { axis: 1 }.infer(&[&x, &s, &z]).unwrap();
        assert_eq!(q[0], Fact::new(DType::U8, [1, 8, 4, 4]));
        let d = DequantizeLinear { axis: 1 }.infer(&[&q[0], &s, &z]).unwrap();
        assert_eq!(d[0], x);
        let w = Fact::new(DType::I8, [8, 3, 3, 3]);
        let (sc, zc) = (Fact::f32([8]), Fact::new(DType::I8, [8]));
        assert_eq!(
            DequantizeLinear { axis: 0 }.infer(&[&w, &sc, &zc]).unwrap()[0],
            Fact::f32([8, 3, 3, 3])
        );
        let h = Cast { to: DType::F16 }.infer(&[&x]).unwrap();
        assert_eq!(h[0], Fact::new(DType::F16, [1, 8, 4, 4]));
    }

    #[test]
    fn mismatched_parameters_are_named() {
        let w = Fact::new(DType::I8, [8, 3, 3, 3]);
        let e = DequantizeLinear { axis: 0 }
            .infer(&[&w, &Fact::f32([4]), &Fact::new(DType::I8, [4])])
            .unwrap_err();
        assert!(e.contains("does not match axis 0"), "{e}");
        let e = DequantizeLinear { axis: 0 }
            .infer(&[&w, &Fact::f32([]), &Fact::new(DType::U8, [])])
            .unwrap_err();
        assert!(e.contains("not of the quantized type"), "{e}");
        let e = QuantizeLinear { axis: 1 }
            .infer(&[&Fact::f32([2]), &Fact::f32([]), &Fact::f32([])])
            .unwrap_err();
        assert!(e.contains("u8 or i8"), "{e}");
    }
}
