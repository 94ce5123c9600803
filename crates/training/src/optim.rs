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
    /// Update all parameters as one vector (see [`OptimizerState::update_all`]).
    pub one_vector: bool,
    first: Vec<Option<Tensor<1>>>,
    second: Vec<Option<Tensor<1>>>,
}

impl OptimizerState {
    pub fn new(rule: Optimizer, weight_decay: f64, params: usize) -> OptimizerState {
        OptimizerState {
            rule,
            weight_decay,
            step: 0,
            one_vector: false,
            first: vec![None; params],
            second: vec![None; params],
        }
    }

    /// Applies one update to every `(i, p, g)` of `items` (parameter `i`,
    /// `p` its value without autodiff, `g` its gradient, all on one device)
    /// and returns each parameter's new value, element by element as the
    /// rule gives it. With [`OptimizerState::one_vector`] the parameters are
    /// updated as one vector: a few kernels for the whole model instead of a
    /// few per parameter, which pays where each kernel launch costs (a GPU)
    /// and not on a CPU, where gathering the vector costs more than it saves.
    pub fn update_all(&mut self, items: Vec<(usize, Tensor<1>, Tensor<1>)>, lr: f64) -> Vec<(usize, Tensor<1>)> {
        if !self.one_vector {
            return items
                .into_iter()
                .map(|(i, p, g)| {
                    let (m, v) = (self.first[i].take(), self.second[i].take());
                    let (p, m, v) = self.rule_step(p, g, m, v, lr);
                    (self.first[i], self.second[i]) = (Some(m), v);
                    (i, p)
                })
                .collect();
        }
        let Some(device) = items.first().map(|(_, p, _)| p.device()) else {
            return Vec::new();
        };
        let ids: Vec<usize> = items.iter().map(|(i, _, _)| *i).collect();
        let sizes: Vec<usize> = items.iter().map(|(_, p, _)| p.dims()[0]).collect();
        let (ps, gs): (Vec<Tensor<1>>, Vec<Tensor<1>>) = items.into_iter().map(|(_, p, g)| (p, g)).unzip();
        let gather = |buf: &mut [Option<Tensor<1>>]| -> Option<Tensor<1>> {
            if ids.iter().all(|&i| buf[i].is_none()) {
                return None;
            }
            let parts = ids
                .iter()
                .zip(&sizes)
                .map(|(&i, &n)| buf[i].take().unwrap_or_else(|| Tensor::<1>::zeros([n], &device)))
                .collect();
            Some(Tensor::cat(parts, 0))
        };
        let (m, v) = (gather(&mut self.first), gather(&mut self.second));
        let (p, m, v) = self.rule_step(Tensor::cat(ps, 0), Tensor::cat(gs, 0), m, v, lr);
        let scatter = |buf: &mut [Option<Tensor<1>>], flat: Tensor<1>| {
            for (i, part) in ids.iter().zip(split(flat, &sizes)) {
                buf[*i] = Some(part);
            }
        };
        scatter(&mut self.first, m);
        if let Some(v) = v {
            scatter(&mut self.second, v);
        }
        ids.into_iter().zip(split(p, &sizes)).collect()
    }

    /// The rule on whole tensors: parameter `p`, gradient `g`, first and
    /// second moments as last stored (`None`: none yet) to the new parameter
    /// and moments to store (no second moment for SGD).
    fn rule_step(
        &self,
        p: Tensor<1>,
        g: Tensor<1>,
        first: Option<Tensor<1>>,
        second: Option<Tensor<1>>,
        lr: f64,
    ) -> (Tensor<1>, Tensor<1>, Option<Tensor<1>>) {
        let g = if self.weight_decay != 0.0 {
            g + p.clone().mul_scalar(self.weight_decay)
        } else {
            g
        };
        match self.rule {
            Optimizer::Sgd { momentum } => {
                let v = match first {
                    Some(v) if momentum != 0.0 => v.mul_scalar(momentum) + g,
                    _ => g,
                };
                (p - v.clone().mul_scalar(lr), v, None)
            }
            Optimizer::Adam { beta1, beta2, epsilon } => {
                let t = self.step as i32 + 1;
                let m = match first {
                    Some(m) => m.mul_scalar(beta1) + g.clone().mul_scalar(1.0 - beta1),
                    None => g.clone().mul_scalar(1.0 - beta1),
                };
                let g2 = g.clone() * g;
                let v = match second {
                    Some(v) => v.mul_scalar(beta2) + g2.mul_scalar(1.0 - beta2),
                    None => g2.mul_scalar(1.0 - beta2),
                };
                let m_hat = m.clone().div_scalar(1.0 - beta1.powi(t));
                let v_hat = v.clone().div_scalar(1.0 - beta2.powi(t));
                (
                    p - (m_hat / v_hat.sqrt().add_scalar(epsilon)).mul_scalar(lr),
                    m,
                    Some(v),
                )
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

/// `flat` cut into consecutive parts of `sizes` elements.
fn split(flat: Tensor<1>, sizes: &[usize]) -> Vec<Tensor<1>> {
    let mut start = 0;
    sizes
        .iter()
        .map(|&n| {
            let part = flat.clone().narrow(0, start, n);
            start += n;
            part
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Device;

    /// Each rule by hand, one element at a time, in f32 as the backend computes it.
    fn by_hand(
        rule: Optimizer,
        (wd, lr, step): (f32, f32, i32),
        p: f32,
        g: f32,
        (m, v): (Option<f32>, Option<f32>),
    ) -> (f32, f32, f32) {
        let g = if wd != 0.0 { g + p * wd } else { g };
        match rule {
            Optimizer::Sgd { momentum } => {
                let nv = match m {
                    Some(m) if momentum != 0.0 => m * momentum as f32 + g,
                    _ => g,
                };
                (p - nv * lr, nv, 0.0)
            }
            Optimizer::Adam { beta1, beta2, epsilon } => {
                let (b1, b2, c1, c2) = (beta1 as f32, beta2 as f32, (1.0 - beta1) as f32, (1.0 - beta2) as f32);
                let nm = m.map_or(g * c1, |m| m * b1 + g * c1);
                let nv = v.map_or(g * g * c2, |v| v * b2 + g * g * c2);
                let mh = nm / (1.0 - beta1.powi(step)) as f32;
                let vh = nv / (1.0 - beta2.powi(step)) as f32;
                (p - mh / (vh.sqrt() + epsilon as f32) * lr, nm, nv)
            }
        }
    }

    /// Three steps over three parameters of different sizes, the second
    /// without a gradient in the second step (its buffers must carry over):
    /// every element as the rule gives it one at a time.
    #[test]
    fn update_all_follows_each_rule_element_by_element() {
        let dev = Device::flex();
        let sizes = [3usize, 5, 2];
        for rule in [
            Optimizer::Sgd { momentum: 0.9 },
            Optimizer::Adam {
                beta1: 0.9,
                beta2: 0.999,
                epsilon: 1e-8,
            },
        ] {
            for one_vector in [false, true] {
                let mut state = OptimizerState::new(rule, 5e-4, sizes.len());
                state.one_vector = one_vector;
                let mut p: Vec<Vec<f32>> = sizes
                    .iter()
                    .map(|&n| (0..n).map(|k| 0.1 * k as f32 - 0.2).collect())
                    .collect();
                let mut m: Vec<Vec<Option<f32>>> = sizes.iter().map(|&n| vec![None; n]).collect();
                let mut v = m.clone();
                for step in 0..3usize {
                    let lr = 0.1 / (step + 1) as f32;
                    let mut items = Vec::new();
                    let mut want = Vec::new();
                    for (i, &n) in sizes.iter().enumerate() {
                        if step == 1 && i == 1 {
                            continue;
                        }
                        let g: Vec<f32> = (0..n)
                            .map(|k| ((i * 7 + k * 3 + step) % 5) as f32 * 0.3 - 0.6)
                            .collect();
                        let t = |x: &[f32]| Tensor::<1>::from_data(TensorData::new(x.to_vec(), [n]), &dev);
                        items.push((i, t(&p[i]), t(&g)));
                        let mut w = Vec::new();
                        for k in 0..n {
                            let (np, nm, nv) =
                                by_hand(rule, (5e-4, lr, step as i32 + 1), p[i][k], g[k], (m[i][k], v[i][k]));
                            w.push(np);
                            m[i][k] = Some(nm);
                            v[i][k] = Some(nv);
                        }
                        want.push((i, w));
                    }
                    let got = state.update_all(items, lr as f64);
                    state.step += 1;
                    assert_eq!(got.len(), want.len());
                    for ((gi, gt), (wi, w)) in got.iter().zip(&want) {
                        assert_eq!(gi, wi);
                        let g = host_vec(gt);
                        for (k, (a, b)) in g.iter().zip(w).enumerate() {
                            assert!(
                                (a - b).abs() <= 1e-6 * b.abs().max(1e-3),
                                "{rule:?} one vector {one_vector} step {step} param {gi}[{k}]: {a} vs {b}"
                            );
                        }
                        p[*gi] = g;
                    }
                }
            }
        }
    }
}
