//! One training step's forward and backward pass, by burn's autodiff or by
//! LibTorch's autograd ([`Autograd`]): what the training loop needs back
//! to update the weights and report the batch.

use std::fmt;
use std::str::FromStr;
use std::time::Instant;

use burn::tensor::loss::cross_entropy_with_logits;
use burn::tensor::{Device, Tensor, TensorData};

use crate::conv_grad::ConvGrad;
use crate::forward::BatchStats;
use crate::lower::Program;
use crate::metrics::PhaseTimes;
use crate::params::host_vec;
use crate::recipe::Distill;

/// Which automatic differentiation a training step uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Autograd {
    /// burn's autodiff over the lowered program (the default; every backend).
    #[default]
    Burn,
    /// LibTorch's autograd over a LibTorch port of the lowered program (tch
    /// backends only): on a GPU, the kernels PyTorch itself runs.
    LibTorch,
}

impl FromStr for Autograd {
    type Err = String;

    fn from_str(s: &str) -> Result<Autograd, String> {
        match s {
            "burn" => Ok(Autograd::Burn),
            "libtorch" => Ok(Autograd::LibTorch),
            _ => Err(format!("unknown autograd '{s}' (available: burn, libtorch)")),
        }
    }
}

impl fmt::Display for Autograd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Autograd::Burn => "burn",
            Autograd::LibTorch => "libtorch",
        })
    }
}

/// What one step returns to the training loop. When the loss is not
/// finite, no backward pass ran and `grads` is all `None`.
pub struct StepOut {
    pub loss: f32,
    /// The distillation term alone, when distilling.
    pub kd: Option<f32>,
    /// Logits, `n × classes`, row-major.
    pub scores: Vec<f32>,
    /// Per parameter: its gradient (flat, on the inner device), learnable ones only.
    pub grads: Vec<Option<Tensor<1>>>,
    pub stats: Vec<BatchStats>,
}

/// The inputs of one step: `images` (`[n, c, h, w]` row-major), one-hot
/// `target`, and the teacher's softened probabilities when distilling.
#[derive(Clone)]
pub struct Batch {
    pub n: usize,
    pub images: Vec<f32>,
    pub target: Vec<f32>,
    pub soft: Option<(Vec<f32>, Distill)>,
}

/// Phase timing of a step: with `clock` set, the device is waited for
/// and the time since the last lap goes to the phase.
pub struct Laps<'a> {
    pub clock: Option<Instant>,
    pub phases: Option<&'a mut PhaseTimes>,
}

impl Laps<'_> {
    /// Adds the time since the last lap to the phase `pick` selects.
    pub fn lap(&mut self, pick: fn(&mut PhaseTimes) -> &mut f64) {
        if let (Some(c), Some(p)) = (self.clock.as_mut(), self.phases.as_deref_mut()) {
            *pick(p) += c.elapsed().as_secs_f64();
            *c = Instant::now();
        }
    }
}

/// Blocks until the device has computed `t` (reads one element back).
pub fn wait_for(t: &Tensor<1>) {
    if t.dims()[0] > 0 {
        host_vec(&t.clone().detach().narrow(0, 0, 1));
    }
}

/// The step by burn's autodiff on `device` (an autodiff device), taking
/// convolution weight gradients by `conv_grad`.
pub fn burn(
    program: &Program,
    params: &[Tensor<1>],
    conv_grad: ConvGrad,
    device: &Device,
    batch: Batch,
    laps: &mut Laps,
) -> StepOut {
    let [c, h, w] = program.input_shape();
    let (n, classes) = (batch.n, program.classes());
    let x = Tensor::<4>::from_data(TensorData::new(batch.images, [n, c, h, w]), device);
    let fwd = program.forward_with(params, x, true, conv_grad);
    let target = Tensor::<2>::from_data(TensorData::new(batch.target, [n, classes]), device);
    let mut loss = cross_entropy_with_logits(fwd.logits.clone(), target);
    let mut kd = None;
    if let Some((p, d)) = batch.soft {
        let p = Tensor::<2>::from_data(TensorData::new(p, [n, classes]), device);
        let soft_loss = cross_entropy_with_logits(fwd.logits.clone().div_scalar(d.temperature), p)
            .mul_scalar(d.alpha * d.temperature * d.temperature);
        kd = Some(host_vec(&soft_loss.clone().detach())[0]);
        loss = loss.mul_scalar(1.0 - d.alpha) + soft_loss;
    }
    let value = host_vec(&loss.clone().detach())[0];
    let scores = host_vec(&fwd.logits.clone().detach().reshape([n * classes]));
    let mut grads: Vec<Option<Tensor<1>>> = vec![None; params.len()];
    if !value.is_finite() {
        return StepOut {
            loss: value,
            kd,
            scores,
            grads,
            stats: Vec::new(),
        };
    }
    laps.lap(|p| &mut p.forward);
    let all = loss.backward();
    for (i, p) in params.iter().enumerate() {
        grads[i] = p.grad(&all);
    }
    for tap in &fwd.taps {
        if let Some(g) = tap.weight_grad(&all) {
            let slot = &mut grads[tap.weight];
            *slot = Some(match slot.take() {
                Some(sum) => sum + g,
                None => g,
            });
        }
    }
    if laps.clock.is_some() {
        if let Some(g) = grads.iter().flatten().next() {
            wait_for(g);
        }
        laps.lap(|p| &mut p.backward);
    }
    StepOut {
        loss: value,
        kd,
        scores,
        grads,
        stats: fwd.stats,
    }
}
