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
