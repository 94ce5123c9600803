//! Fake quantization for quantization-aware training: values and weights
//! rounded in the forward pass to what a processor's precision keeps, with
//! straight-through gradients.
//!
//! An int8 activation is clamped to its uint8 range and rounded to a
//! multiple of its scale (`round_half_even(x / scale)`, then back); its
//! gradient is the identity inside the range and zero outside (the clamp's).
//! An int8 weight is rounded per output channel to `amax / 127` steps, the
//! scale taken from the weight's current values every pass, its gradient
//! the identity. An fp16 value or weight is rounded to half precision, its
//! gradient the identity. Rounding is applied in inference mode too, so
//! validation reports the accuracy of the rounded model.

use std::collections::HashMap;

use burn::tensor::{FloatDType, Tensor};
use graph_ir::{NodeId, Outlet};

use crate::error::TrainError;
use crate::lower::Program;

/// How an activation is rounded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ActivationQuant {
    /// uint8 with this scale and zero point (`(q - zero) * scale`, q in 0..=255).
    Uint8 { scale: f32, zero: i32 },
    /// IEEE half precision.
    Fp16,
}

/// How a weight constant is rounded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WeightQuant {
    /// int8 symmetric, one scale per channel along `axis` ([-127, 127]).
    Int8 { axis: usize },
    /// IEEE half precision.
    Fp16,
}

/// What a quantization-aware training run rounds: activations by the
/// outlet that produces them, weights by their constant node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuantSpec {
    pub activations: Vec<(Outlet, ActivationQuant)>,
    pub weights: Vec<(NodeId, WeightQuant)>,
}

/// A [`QuantSpec`] resolved to a program's slots and parameters.
#[derive(Clone, Debug, Default)]
pub(crate) struct FakeQuant {
    activations: HashMap<usize, ActivationQuant>,
    weights: HashMap<usize, WeightQuant>,
}

/// The smallest weight scale, as the quantizer writes it.
const MIN_SCALE: f64 = 1e-8;

impl FakeQuant {
    pub(crate) fn is_empty(&self) -> bool {
        self.activations.is_empty() && self.weights.is_empty()
    }

    /// `x` as slot `slot` holds it: rounded when the slot is quantized.
    pub(crate) fn activation(&self, slot: usize, x: Tensor<4>) -> Tensor<4> {
        match self.activations.get(&slot) {
            None => x,
            Some(ActivationQuant::Fp16) => straight_through(x, half),
            Some(&ActivationQuant::Uint8 { scale, zero }) => {
                let s = scale as f64;
                let lo = -(zero as f64) * s;
                let hi = (255 - zero) as f64 * s;
                let y = x.clamp(lo, hi);
                straight_through(y, |v| v.div_scalar(s).round().mul_scalar(s))
            }
        }
    }

    /// The parameter values with every quantized weight rounded.
    pub(crate) fn weights(&self, program: &Program, params: &[Tensor<1>]) -> Vec<Tensor<1>> {
        params
            .iter()
            .enumerate()
            .map(|(p, w)| match self.weights.get(&p) {
                None => w.clone(),
                Some(WeightQuant::Fp16) => straight_through(w.clone(), half),
                Some(&WeightQuant::Int8 { axis }) => {
                    let shape = &program.params[p].shape;
                    straight_through(w.clone(), |v| int8_per_channel(v, shape, axis))
                }
            })
            .collect()
    }
}

/// `x` in the forward pass replaced by `round(x)`, its gradient passed through unchanged.
fn straight_through<const D: usize>(x: Tensor<D>, round: impl FnOnce(Tensor<D>) -> Tensor<D>) -> Tensor<D> {
    let plain = x.clone().detach();
    x + (round(plain.clone()) - plain)
}

fn half<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    x.cast(FloatDType::F16).cast(FloatDType::F32)
}

/// `w` (flat, logical `shape`) rounded to int8 steps of each channel along `axis`.
fn int8_per_channel(w: Tensor<1>, shape: &[usize], axis: usize) -> Tensor<1> {
    let n: usize = shape.iter().product();
    let outer: usize = shape[..axis].iter().product();
    let channels = shape[axis];
    let inner = n / (outer * channels).max(1);
    let v = w.reshape([outer, channels, inner]);
    let amax = v.clone().abs().max_dim(2).max_dim(0);
    let scale = amax.div_scalar(127.0).clamp_min(MIN_SCALE);
    let q = (v / scale.clone()).round().clamp(-127.0, 127.0) * scale;
    q.reshape([n])
}

impl Program {
    /// Rounds the activations and weights `spec` names in every later
    /// forward pass (replacing any earlier spec). Fails naming the first
    /// outlet that is not a computed value of this program or the first
    /// weight that is not one of its parameters.
    pub fn set_fake_quant(&mut self, spec: &QuantSpec) -> Result<(), TrainError> {
        let mut fake = FakeQuant::default();
        for (o, q) in &spec.activations {
            let slot = self.slot_of.get(o).ok_or_else(|| {
                TrainError::Model(format!(
                    "fake quantization of {o:?}: not a value computed by the program"
                ))
            })?;
            fake.activations.insert(*slot, *q);
        }
        for (node, q) in &spec.weights {
            let p = self
                .params
                .iter()
                .position(|s| s.node == *node)
                .ok_or_else(|| TrainError::Model(format!("fake quantization of {node:?}: not a float constant")))?;
            if let WeightQuant::Int8 { axis } = q
                && *axis >= self.params[p].shape.len()
            {
                return Err(TrainError::Model(format!(
                    "fake quantization of `{}`: axis {axis} of a weight of shape {:?}",
                    self.params[p].name, self.params[p].shape
                )));
            }
            fake.weights.insert(p, *q);
        }
        self.fake = fake;
        Ok(())
    }

    /// Whether forward passes round values ([`Program::set_fake_quant`]).
    pub fn fake_quantized(&self) -> bool {
        !self.fake.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

    fn device() -> crate::Device {
        crate::Backend::Flex.device()
    }

    #[test]
    fn int8_weights_round_per_channel_to_amax_over_127() {
        let d = device();
        let w = Tensor::<1>::from_data(TensorData::new(vec![1.0f32, 0.3, -0.51, 127.0, 64.4, -1.0], [6]), &d);
        let q = int8_per_channel(w, &[2, 3], 0).into_data().try_to_vec::<f32>().unwrap();
        let s0 = 1.0 / 127.0;
        let want = [
            1.0,
            (0.3f32 / s0).round() * s0,
            (-0.51f32 / s0).round() * s0,
            127.0,
            64.0,
            -1.0,
        ];
        for (a, b) in q.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{q:?} vs {want:?}");
        }
        let w = Tensor::<1>::from_data(TensorData::new(vec![1.0f32, 10.0, 0.5, 3.0], [4]), &d);
        let q = int8_per_channel(w, &[2, 2], 1).into_data().try_to_vec::<f32>().unwrap();
        assert!((q[2] - (0.5f32 * 127.0).round() / 127.0).abs() < 1e-6, "{q:?}");
        assert!((q[1] - 10.0).abs() < 1e-5 && (q[3] - (3.0f32 / (10.0 / 127.0)).round() * (10.0 / 127.0)).abs() < 1e-5);
    }

    #[test]
    fn uint8_activations_clamp_to_their_range_and_round_to_the_scale() {
        let d = device();
        let mut fake = FakeQuant::default();
        fake.activations
            .insert(0, ActivationQuant::Uint8 { scale: 0.5, zero: 2 });
        fake.activations.insert(1, ActivationQuant::Fp16);
        let x = Tensor::<4>::from_data(TensorData::new(vec![-3.0f32, 0.3, 0.76, 500.0], [1, 4, 1, 1]), &d);
        let q = fake.activation(0, x.clone()).into_data().try_to_vec::<f32>().unwrap();
        assert_eq!(q, [-1.0, 0.5, 1.0, 126.5]);
        let h = fake.activation(1, x.clone()).into_data().try_to_vec::<f32>().unwrap();
        assert_eq!(h[1], 1229.0 / 4096.0, "0.3 in half precision: 1229 steps of 2^-12");
        let same = fake.activation(2, x).into_data().try_to_vec::<f32>().unwrap();
        assert_eq!(same[1], 0.3);
    }

    #[test]
    fn gradients_pass_straight_through_inside_the_range_and_stop_outside() {
        let d = device().autodiff();
        let mut fake = FakeQuant::default();
        fake.activations
            .insert(0, ActivationQuant::Uint8 { scale: 0.5, zero: 0 });
        let x =
            Tensor::<4>::from_data(TensorData::new(vec![-1.0f32, 0.3, 2.2, 200.0], [1, 4, 1, 1]), &d).require_grad();
        let y = fake.activation(0, x.clone()).sum();
        let grads = y.backward();
        let g = x.grad(&grads).unwrap().into_data().try_to_vec::<f32>().unwrap();
        assert_eq!(g, [0.0, 1.0, 1.0, 0.0]);
    }
}
