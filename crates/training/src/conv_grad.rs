//! Convolution weight gradients taken outside burn's autodiff.
//!
//! burn 0.22's autodiff takes a convolution's weight gradient with a generic
//! rule: a second convolution of the input (batch as channels) by the output
//! gradient (as the kernel), whose kernel is as large as the feature map.
//! LibTorch has no override for it. The other modes leave the weight out of
//! the autodiff graph, add a zero-valued probe to the convolution's output
//! to receive the output gradient, and compute the weight gradient from the
//! input and that output gradient: [`ConvGrad::Im2col`] as `dy · im2col(x)ᵀ`
//! (one batched matrix product per group, with LibTorch's own `im2col` on
//! LibTorch tensors and burn's `unfold4d` elsewhere), and
//! [`ConvGrad::LibTorch`] with LibTorch's own autograd (on a GPU, cuDNN's
//! backward-filter kernels, as PyTorch takes them). The modes exist to be
//! timed against each other on a GPU (`scripts/benchmarks/gpu_train_baseline.sh`);
//! they give the same gradients up to float rounding.

use std::fmt;
use std::str::FromStr;

use burn::tensor::Gradients;
use burn::tensor::module::{self, conv2d};
use burn::tensor::ops::{ConvOptions, UnfoldOptions};
use burn::tensor::{Device, Tensor};

/// How a training step obtains convolution weight gradients.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConvGrad {
    /// burn's autodiff rule (the default; bit-identical to earlier runs on `flex`).
    #[default]
    Autodiff,
    /// `dy · im2col(x)ᵀ` outside the autodiff graph.
    Im2col,
    /// LibTorch's autograd on the convolution alone (LibTorch backends only).
    LibTorch,
}

impl FromStr for ConvGrad {
    type Err = String;

    fn from_str(s: &str) -> Result<ConvGrad, String> {
        match s {
            "autodiff" => Ok(ConvGrad::Autodiff),
            "im2col" => Ok(ConvGrad::Im2col),
            "libtorch" => Ok(ConvGrad::LibTorch),
            _ => Err(format!(
                "unknown convolution gradient '{s}' (available: autodiff, im2col, libtorch)"
            )),
        }
    }
}

impl fmt::Display for ConvGrad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConvGrad::Autodiff => "autodiff",
            ConvGrad::Im2col => "im2col",
            ConvGrad::LibTorch => "libtorch",
        })
    }
}

/// One convolution of a training-mode forward pass whose weight gradient is
/// taken by [`ConvTap::weight_grad`] after the backward pass.
pub struct ConvTap {
    /// Parameter index of the convolution's weight.
    pub weight: usize,
    input: Tensor<4>,
    probe: Tensor<4>,
    options: ConvOptions<2>,
    kernel: [usize; 4],
    mode: ConvGrad,
}

impl ConvTap {
    /// Whether a convolution with `options` can be tapped (symmetric padding;
    /// asymmetric padding keeps burn's rule).
    pub fn applies(options: &ConvOptions<2>) -> bool {
        options.padding.iter().all(|(a, b)| a == b)
    }

    /// Runs the convolution of `x` by `weight` (and `bias`) on an autodiff
    /// device with the weight detached, adds a zero probe that tracks the
    /// output gradient, and returns the output with the tap for `weight_param`,
    /// whose gradient `mode` takes (not [`ConvGrad::Autodiff`]).
    pub fn run(
        x: Tensor<4>,
        weight: Tensor<4>,
        bias: Option<Tensor<1>>,
        options: ConvOptions<2>,
        weight_param: usize,
        device: &Device,
        mode: ConvGrad,
    ) -> (Tensor<4>, ConvTap) {
        let kernel = weight.dims();
        let input = if x.is_autodiff() { x.clone().inner() } else { x.clone() };
        let y = conv2d(x, weight.detach(), bias, options.clone());
        let probe = Tensor::<4>::zeros(y.dims(), device).require_grad();
        let tap = ConvTap {
            weight: weight_param,
            input,
            probe: probe.clone(),
            options,
            kernel,
            mode,
        };
        (y + probe, tap)
    }

    /// The weight gradient (flat, in the weight's layout), or `None` when the
    /// convolution's output did not reach the loss.
    ///
    /// # Panics
    /// In [`ConvGrad::LibTorch`] mode when the tensors do not live on
    /// LibTorch (the session refuses that combination before training).
    pub fn weight_grad(&self, grads: &Gradients) -> Option<Tensor<1>> {
        let dy = self.probe.grad(grads)?;
        let numel: usize = self.kernel.iter().product();
        let g = match self.mode {
            ConvGrad::LibTorch => libtorch_weight_grad(&self.input, &dy, self.kernel, &self.options)
                .expect("ConvGrad::LibTorch on tensors that live on LibTorch"),
            _ => weight_grad(self.input.clone(), dy, self.kernel, &self.options),
        };
        Some(g.reshape([numel]))
    }
}

/// `∂L/∂W` of `y = conv2d(x, W)` (symmetric padding) given `dy = ∂L/∂y`:
/// for each group, `Σₙ dyₙ · im2col(xₙ)ᵀ`. `kernel` is the weight's shape.
pub fn weight_grad(x: Tensor<4>, dy: Tensor<4>, kernel: [usize; 4], options: &ConvOptions<2>) -> Tensor<4> {
    let [n, _, _, _] = x.dims();
    let [cout, cin_g, kh, kw] = kernel;
    let g = options.groups;
    let cols = unfold(x, [kh, kw], options);
    let l = cols.dims()[2];
    let cols: Tensor<4> = cols.reshape([n, g, cin_g * kh * kw, l]);
    let dy: Tensor<4> = dy.reshape([n, g, cout / g, l]);
    dy.matmul(cols.swap_dims(2, 3))
        .sum_dim(0)
        .reshape([cout, cin_g, kh, kw])
}

/// `∂L/∂W` of `y = conv2d(x, W)` given `dy`, by LibTorch's autograd on the
/// convolution alone (`Σ y·dy` differentiated for a fresh leaf `W`); `None`
/// when the tensors do not live on LibTorch or the build has no LibTorch.
pub fn libtorch_weight_grad(
    x: &Tensor<4>,
    dy: &Tensor<4>,
    kernel: [usize; 4],
    options: &ConvOptions<2>,
) -> Option<Tensor<4>> {
    #[cfg(feature = "tch")]
    {
        libtorch::weight_grad(x, dy, kernel, options)
    }
    #[cfg(not(feature = "tch"))]
    {
        let _ = (x, dy, kernel, options);
        None
    }
}

/// `[N, C·kh·kw, L]` patches of `x` under the convolution's stride, padding and dilation.
fn unfold(x: Tensor<4>, kernel: [usize; 2], options: &ConvOptions<2>) -> Tensor<3> {
    let padding = options.padding.map(|(a, _)| a);
    #[cfg(feature = "tch")]
    if let Some(cols) = libtorch::im2col(&x, kernel, padding, options) {
        return cols;
    }
    module::unfold4d(x, kernel, UnfoldOptions::new(options.stride, padding, options.dilation))
}

#[cfg(feature = "tch")]
#[allow(deprecated)]
mod libtorch {
    use burn::tensor::Tensor;
    use burn::tensor::ops::ConvOptions;

    use crate::tch_tensor::{burn_of, tch_of};

    /// LibTorch's `im2col` when `x` lives on LibTorch; `None` otherwise.
    pub fn im2col(
        x: &Tensor<4>,
        kernel: [usize; 2],
        padding: [usize; 2],
        options: &ConvOptions<2>,
    ) -> Option<Tensor<3>> {
        let t = tch_of(x)?;
        let ints = |v: [usize; 2]| v.map(|d| d as i64);
        let cols = t.im2col(
            ints(kernel),
            ints(options.dilation),
            ints(padding),
            ints(options.stride),
        );
        Some(burn_of(cols))
    }

    /// See [`super::libtorch_weight_grad`].
    pub fn weight_grad(
        x: &Tensor<4>,
        dy: &Tensor<4>,
        kernel: [usize; 4],
        options: &ConvOptions<2>,
    ) -> Option<Tensor<4>> {
        let x = tch_of(x)?;
        let dy = tch_of(dy)?;
        let ints = |v: [usize; 2]| v.map(|d| d as i64);
        let w = tch::Tensor::zeros(kernel.map(|d| d as i64), (x.kind(), x.device())).set_requires_grad(true);
        let padding = options.padding.map(|(a, _)| a);
        let y = x.conv2d(
            &w,
            None::<tch::Tensor>,
            ints(options.stride),
            ints(padding),
            ints(options.dilation),
            options.groups as i64,
        );
        let objective = (y * dy).sum(x.kind());
        let g = tch::Tensor::run_backward(&[objective], &[&w], false, false).pop()?;
        Some(burn_of(g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Distribution, Tensor};

    /// The weight gradient `mode` takes equals burn's autodiff gradient on
    /// whole tensors, for plain, strided, dilated, grouped and depthwise
    /// convolutions, on `device` (an autodiff device).
    fn matches_autodiff(mode: ConvGrad, device: Device) {
        let cases = [
            ([2, 4, 9, 9], [6, 4, 3, 3], ConvOptions::new([1, 1], [1, 1], [1, 1], 1)),
            ([3, 4, 10, 8], [8, 4, 3, 3], ConvOptions::new([2, 2], [1, 1], [1, 1], 1)),
            (
                [2, 3, 11, 11],
                [5, 3, 3, 3],
                ConvOptions::new([1, 2], [2, 0], [2, 1], 1),
            ),
            ([2, 6, 7, 7], [4, 3, 1, 1], ConvOptions::new([1, 1], [0, 0], [1, 1], 2)),
            ([2, 5, 8, 8], [5, 1, 3, 3], ConvOptions::new([2, 2], [1, 1], [1, 1], 5)),
        ];
        for (xs, ws, options) in cases {
            let x = Tensor::<4>::random(xs, Distribution::Normal(0.0, 1.0), &device).require_grad();
            let w = Tensor::<4>::random(ws, Distribution::Normal(0.0, 1.0), &device).require_grad();
            let y = conv2d(x.clone(), w.clone(), None, options.clone());
            let r = Tensor::<4>::random(y.dims(), Distribution::Normal(0.0, 1.0), &device);
            let grads = (y * r.clone()).sum().backward();
            let want = w.grad(&grads).expect("weight gradient");

            let (y, tap) = ConvTap::run(x.clone(), w.clone(), None, options.clone(), 0, &device, mode);
            let grads = (y * r).sum().backward();
            let got = tap.weight_grad(&grads).expect("tapped gradient").reshape(ws);
            assert!(w.grad(&grads).is_none(), "the weight stays out of the autodiff graph");
            let x_want = x.grad(&grads).expect("input gradient still flows");
            assert_eq!(x_want.dims(), xs);

            let err = (got - want.clone()).abs().max().into_scalar::<f32>();
            let scale = want.abs().max().into_scalar::<f32>();
            assert!(
                err <= 1e-4 * scale.max(1.0),
                "{mode} {xs:?} {ws:?}: max error {err} of {scale}"
            );
        }
    }

    #[test]
    fn im2col_weight_gradient_matches_autodiff() {
        matches_autodiff(ConvGrad::Im2col, Device::flex().autodiff());
    }

    #[test]
    fn libtorch_needs_libtorch_tensors() {
        let device = Device::flex();
        let x = Tensor::<4>::zeros([1, 1, 3, 3], &device);
        let options = ConvOptions::new([1, 1], [0, 0], [1, 1], 1);
        assert!(libtorch_weight_grad(&x, &x, [1, 1, 1, 1], &options).is_none());
    }

    /// Runs only in builds with the `tch` feature (scripts/build_libtorch.sh).
    #[cfg(feature = "tch")]
    #[test]
    fn libtorch_weight_gradient_matches_autodiff() {
        use crate::backend::{Backend, LibTorchTarget};
        matches_autodiff(
            ConvGrad::LibTorch,
            Backend::LibTorch(LibTorchTarget::Cpu).device().autodiff(),
        );
        matches_autodiff(
            ConvGrad::Im2col,
            Backend::LibTorch(LibTorchTarget::Cpu).device().autodiff(),
        );
    }
}
