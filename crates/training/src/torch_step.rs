//! A training step with LibTorch's own autograd (`--autograd libtorch`, tch
//! builds only): the lowered program runs on LibTorch tensors with the
//! learnable parameters as autograd leaves, the loss is differentiated by
//! LibTorch (on a GPU, the kernels PyTorch itself uses: cuDNN's
//! convolution gradients, the native BatchNorm), and the gradients and
//! batch statistics come back as burn tensors for the optimizer. The step
//! computes what [`crate::Program::forward`] and burn's autodiff compute, up
//! to float rounding; kernels without a port here are refused by
//! [`supported`] before training.
#![allow(deprecated)]

use burn::tensor::Tensor;
use burn::tensor::ops::{AvgPoolOptions, ConvOptions, ConvTransposeOptions, InterpolateOptions, MaxPoolOptions};
use graph_ir::ops::{BinaryOp, Lrn, ReduceKind, UnaryOp};
use tch::{Kind, Tensor as T};

use crate::error::TrainError;
use crate::forward::BatchStats;
use crate::interpret::{self, Kernels};
use crate::lower::{Kernel, Program, Role, pad4};
use crate::step::{Batch, Laps, StepOut, wait_for};
use crate::tch_tensor::{burn_of, dims, to_tch};

/// `Ok` when every kernel of `program` has a LibTorch port; otherwise the
/// first kernel that has none.
pub fn supported(program: &Program) -> Result<(), TrainError> {
    for step in &program.steps {
        let name = match &step.kernel {
            Kernel::InstanceNorm { .. } => "InstanceNormalization",
            Kernel::Lrn(_) => "LRN",
            Kernel::ConvTranspose { .. } => "ConvTranspose",
            Kernel::Interpolate(_) => "Resize",
            Kernel::Tile(_) => "Tile",
            Kernel::LayerNorm { .. } => "LayerNormalization",
            Kernel::GlobalMaxPool => "GlobalMaxPool",
            Kernel::DepthToSpace { .. } => "DepthToSpace",
            Kernel::SpaceToDepth { .. } => "SpaceToDepth",
            Kernel::Resample { .. } => "cubic Resize",
            Kernel::MaxPool(o) if o.padding.iter().any(|(a, b)| a != b) => "MaxPool with asymmetric pads",
            Kernel::AvgPool(o) if o.padding.iter().any(|(a, b)| a != b) => "AvgPool with asymmetric pads",
            _ => continue,
        };
        return Err(TrainError::Option {
            key: "autograd",
            reason: format!("libtorch has no port of {name} yet; use --autograd burn for this model"),
        });
    }
    Ok(())
}

/// One step on `batch`; `params` are the session's (autodiff) parameter
/// tensors on a LibTorch device.
pub fn step(program: &Program, params: &[Tensor<1>], batch: Batch, laps: &mut Laps) -> StepOut {
    let [c, h, w] = program.input_shape();
    let classes = program.classes();
    let Batch {
        n,
        images: x,
        target,
        soft,
    } = batch;
    let dev = to_tch(&params[0]).device();
    let leaves: Vec<T> = params
        .iter()
        .zip(&program.params)
        .map(|(p, spec)| {
            let t = to_tch(p).detach();
            if spec.role == Role::Learnable {
                t.set_requires_grad(true)
            } else {
                t
            }
        })
        .collect();
    let input = T::from_slice(&x).reshape(dims(&[n, c, h, w])).to_device(dev);
    let (logits, stats) = forward(program, &leaves, input, n);
    let target = T::from_slice(&target).reshape(dims(&[n, classes])).to_device(dev);
    let ce = |logits: &T, probs: &T| {
        -(logits.log_softmax(1, Kind::Float) * probs)
            .sum_dim_intlist([1i64].as_slice(), false, Kind::Float)
            .mean(Kind::Float)
    };
    let mut loss = ce(&logits, &target);
    let mut kd = None;
    if let Some((p, d)) = soft {
        let p = T::from_slice(&p).reshape(dims(&[n, classes])).to_device(dev);
        let term = ce(&(&logits / d.temperature), &p) * (d.alpha * d.temperature * d.temperature);
        kd = Some(term.double_value(&[]) as f32);
        loss = loss * (1.0 - d.alpha) + term;
    }
    let value = loss.double_value(&[]) as f32;
    let scores = Vec::<f32>::try_from(&logits.detach().reshape([-1]).to_device(tch::Device::Cpu)).expect("f32 logits");
    laps.lap(|p| &mut p.forward);
    let learnable: Vec<usize> = (0..leaves.len())
        .filter(|&i| program.params[i].role == Role::Learnable)
        .collect();
    let wrt: Vec<&T> = learnable.iter().map(|&i| &leaves[i]).collect();
    let mut grads: Vec<Option<Tensor<1>>> = vec![None; leaves.len()];
    if value.is_finite() && !wrt.is_empty() {
        for (g, &i) in T::run_backward(&[&loss], &wrt, false, false)
            .into_iter()
            .zip(&learnable)
        {
            if g.defined() {
                grads[i] = Some(burn_of(g.reshape([-1])));
            }
        }
        if laps.clock.is_some() {
            if let Some(g) = grads.iter().flatten().next() {
                wait_for(g);
            }
            laps.lap(|p| &mut p.backward);
        }
    }
    let stats = stats
        .into_iter()
        .map(|s| BatchStats {
            mean_param: s.mean_param,
            var_param: s.var_param,
            momentum: s.momentum,
            count: s.count,
            mean: Tensor::from_inner(burn_of(s.mean)),
            var: Tensor::from_inner(burn_of(s.var)),
        })
        .collect();
    StepOut {
        loss: value,
        kd,
        scores,
        grads,
        stats,
    }
}

struct TchStats {
    mean_param: usize,
    var_param: usize,
    momentum: f64,
    count: usize,
    mean: T,
    var: T,
}

/// Runs `program` on `x`, a batch of `n`, with LibTorch's kernels: the
/// `[n, classes]` logits and the BatchNorm batch statistics.
fn forward(program: &Program, params: &[T], x: T, n: usize) -> (T, Vec<TchStats>) {
    let mut tch = Tch {
        program,
        params,
        stats: Vec::new(),
    };
    let out = interpret::run(program, &mut tch, x, n);
    (out.reshape(dims(&[n, program.classes()])), tch.stats)
}

/// LibTorch's kernels for one training forward pass: the parameter leaves
/// and the batch statistics gathered.
struct Tch<'p> {
    program: &'p Program,
    params: &'p [T],
    stats: Vec<TchStats>,
}

/// The kernels [`supported`] refuses.
const REFUSED: &str = "refused by supported()";

impl Kernels for Tch<'_> {
    type Value = T;

    fn share(&self, v: &T) -> T {
        v.shallow_clone()
    }

    fn store(&self, _slot: usize, v: T) -> T {
        v
    }

    fn param(&self, p: usize) -> T {
        self.params[p].reshape(dims(&pad4(&self.program.params[p].shape)))
    }

    fn reshape(&self, x: T, shape: [usize; 4]) -> T {
        x.reshape(dims(&shape))
    }

    fn narrow(&self, x: T, axis: usize, start: usize, len: usize) -> T {
        x.narrow(axis as i64, start as i64, len as i64)
    }

    fn cat(&self, parts: Vec<T>, axis: usize) -> T {
        T::cat(&parts, axis as i64)
    }

    fn permute(&self, x: T, perm: [usize; 4]) -> T {
        x.permute(perm.map(|p| p as i64))
    }

    fn conv(&mut self, mut x: T, options: &ConvOptions<2>, weight: usize, bias: Option<usize>) -> T {
        let [(t, b), (l, r)] = options.padding.map(|(a, b)| (a as i64, b as i64));
        let sym = t == b && l == r;
        if !sym {
            x = x.constant_pad_nd([l, r, t, b]);
        }
        let pad = if sym { [t, l] } else { [0, 0] };
        let bias = bias.map(|b| self.params[b].shallow_clone());
        x.conv2d(
            &self.param(weight),
            bias.as_ref(),
            options.stride.map(|s| s as i64),
            pad,
            options.dilation.map(|d| d as i64),
            options.groups as i64,
        )
    }

    fn batch_norm(&mut self, x: T, epsilon: f64, momentum: f64, params: [usize; 4]) -> T {
        let [scale, shift, mean, var] = params;
        let count = (x.size()[0] * x.size()[2] * x.size()[3]) as usize;
        let (y, save_mean, save_invstd) = x.native_batch_norm(
            Some(&self.params[scale]),
            Some(&self.params[shift]),
            None::<&T>,
            None::<&T>,
            true,
            0.0,
            epsilon,
        );
        let var_batch = (save_invstd.detach().square().reciprocal() - epsilon).clamp_min(0.0);
        self.stats.push(TchStats {
            mean_param: mean,
            var_param: var,
            momentum,
            count,
            mean: save_mean.detach(),
            var: var_batch,
        });
        y
    }

    fn unary(&self, op: UnaryOp, x: T) -> T {
        unary(op, x)
    }

    fn binary(&self, op: BinaryOp, a: T, b: T) -> T {
        match op {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Pow => a.pow(&b),
            BinaryOp::Max => a.maximum(&b),
            BinaryOp::Min => a.minimum(&b),
            BinaryOp::PRelu => a.relu() - (-a).relu() * b,
        }
    }

    fn softmax(&self, x: T, axis: usize, log: bool) -> T {
        if log {
            x.log_softmax(axis as i64, Kind::Float)
        } else {
            x.softmax(axis as i64, Kind::Float)
        }
    }

    fn max_pool(&self, x: T, o: &MaxPoolOptions<2>) -> T {
        x.max_pool2d(
            o.kernel_size.map(|k| k as i64),
            o.stride.map(|s| s as i64),
            o.padding.map(|(a, _)| a as i64),
            o.dilation.map(|d| d as i64),
            o.ceil_mode,
        )
    }

    fn avg_pool(&self, x: T, o: &AvgPoolOptions<2>) -> T {
        x.avg_pool2d(
            o.kernel_size.map(|k| k as i64),
            o.stride.map(|s| s as i64),
            o.padding.map(|(a, _)| a as i64),
            o.ceil_mode,
            o.count_include_pad,
            None::<i64>,
        )
    }

    fn global_average_pool(&self, x: T) -> T {
        x.mean_dim([2i64, 3].as_slice(), true, Kind::Float)
    }

    fn reduce(&self, x: T, kind: ReduceKind, axes: &[usize]) -> T {
        let axes: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
        match kind {
            ReduceKind::Mean => x.mean_dim(axes.as_slice(), true, Kind::Float),
            ReduceKind::Sum => x.sum_dim_intlist(axes.as_slice(), true, Kind::Float),
        }
    }

    fn gemm(
        &self,
        (a, a_shape): (T, [usize; 2]),
        (b, b_shape): (T, [usize; 2]),
        trans_b: bool,
        alpha: f64,
        c: Option<(T, [usize; 2], f64)>,
        out: [usize; 4],
    ) -> T {
        let a = a.reshape(dims(&a_shape));
        let mut b = b.reshape(dims(&b_shape));
        if trans_b {
            b = b.transpose(0, 1);
        }
        let y = a.matmul(&b);
        let y = if alpha != 1.0 { y * alpha } else { y };
        let y = match c {
            Some((c, c_shape, beta)) => y + c.reshape(dims(&c_shape)) * beta,
            None => y,
        };
        y.reshape(dims(&out))
    }

    fn matmul(&self, (a, a_shape): (T, [usize; 2]), (b, b_shape): (T, [usize; 2]), out: [usize; 4]) -> T {
        let a = a.reshape(dims(&a_shape));
        let b = b.reshape(dims(&b_shape));
        a.matmul(&b).reshape(dims(&out))
    }

    fn pad(&self, mut x: T, pads: &[(usize, usize, usize)], value: f32) -> T {
        for &(axis, before, after) in pads {
            let mut spec = vec![0i64; 2 * (4 - axis)];
            let at = 2 * (3 - axis);
            spec[at] = before as i64;
            spec[at + 1] = after as i64;
            x = x.pad(spec, "constant", Some(value as f64));
        }
        x
    }

    fn instance_norm(&self, _: T, _: f64, _: usize, _: usize) -> T {
        unreachable!("{REFUSED}")
    }

    fn lrn(&self, _: T, _: &Lrn) -> T {
        unreachable!("{REFUSED}")
    }

    fn conv_transpose(&self, _: T, _: &ConvTransposeOptions<2>, _: usize, _: Option<usize>) -> T {
        unreachable!("{REFUSED}")
    }

    fn interpolate(&self, _: T, _: &InterpolateOptions) -> T {
        unreachable!("{REFUSED}")
    }

    fn tile(&self, _: T, _: [usize; 4]) -> T {
        unreachable!("{REFUSED}")
    }

    fn layer_norm(&self, _: T, _: usize, _: usize, _: f64, _: (usize, Option<usize>)) -> [T; 3] {
        unreachable!("{REFUSED}")
    }

    fn global_max_pool(&self, _: T) -> T {
        unreachable!("{REFUSED}")
    }

    fn depth_to_space(&self, _: T, _: usize, _: bool) -> T {
        unreachable!("{REFUSED}")
    }

    fn space_to_depth(&self, _: T, _: usize, _: bool) -> T {
        unreachable!("{REFUSED}")
    }

    fn resample(&self, _: T, _: &[f32], _: &[f32], _: [usize; 2], _: [usize; 2]) -> T {
        unreachable!("{REFUSED}")
    }
}

fn unary(op: UnaryOp, x: T) -> T {
    let elu = |x: &T, alpha: f64| x.relu() + (x.clamp_max(0.0).exp() - 1.0) * alpha;
    match op {
        UnaryOp::Relu => x.relu(),
        UnaryOp::Clip { min, max } => match (min, max) {
            (Some(lo), Some(hi)) => x.clamp(lo as f64, hi as f64),
            (Some(lo), None) => x.clamp_min(lo as f64),
            (None, Some(hi)) => x.clamp_max(hi as f64),
            (None, None) => x,
        },
        UnaryOp::Sigmoid => x.sigmoid(),
        UnaryOp::HardSigmoid { alpha, beta } => (x * alpha as f64 + beta as f64).clamp(0.0, 1.0),
        UnaryOp::HardSwish => x.hardswish(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::LeakyRelu { alpha } => x.relu() - (-&x).relu() * alpha as f64,
        UnaryOp::Elu { alpha } => elu(&x, alpha as f64),
        UnaryOp::Selu { alpha, gamma } => elu(&x, alpha as f64) * gamma as f64,
        UnaryOp::Softplus => x.softplus(),
        UnaryOp::Softsign => &x / (x.abs() + 1.0),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Gelu { tanh } => x.gelu(if tanh { "tanh" } else { "none" }),
        UnaryOp::Erf => x.erf(),
        UnaryOp::Mish => x.mish(),
        UnaryOp::Log => x.log(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Backend, LibTorchTarget};
    use crate::conv_grad::ConvGrad;
    use crate::init::reinitialise;
    use crate::lower::lower;
    use crate::params::{Params, host_vec};
    use crate::recipe::Distill;
    use crate::step;
    use graph_ir::rng::SplitMix64;
    use graph_ir::zoo::{ZooOptions, build};

    fn close(what: &str, want: &[f32], got: &[f32], tol: f32) {
        assert_eq!(want.len(), got.len(), "{what}");
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-2);
        let err = want.iter().zip(got).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(err <= tol * scale, "{what}: max |difference| {err} of {scale}");
    }

    /// On whole tensors, LibTorch's step gives burn's loss, logits,
    /// gradients of every learnable parameter and BatchNorm statistics,
    /// with and without distillation, on the zoo's resnet-mini (convolutions
    /// with BatchNorm, residual adds, global pooling, a Gemm head) and
    /// mbnet-mini (depthwise and pointwise convolutions).
    #[test]
    fn libtorch_step_matches_burn_autodiff() {
        for name in ["resnet-mini", "mbnet-mini"] {
            one_model(name);
        }
    }

    fn one_model(name: &str) {
        let mut g = build(
            name,
            &ZooOptions {
                input_size: 16,
                classes: 5,
            },
        )
        .expect("zoo");
        let program = lower(&g).expect("lower");
        reinitialise(&mut g, &program, 1).expect("weights");
        supported(&program).expect("every kernel ported");
        let device = Backend::LibTorch(LibTorchTarget::Cpu).device().autodiff();
        let params = Params::from_graph(&program, &g, &device).expect("params");
        let mut rng = SplitMix64::new(3);
        let n = 4;
        let images: Vec<f32> = (0..n * 3 * 16 * 16)
            .map(|_| rng.below(1000) as f32 / 500.0 - 1.0)
            .collect();
        let mut target = vec![0f32; n * 5];
        for r in 0..n {
            target[r * 5 + r % 5] = 1.0;
        }
        let soft: Vec<f32> = (0..n * 5).map(|i| [0.1, 0.2, 0.3, 0.15, 0.25][i % 5]).collect();
        let distill = Distill {
            alpha: 0.5,
            temperature: 4.0,
        };
        for soft in [None, Some((soft, distill))] {
            let batch = Batch {
                n,
                images: Vec::clone(&images),
                target: target.clone(),
                soft,
            };
            let mut laps = Laps {
                clock: None,
                phases: None,
            };
            let want = step::burn(
                &program,
                &params.values,
                ConvGrad::Autodiff,
                &device,
                batch.clone(),
                &mut laps,
            );
            let got = step(&program, &params.values, batch, &mut laps);
            close("loss", &[want.loss], &[got.loss], 1e-4);
            close("logits", &want.scores, &got.scores, 1e-4);
            assert_eq!(want.kd.is_some(), got.kd.is_some());
            if let (Some(a), Some(b)) = (want.kd, got.kd) {
                close("distillation term", &[a], &[b], 1e-4);
            }
            for (i, spec) in program.params.iter().enumerate() {
                match (&want.grads[i], &got.grads[i]) {
                    (Some(a), Some(b)) => close(&format!("{name} {}", spec.name), &host_vec(a), &host_vec(b), 1e-3),
                    (None, None) => {}
                    (a, b) => panic!(
                        "{}: burn {} a gradient, libtorch {}",
                        spec.name,
                        a.is_some(),
                        b.is_some()
                    ),
                }
            }
            assert_eq!(want.stats.len(), got.stats.len());
            for (a, b) in want.stats.iter().zip(&got.stats) {
                assert_eq!(
                    (a.mean_param, a.var_param, a.count),
                    (b.mean_param, b.var_param, b.count)
                );
                close("batch mean", &host_vec(&a.mean), &host_vec(&b.mean), 1e-4);
                close("batch variance", &host_vec(&a.var), &host_vec(&b.var), 1e-3);
            }
        }
    }
}
