//! Running a [`Program`] on burn tensors, in inference or training mode:
//! burn's [`Kernels`] for the one interpreter ([`crate::interpret`]).

use burn::tensor::ops::{AvgPoolOptions, ConvOptions, ConvTransposeOptions, InterpolateOptions, MaxPoolOptions};
use burn::tensor::{Device, Tensor, activation, module};
use graph_ir::ops::{BinaryOp, Lrn, ReduceKind, UnaryOp};

use crate::conv_grad::{ConvGrad, ConvTap};
use crate::interpret::{self, Kernels};
use crate::lower::{Program, aligned4, pad4};

/// Batch statistics of one BatchNorm in a training-mode forward pass.
pub struct BatchStats {
    /// Parameter index of the running mean.
    pub mean_param: usize,
    /// Parameter index of the running variance.
    pub var_param: usize,
    /// Fraction of the running value kept (ONNX `momentum`).
    pub momentum: f64,
    pub mean: Tensor<1>,
    /// Population (biased) variance of the batch.
    pub var: Tensor<1>,
    /// Number of values per channel the statistics were taken over.
    pub count: usize,
}

/// Output of [`Program::forward`].
pub struct Forward {
    /// `[N, classes]` scores.
    pub logits: Tensor<2>,
    /// Empty in inference mode.
    pub stats: Vec<BatchStats>,
    /// Convolutions whose weight gradients are taken outside autodiff
    /// (training mode with a [`ConvGrad`] other than autodiff only).
    pub taps: Vec<ConvTap>,
}

impl Program {
    /// Runs the program on `x` (`[N, C, H, W]`) with parameter values `params`
    /// (one flat tensor per [`Program::params`] entry). In training mode
    /// BatchNorm normalises with batch statistics and reports them; in
    /// inference mode it uses the running statistics.
    pub fn forward(&self, params: &[Tensor<1>], x: Tensor<4>, train: bool) -> Forward {
        self.forward_with(params, x, train, ConvGrad::Autodiff)
    }

    /// [`Program::forward`], taking convolution weight gradients by
    /// `conv_grad` in training mode ([`Forward::taps`]).
    pub fn forward_with(&self, params: &[Tensor<1>], x: Tensor<4>, train: bool, conv_grad: ConvGrad) -> Forward {
        let n = x.dims()[0];
        let rounded;
        let params = if self.fake.is_empty() {
            params
        } else {
            rounded = self.fake.weights(self, params);
            rounded.as_slice()
        };
        let device = params.first().map(|p| p.device()).unwrap_or_else(|| x.device());
        let mut burn = Burn {
            program: self,
            params,
            train,
            conv_grad,
            device,
            stats: Vec::new(),
            taps: Vec::new(),
        };
        let out = interpret::run(self, &mut burn, x, n);
        Forward {
            logits: out.reshape([n, self.classes()]),
            stats: burn.stats,
            taps: burn.taps,
        }
    }
}

/// burn's kernels for one forward pass: the parameter values (rounded
/// where the program fake-quantizes), the mode, and what a training pass
/// gathers (batch statistics, convolution taps).
struct Burn<'p> {
    program: &'p Program,
    params: &'p [Tensor<1>],
    train: bool,
    conv_grad: ConvGrad,
    device: Device,
    stats: Vec<BatchStats>,
    taps: Vec<ConvTap>,
}

impl Kernels for Burn<'_> {
    type Value = Tensor<4>;

    fn share(&self, v: &Tensor<4>) -> Tensor<4> {
        v.clone()
    }

    fn store(&self, slot: usize, v: Tensor<4>) -> Tensor<4> {
        self.program.fake.activation(slot, v)
    }

    fn param(&self, p: usize) -> Tensor<4> {
        self.params[p].clone().reshape(pad4(&self.program.params[p].shape))
    }

    fn reshape(&self, x: Tensor<4>, shape: [usize; 4]) -> Tensor<4> {
        x.reshape(shape)
    }

    fn narrow(&self, x: Tensor<4>, axis: usize, start: usize, len: usize) -> Tensor<4> {
        x.narrow(axis, start, len)
    }

    fn cat(&self, parts: Vec<Tensor<4>>, axis: usize) -> Tensor<4> {
        Tensor::cat(parts, axis)
    }

    fn permute(&self, x: Tensor<4>, perm: [usize; 4]) -> Tensor<4> {
        x.permute(perm)
    }

    fn conv(&mut self, x: Tensor<4>, options: &ConvOptions<2>, weight: usize, bias: Option<usize>) -> Tensor<4> {
        let w = self.param(weight);
        let b = bias.map(|b| self.params[b].clone());
        if self.train && self.conv_grad != ConvGrad::Autodiff && ConvTap::applies(options) {
            let (y, tap) = ConvTap::run(x, w, b, options.clone(), weight, &self.device, self.conv_grad);
            self.taps.push(tap);
            y
        } else {
            module::conv2d(x, w, b, options.clone())
        }
    }

    fn batch_norm(&mut self, x: Tensor<4>, epsilon: f64, momentum: f64, params: [usize; 4]) -> Tensor<4> {
        let [scale, shift, mean, var] = params;
        let (g, b) = (self.params[scale].clone(), self.params[shift].clone());
        if self.train {
            let dims = x.dims();
            let out = crate::batch_norm::batch_norm_train(x, g, b, epsilon);
            self.stats.push(BatchStats {
                mean_param: mean,
                var_param: var,
                momentum,
                mean: out.mean,
                var: out.variance,
                count: dims[0] * dims[2] * dims[3],
            });
            out.output
        } else {
            let (m, v) = (self.params[mean].clone(), self.params[var].clone());
            module::batch_norm(x, g, b, m, v, epsilon)
        }
    }

    fn unary(&self, op: UnaryOp, x: Tensor<4>) -> Tensor<4> {
        unary(op, x)
    }

    fn binary(&self, op: BinaryOp, a: Tensor<4>, b: Tensor<4>) -> Tensor<4> {
        match op {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Pow => a.powf(b),
            BinaryOp::Max => a.clone() + activation::relu(b - a),
            BinaryOp::Min => a.clone() - activation::relu(a - b),
            BinaryOp::PRelu => activation::relu(a.clone()) - activation::relu(a.neg()) * b,
        }
    }

    fn softmax(&self, x: Tensor<4>, axis: usize, log: bool) -> Tensor<4> {
        if log {
            activation::log_softmax(x, axis)
        } else {
            activation::softmax(x, axis)
        }
    }

    fn max_pool(&self, x: Tensor<4>, options: &MaxPoolOptions<2>) -> Tensor<4> {
        module::max_pool2d(x, options.clone())
    }

    fn avg_pool(&self, x: Tensor<4>, options: &AvgPoolOptions<2>) -> Tensor<4> {
        module::avg_pool2d(x, options.clone())
    }

    fn global_average_pool(&self, x: Tensor<4>) -> Tensor<4> {
        x.mean_dim(2).mean_dim(3)
    }

    fn reduce(&self, mut x: Tensor<4>, kind: ReduceKind, axes: &[usize]) -> Tensor<4> {
        for &a in axes {
            x = match kind {
                ReduceKind::Mean => x.mean_dim(a),
                ReduceKind::Sum => x.sum_dim(a),
            };
        }
        x
    }

    fn gemm(
        &self,
        (a, a_shape): (Tensor<4>, [usize; 2]),
        (b, b_shape): (Tensor<4>, [usize; 2]),
        trans_b: bool,
        alpha: f64,
        c: Option<(Tensor<4>, [usize; 2], f64)>,
        out: [usize; 4],
    ) -> Tensor<4> {
        let a: Tensor<2> = a.reshape(a_shape);
        let mut b: Tensor<2> = b.reshape(b_shape);
        if trans_b {
            b = b.swap_dims(0, 1);
        }
        let mut y = a.matmul(b);
        if alpha != 1.0 {
            y = y.mul_scalar(alpha);
        }
        if let Some((c, c_shape, beta)) = c {
            let c: Tensor<2> = c.reshape(c_shape);
            y = y + c.mul_scalar(beta);
        }
        y.reshape(out)
    }

    fn matmul(
        &self,
        (a, a_shape): (Tensor<4>, [usize; 2]),
        (b, b_shape): (Tensor<4>, [usize; 2]),
        out: [usize; 4],
    ) -> Tensor<4> {
        let a: Tensor<2> = a.reshape(a_shape);
        let b: Tensor<2> = b.reshape(b_shape);
        a.matmul(b).reshape(out)
    }

    fn pad(&self, mut x: Tensor<4>, pads: &[(usize, usize, usize)], value: f32) -> Tensor<4> {
        for &(axis, before, after) in pads {
            let mut dims = x.dims();
            let mut parts = Vec::new();
            if before > 0 {
                dims[axis] = before;
                parts.push(Tensor::full(dims, value, &self.device));
            }
            parts.push(x);
            if after > 0 {
                dims[axis] = after;
                parts.push(Tensor::full(dims, value, &self.device));
            }
            x = Tensor::cat(parts, axis);
        }
        x
    }

    fn instance_norm(&self, x: Tensor<4>, epsilon: f64, scale: usize, shift: usize) -> Tensor<4> {
        let c = x.dims()[1];
        let mean = x.clone().mean_dim(3).mean_dim(2);
        let centered = x - mean;
        let var = (centered.clone() * centered.clone()).mean_dim(3).mean_dim(2);
        let g = self.params[scale].clone().reshape([1, c, 1, 1]);
        let b = self.params[shift].clone().reshape([1, c, 1, 1]);
        centered / var.add_scalar(epsilon).sqrt() * g + b
    }

    fn lrn(&self, x: Tensor<4>, l: &Lrn) -> Tensor<4> {
        let [n, c, h, w] = x.dims();
        let (before, after) = l.window();
        let sq = x.clone() * x.clone();
        let device = sq.device();
        let zeros = |k: usize| Tensor::<4>::zeros([n, k, h, w], &device);
        let mut parts = Vec::new();
        if before > 0 {
            parts.push(zeros(before));
        }
        parts.push(sq);
        if after > 0 {
            parts.push(zeros(after));
        }
        let padded = Tensor::cat(parts, 1);
        let sum = (0..l.size)
            .map(|k| padded.clone().narrow(1, k, c))
            .reduce(|a, b| a + b)
            .expect("size >= 1");
        let scale = (sum * (l.alpha as f64 / l.size as f64)).add_scalar(l.bias as f64);
        x / scale.powf_scalar(l.beta as f64)
    }

    fn conv_transpose(
        &self,
        x: Tensor<4>,
        options: &ConvTransposeOptions<2>,
        weight: usize,
        bias: Option<usize>,
    ) -> Tensor<4> {
        let w = self.param(weight);
        let b = bias.map(|b| self.params[b].clone());
        module::conv_transpose2d(x, w, b, options.clone())
    }

    fn interpolate(&self, x: Tensor<4>, options: &InterpolateOptions) -> Tensor<4> {
        module::interpolate(x, options.clone())
    }

    fn tile(&self, x: Tensor<4>, reps: [usize; 4]) -> Tensor<4> {
        x.repeat(&reps)
    }

    fn layer_norm(
        &self,
        x: Tensor<4>,
        rank: usize,
        first: usize,
        epsilon: f64,
        (scale, shift): (usize, Option<usize>),
    ) -> [Tensor<4>; 3] {
        let stat = |t: Tensor<4>| (first..4).fold(t, |t, d| t.mean_dim(d));
        let mean = stat(x.clone());
        let centered = x - mean.clone();
        let var = stat(centered.clone() * centered.clone());
        let inv = var.add_scalar(epsilon).sqrt().recip();
        let param = |p: usize| {
            let shape = &self.program.params[p].shape;
            let s = aligned4(shape, rank).unwrap_or_else(|| pad4(shape));
            self.params[p].clone().reshape(s)
        };
        let mut y = centered * inv.clone() * param(scale);
        if let Some(b) = shift {
            y = y + param(b);
        }
        [y, mean, inv]
    }

    fn global_max_pool(&self, x: Tensor<4>) -> Tensor<4> {
        x.max_dim(2).max_dim(3)
    }

    fn depth_to_space(&self, x: Tensor<4>, b: usize, crd: bool) -> Tensor<4> {
        let [n, c, h, w] = x.dims();
        let c = c / (b * b);
        let y: Tensor<6> = if crd {
            x.reshape([n, c, b, b, h, w]).permute([0, 1, 4, 2, 5, 3])
        } else {
            x.reshape([n, b, b, c, h, w]).permute([0, 3, 4, 1, 5, 2])
        };
        y.reshape([n, c, h * b, w * b])
    }

    fn space_to_depth(&self, x: Tensor<4>, b: usize, crd: bool) -> Tensor<4> {
        let [n, c, h, w] = x.dims();
        let blocks: Tensor<6> = x.reshape([n, c, h / b, b, w / b, b]);
        let y = if crd {
            blocks.permute([0, 1, 3, 5, 2, 4])
        } else {
            blocks.permute([0, 3, 5, 1, 2, 4])
        };
        y.reshape([n, c * b * b, h / b, w / b])
    }

    fn resample(&self, x: Tensor<4>, rows: &[f32], cols: &[f32], input: [usize; 2], output: [usize; 2]) -> Tensor<4> {
        let [n, c, _, _] = x.dims();
        let matrix = |m: &[f32], o: usize, i: usize| {
            Tensor::<1>::from_floats(m, &self.device)
                .reshape([1, 1, o, i])
                .expand([n, c, o, i])
        };
        let across = x.matmul(matrix(cols, output[1], input[1]).swap_dims(2, 3));
        matrix(rows, output[0], input[0]).matmul(across)
    }
}

fn unary(op: UnaryOp, x: Tensor<4>) -> Tensor<4> {
    match op {
        UnaryOp::Relu => activation::relu(x),
        UnaryOp::Clip { min, max } => clip(x, min, max),
        UnaryOp::Sigmoid => activation::sigmoid(x),
        UnaryOp::HardSigmoid { alpha, beta } => clip(x.mul_scalar(alpha).add_scalar(beta), Some(0.0), Some(1.0)),
        UnaryOp::HardSwish => activation::hard_swish(x),
        UnaryOp::Tanh => activation::tanh(x),
        UnaryOp::LeakyRelu { alpha } => leaky_relu(x, alpha),
        UnaryOp::Elu { alpha } => activation::elu(x, alpha as f64),
        UnaryOp::Selu { alpha, gamma } => activation::elu(x, alpha as f64) * gamma,
        UnaryOp::Softplus => activation::softplus(x, 1.0),
        UnaryOp::Softsign => activation::softsign(x),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Neg => x.neg(),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Gelu { tanh: false } => activation::gelu(x),
        UnaryOp::Gelu { tanh: true } => activation::gelu_approximate(x),
        UnaryOp::Erf => x.erf(),
        UnaryOp::Mish => activation::mish(x),
        UnaryOp::Log => x.log(),
    }
}

/// `x` clamped to `[min, max]`, with PyTorch's gradient: zero where `x`
/// is at or beyond a bound (burn's `clamp` passes it where `x` equals the
/// bound, which a ReLU6 after a zero bias meets wherever its input window
/// is all zeros).
fn clip(x: Tensor<4>, min: Option<f32>, max: Option<f32>) -> Tensor<4> {
    let x = match min {
        Some(lo) => {
            let at_or_below = x.clone().lower_equal_elem(lo);
            x.mask_fill(at_or_below, lo)
        }
        None => x,
    };
    match max {
        Some(hi) => {
            let at_or_above = x.clone().greater_equal_elem(hi);
            x.mask_fill(at_or_above, hi)
        }
        None => x,
    }
}

/// `x` where positive, `alpha · x` elsewhere, with PyTorch's gradient at 0:
/// `alpha` (burn's `leaky_relu` gives 1 there, which a convolution with a
/// zero bias meets wherever its input window is all zeros).
fn leaky_relu(x: Tensor<4>, alpha: f32) -> Tensor<4> {
    let at_or_below = x.clone().lower_equal_elem(0.0);
    let scaled = x.clone().mul_scalar(alpha);
    x.mask_where(at_or_below, scaled)
}
