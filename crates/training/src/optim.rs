//! SGD with momentum and Adam over the learnable parameters, with L2 weight
//! decay, and the learning-rate schedules.

use burn::tensor::{Tensor, TensorData};
use serde::{Deserialize, Serialize};

use crate::error::TrainError;
use crate::params::host_vec;

/// The update rule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Optimizer {
    /// `v = momentum·v + g; p -= lr·v` (PyTorch's SGD).
    Sgd { momentum: f64 },
    /// Adam (Kingma & Ba) with bias correction.
    Adam { beta1: f64, beta2: f64, epsilon: f64 },
}

/// How the learning rate moves over the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Schedule {
    /// `lr · (1 + cos(π · step / steps)) / 2`: half a cosine period from `lr` to 0.
    Cosine,
    Constant,
}

impl Schedule {
    /// The learning rate at `step` of `steps` (0-based, per batch).
    pub fn at(self, lr: f64, step: usize, steps: usize) -> f64 {
        match self {
            Schedule::Cosine => lr * 0.5 * (1.0 + (std::f64::consts::PI * step as f64 / steps.max(1) as f64).cos()),
            Schedule::Constant => lr,
        }
    }
}

/// One optional host buffer per parameter.
pub type HostBuffers = Vec<Option<Vec<f32>>>;

/// Per-parameter optimizer buffers (`None` for parameters that are not learned).
pub struct OptimizerState {
    pub rule: Optimizer,
    pub weight_decay: f64,
    /// Updates applied so far.
    pub step: u64,
    first: Vec<Option<Tensor<1>>>,
    second: Vec<Option<Tensor<1>>>,
}

impl OptimizerState {
    pub fn new(rule: Optimizer, weight_decay: f64, params: usize) -> OptimizerState {
        OptimizerState {
            rule,
            weight_decay,
            step: 0,
            first: vec![None; params],
            second: vec![None; params],
        }
    }

    /// Applies one update to parameter `i` (`p` without autodiff, `g` its
    /// gradient) and returns the new value.
    pub fn update(&mut self, i: usize, p: Tensor<1>, g: Tensor<1>, lr: f64) -> Tensor<1> {
        let g = if self.weight_decay != 0.0 {
            g + p.clone().mul_scalar(self.weight_decay)
        } else {
            g
        };
        match self.rule {
            Optimizer::Sgd { momentum } => {
                let v = match self.first[i].take() {
                    Some(v) if momentum != 0.0 => v.mul_scalar(momentum) + g,
                    _ => g,
                };
                self.first[i] = Some(v.clone());
                p - v.mul_scalar(lr)
            }
            Optimizer::Adam { beta1, beta2, epsilon } => {
                let t = self.step as i32 + 1;
                let m = match self.first[i].take() {
                    Some(m) => m.mul_scalar(beta1) + g.clone().mul_scalar(1.0 - beta1),
                    None => g.clone().mul_scalar(1.0 - beta1),
                };
                let g2 = g.clone() * g;
                let v = match self.second[i].take() {
                    Some(v) => v.mul_scalar(beta2) + g2.mul_scalar(1.0 - beta2),
                    None => g2.mul_scalar(1.0 - beta2),
                };
                self.first[i] = Some(m.clone());
                self.second[i] = Some(v.clone());
                let m_hat = m.div_scalar(1.0 - beta1.powi(t));
                let v_hat = v.div_scalar(1.0 - beta2.powi(t));
                p - (m_hat / v_hat.sqrt().add_scalar(epsilon)).mul_scalar(lr)
            }
        }
    }

    /// Applies one update to every `(index, value, gradient)` of `items` and
    /// returns the new values in the same order. With `fused`, the items are
    /// concatenated into one vector and updated by a handful of whole-vector
    /// operations instead of a few per parameter (for devices where every
    /// operation is a kernel launch); the arithmetic per element is the same,
    /// so the results are bit-identical either way.
    pub fn update_all(&mut self, items: Vec<(usize, Tensor<1>, Tensor<1>)>, lr: f64, fused: bool) -> Vec<Tensor<1>> {
        let state_of = |v: &Vec<Option<Tensor<1>>>, i: usize| v[i].is_some();
        let uniform = |v: &Vec<Option<Tensor<1>>>| {
            items.iter().all(|(i, ..)| state_of(v, *i)) || items.iter().all(|(i, ..)| !state_of(v, *i))
        };
        if !fused || items.len() < 2 || !uniform(&self.first) || !uniform(&self.second) {
            return items.into_iter().map(|(i, p, g)| self.update(i, p, g, lr)).collect();
        }
        let index: Vec<usize> = items.iter().map(|(i, ..)| *i).collect();
        let sizes: Vec<usize> = items.iter().map(|(_, p, _)| p.dims()[0]).collect();
        let (ps, gs): (Vec<Tensor<1>>, Vec<Tensor<1>>) = items.into_iter().map(|(_, p, g)| (p, g)).unzip();
        let gather = |v: &mut Vec<Option<Tensor<1>>>| -> Option<Tensor<1>> {
            let parts: Option<Vec<Tensor<1>>> = index.iter().map(|&i| v[i].take()).collect();
            parts.map(|p| Tensor::cat(p, 0))
        };
        let scatter = |v: &mut Vec<Option<Tensor<1>>>, flat: &Tensor<1>| {
            let mut at = 0;
            for (&i, &n) in index.iter().zip(&sizes) {
                v[i] = Some(flat.clone().narrow(0, at, n));
                at += n;
            }
        };
        let (mut first, mut second) = (gather(&mut self.first), gather(&mut self.second));
        let p = Tensor::cat(ps, 0);
        let g = Tensor::cat(gs, 0);
        let g = if self.weight_decay != 0.0 {
            g + p.clone().mul_scalar(self.weight_decay)
        } else {
            g
        };
        let updated = match self.rule {
            Optimizer::Sgd { momentum } => {
                let v = match first.take() {
                    Some(v) if momentum != 0.0 => v.mul_scalar(momentum) + g,
                    _ => g,
                };
                scatter(&mut self.first, &v);
                p - v.mul_scalar(lr)
            }
            Optimizer::Adam { beta1, beta2, epsilon } => {
                let t = self.step as i32 + 1;
                let m = match first.take() {
                    Some(m) => m.mul_scalar(beta1) + g.clone().mul_scalar(1.0 - beta1),
                    None => g.clone().mul_scalar(1.0 - beta1),
                };
                let g2 = g.clone() * g;
                let v = match second.take() {
                    Some(v) => v.mul_scalar(beta2) + g2.mul_scalar(1.0 - beta2),
                    None => g2.mul_scalar(1.0 - beta2),
                };
                scatter(&mut self.first, &m);
                scatter(&mut self.second, &v);
                let m_hat = m.div_scalar(1.0 - beta1.powi(t));
                let v_hat = v.div_scalar(1.0 - beta2.powi(t));
                p - (m_hat / v_hat.sqrt().add_scalar(epsilon)).mul_scalar(lr)
            }
        };
        let mut at = 0;
        sizes
            .iter()
            .map(|&n| {
                let part = updated.clone().narrow(0, at, n);
                at += n;
                part
            })
            .collect()
    }

    /// Buffers on the host, for checkpoints: `(first, second)` moments.
    pub fn to_host(&self) -> (HostBuffers, HostBuffers) {
        let host = |v: &Vec<Option<Tensor<1>>>| v.iter().map(|t| t.as_ref().map(host_vec)).collect();
        (host(&self.first), host(&self.second))
    }

    /// Restores buffers written by [`OptimizerState::to_host`].
    pub fn restore(
        &mut self,
        first: HostBuffers,
        second: HostBuffers,
        device: &burn::tensor::Device,
    ) -> Result<(), TrainError> {
        if first.len() != self.first.len() || second.len() != self.second.len() {
            return Err(TrainError::Model(format!(
                "optimizer state for {} parameters, the model has {}",
                first.len(),
                self.first.len()
            )));
        }
        let dev = |v: Vec<Option<Vec<f32>>>| -> Vec<Option<Tensor<1>>> {
            v.into_iter()
                .map(|b| {
                    b.map(|b| {
                        let n = b.len();
                        Tensor::<1>::from_data(TensorData::new(b, [n]), device)
                    })
                })
                .collect()
        };
        self.first = dev(first);
        self.second = dev(second);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Distribution;

    /// The fused update gives bit-identical values and buffers to the
    /// per-parameter one over several steps, for SGD with momentum and Adam.
    #[test]
    fn fused_update_is_bit_identical_to_per_parameter() {
        let device = burn::tensor::Device::flex();
        let sizes = [7, 1, 12, 3];
        for rule in [
            Optimizer::Sgd { momentum: 0.9 },
            Optimizer::Adam {
                beta1: 0.9,
                beta2: 0.999,
                epsilon: 1e-8,
            },
        ] {
            let mut plain = OptimizerState::new(rule, 5e-4, sizes.len() + 1);
            let mut fused = OptimizerState::new(rule, 5e-4, sizes.len() + 1);
            let mut values: Vec<Tensor<1>> = sizes
                .iter()
                .map(|&n| Tensor::random([n], Distribution::Normal(0.0, 1.0), &device))
                .collect();
            let mut other = values.clone();
            for step in 0..4 {
                let grads: Vec<Tensor<1>> = sizes
                    .iter()
                    .map(|&n| Tensor::random([n], Distribution::Normal(0.0, 1.0), &device))
                    .collect();
                let items = |v: &[Tensor<1>]| -> Vec<(usize, Tensor<1>, Tensor<1>)> {
                    v.iter()
                        .zip(&grads)
                        .enumerate()
                        .map(|(i, (p, g))| (i + 1, p.clone(), g.clone()))
                        .collect()
                };
                let lr = 0.1 / (step + 1) as f64;
                values = plain.update_all(items(&values), lr, false);
                other = fused.update_all(items(&other), lr, true);
                plain.step += 1;
                fused.step += 1;
                for (a, b) in values.iter().zip(&other) {
                    assert_eq!(host_vec(a), host_vec(b), "{rule:?} step {step}");
                }
                assert_eq!(plain.to_host(), fused.to_host(), "{rule:?} step {step}: buffers");
            }
        }
    }
}
