//! Running a [`Program`] on burn tensors, in inference or training mode.

use burn::tensor::{Tensor, activation, module};
use graph_ir::ops::{BinaryOp, ReduceKind, UnaryOp};

use crate::conv_grad::{ConvGrad, ConvTap};
use crate::lower::{Kernel, Operand, Program, aligned4, pad4};

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
        let mut taps = Vec::new();
        let mut slots: Vec<Option<Tensor<4>>> = vec![None; self.slots.len()];
        slots[self.input] = Some(self.fake.activation(self.input, x));
        let rounded;
        let params = if self.fake.is_empty() {
            params
        } else {
            rounded = self.fake.weights(self, params);
            rounded.as_slice()
        };
        let mut stats = Vec::new();
        let device = params
            .first()
            .map(|p| p.device())
            .unwrap_or_else(|| slots[self.input].as_ref().expect("set").device());
        for step in &self.steps {
            let read = |i: usize, slots: &[Option<Tensor<4>>]| -> Tensor<4> {
                match step.inputs[i] {
                    Operand::Slot(s) => slots[s].clone().expect("topological order"),
                    Operand::Param(p) => params[p].clone().reshape(pad4(&self.params[p].shape)),
                }
            };
            let shape_of = |i: usize| -> Vec<usize> {
                match step.inputs[i] {
                    Operand::Slot(s) => self.shape(s, n),
                    Operand::Param(p) => self.params[p].shape.clone(),
                }
            };
            let out_shape = self.shape(step.outputs[0], n);
            let outputs: Vec<Tensor<4>> = match &step.kernel {
                Kernel::Conv { options, weight, bias } => {
                    let w = params[*weight].clone().reshape(pad4(&self.params[*weight].shape));
                    let b = bias.map(|b| params[b].clone());
                    if train && conv_grad != ConvGrad::Autodiff && ConvTap::applies(options) {
                        let (y, tap) =
                            ConvTap::run(read(0, &slots), w, b, options.clone(), *weight, &device, conv_grad);
                        taps.push(tap);
                        vec![y]
                    } else {
                        vec![module::conv2d(read(0, &slots), w, b, options.clone())]
                    }
                }
                Kernel::BatchNorm {
                    epsilon,
                    momentum,
                    scale,
                    shift,
                    mean,
                    var,
                } => {
                    let x = read(0, &slots);
                    let (g, b) = (params[*scale].clone(), params[*shift].clone());
                    if train {
                        let dims = x.dims();
                        let out = module::batch_norm_train(x, g, b, *epsilon);
                        stats.push(BatchStats {
                            mean_param: *mean,
                            var_param: *var,
                            momentum: *momentum,
                            mean: out.mean,
                            var: out.variance,
                            count: dims[0] * dims[2] * dims[3],
                        });
                        vec![out.output]
                    } else {
                        let (m, v) = (params[*mean].clone(), params[*var].clone());
                        vec![module::batch_norm(x, g, b, m, v, *epsilon)]
                    }
                }
                Kernel::Unary(op) => vec![unary(*op, read(0, &slots))],
                Kernel::Binary(op) => {
                    let r = out_shape.len();
                    let a = align(read(0, &slots), &shape_of(0), r);
                    let b = align(read(1, &slots), &shape_of(1), r);
                    vec![match op {
                        BinaryOp::Add => a + b,
                        BinaryOp::Sub => a - b,
                        BinaryOp::Mul => a * b,
                        BinaryOp::Div => a / b,
                        BinaryOp::Pow => a.powf(b),
                        BinaryOp::Max => a.clone() + activation::relu(b - a),
                        BinaryOp::Min => a.clone() - activation::relu(a - b),
                        BinaryOp::PRelu => activation::relu(a.clone()) - activation::relu(a.neg()) * b,
                    }]
                }
                Kernel::InstanceNorm { epsilon, scale, shift } => {
                    let x = read(0, &slots);
                    let c = x.dims()[1];
                    let mean = x.clone().mean_dim(3).mean_dim(2);
                    let centered = x - mean;
                    let var = (centered.clone() * centered.clone()).mean_dim(3).mean_dim(2);
                    let g = params[*scale].clone().reshape([1, c, 1, 1]);
                    let b = params[*shift].clone().reshape([1, c, 1, 1]);
                    vec![centered / var.add_scalar(*epsilon).sqrt() * g + b]
                }
                Kernel::Lrn(l) => {
                    let x = read(0, &slots);
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
                    vec![x / scale.powf_scalar(l.beta as f64)]
                }
                Kernel::Softmax { axis, log: false } => vec![activation::softmax(read(0, &slots), *axis)],
                Kernel::Softmax { axis, log: true } => vec![activation::log_softmax(read(0, &slots), *axis)],
                Kernel::Concat(axis) => {
                    let parts = (0..step.inputs.len()).map(|i| read(i, &slots)).collect();
                    vec![Tensor::cat(parts, *axis)]
                }
                Kernel::Split { axis, sizes } => {
                    let x = read(0, &slots);
                    let mut start = 0;
                    sizes
                        .iter()
                        .map(|&len| {
                            let part = x.clone().narrow(*axis, start, len);
                            start += len;
                            part
                        })
                        .collect()
                }
                Kernel::Narrow(ranges) => {
                    let mut x = read(0, &slots);
                    for &(axis, start, len) in ranges {
                        x = x.narrow(axis, start, len);
                    }
                    vec![x]
                }
                Kernel::Reshape => vec![read(0, &slots).reshape(pad4(&out_shape))],
                Kernel::Transpose(perm) => vec![read(0, &slots).permute(*perm)],
                Kernel::MaxPool(o) => vec![module::max_pool2d(read(0, &slots), o.clone())],
                Kernel::AvgPool(o) => vec![module::avg_pool2d(read(0, &slots), o.clone())],
                Kernel::GlobalAveragePool => {
                    vec![read(0, &slots).mean_dim(2).mean_dim(3)]
                }
                Kernel::Reduce(kind, axes) => {
                    let mut x = read(0, &slots);
                    for &a in axes {
                        x = match kind {
                            ReduceKind::Mean => x.mean_dim(a),
                            ReduceKind::Sum => x.sum_dim(a),
                        };
                    }
                    vec![x.reshape(pad4(&out_shape))]
                }
                Kernel::ConvTranspose { options, weight, bias } => {
                    let w = params[*weight].clone().reshape(pad4(&self.params[*weight].shape));
                    let b = bias.map(|b| params[b].clone());
                    vec![module::conv_transpose2d(read(0, &slots), w, b, options.clone())]
                }
                Kernel::Interpolate(options) => vec![module::interpolate(read(0, &slots), options.clone())],
                Kernel::Tile(reps) => vec![read(0, &slots).repeat(reps)],
                Kernel::Gemm { alpha, beta, trans_b } => {
                    let (k, bs) = (shape_of(0)[1], shape_of(1));
                    let a: Tensor<2> = read(0, &slots).reshape([n, k]);
                    let mut b: Tensor<2> = read(1, &slots).reshape([bs[0], bs[1]]);
                    if *trans_b {
                        b = b.swap_dims(0, 1);
                    }
                    let m = b.dims()[1];
                    let mut y = a.matmul(b);
                    if *alpha != 1.0 {
                        y = y.mul_scalar(*alpha);
                    }
                    if step.inputs.len() > 2 && *beta != 0.0 {
                        let cs = shape_of(2);
                        let vol: usize = cs.iter().product();
                        let rows = if vol == m || vol == 1 { 1 } else { n };
                        let c: Tensor<2> = read(2, &slots).reshape([rows, vol / rows]);
                        y = y + c.mul_scalar(*beta);
                    }
                    vec![y.reshape([n, m, 1, 1])]
                }
                Kernel::MatMul => {
                    let (sa, sb) = (shape_of(0), shape_of(1));
                    let k = sa[sa.len() - 1];
                    let rows = sa.iter().product::<usize>() / k.max(1);
                    let a: Tensor<2> = read(0, &slots).reshape([rows, k]);
                    let b: Tensor<2> = read(1, &slots).reshape([sb[0], sb.get(1).copied().unwrap_or(1)]);
                    vec![a.matmul(b).reshape(pad4(&out_shape))]
                }
                Kernel::LayerNorm {
                    first,
                    epsilon,
                    scale,
                    shift,
                } => {
                    let x = read(0, &slots);
                    let r = shape_of(0).len();
                    let stat = |t: Tensor<4>| (*first..4).fold(t, |t, d| t.mean_dim(d));
                    let mean = stat(x.clone());
                    let centered = x - mean.clone();
                    let var = stat(centered.clone() * centered.clone());
                    let inv = var.add_scalar(*epsilon).sqrt().recip();
                    let param = |p: usize| {
                        let shape = &self.params[p].shape;
                        let s = aligned4(shape, r).unwrap_or_else(|| pad4(shape));
                        params[p].clone().reshape(s)
                    };
                    let mut y = centered * inv.clone() * param(*scale);
                    if let Some(b) = shift {
                        y = y + param(*b);
                    }
                    vec![y, mean, inv]
                }
                Kernel::GlobalMaxPool => vec![read(0, &slots).max_dim(2).max_dim(3)],
                Kernel::DepthToSpace { block: b, crd } => {
                    let x = read(0, &slots);
                    let [n, c, h, w] = x.dims();
                    let c = c / (b * b);
                    let y: Tensor<6> = if *crd {
                        x.reshape([n, c, *b, *b, h, w]).permute([0, 1, 4, 2, 5, 3])
                    } else {
                        x.reshape([n, *b, *b, c, h, w]).permute([0, 3, 4, 1, 5, 2])
                    };
                    vec![y.reshape([n, c, h * b, w * b])]
                }
                Kernel::SpaceToDepth { block: b, crd } => {
                    let x = read(0, &slots);
                    let [n, c, h, w] = x.dims();
                    let blocks: Tensor<6> = x.reshape([n, c, h / b, *b, w / b, *b]);
                    let y = if *crd {
                        blocks.permute([0, 1, 3, 5, 2, 4])
                    } else {
                        blocks.permute([0, 3, 5, 1, 2, 4])
                    };
                    vec![y.reshape([n, c * b * b, h / b, w / b])]
                }
                Kernel::Resample {
                    rows,
                    cols,
                    input,
                    output,
                } => {
                    let x = read(0, &slots);
                    let [n, c, _, _] = x.dims();
                    let matrix = |m: &[f32], o: usize, i: usize| {
                        Tensor::<1>::from_floats(m, &device)
                            .reshape([1, 1, o, i])
                            .expand([n, c, o, i])
                    };
                    let across = x.matmul(matrix(cols, output[1], input[1]).swap_dims(2, 3));
                    vec![matrix(rows, output[0], input[0]).matmul(across)]
                }
                Kernel::Pad(pads, value) => {
                    let mut x = read(0, &slots);
                    for &(axis, before, after) in pads {
                        let mut dims = x.dims();
                        let mut parts = Vec::new();
                        if before > 0 {
                            dims[axis] = before;
                            parts.push(Tensor::full(dims, *value, &device));
                        }
                        parts.push(x);
                        if after > 0 {
                            dims[axis] = after;
                            parts.push(Tensor::full(dims, *value, &device));
                        }
                        x = Tensor::cat(parts, axis);
                    }
                    vec![x]
                }
            };
            for (slot, t) in step.outputs.iter().zip(outputs) {
                slots[*slot] = Some(self.fake.activation(*slot, t));
            }
        }
        let out = slots[self.output].take().expect("output computed");
        Forward {
            logits: out.reshape([n, self.classes()]),
            stats,
            taps,
        }
    }
}

/// Reshapes a value of logical shape `shape` to rank `rank` by numpy broadcasting
/// rules (leading ones), then pads to the rank-4 layout.
fn align(x: Tensor<4>, shape: &[usize], rank: usize) -> Tensor<4> {
    match aligned4(shape, rank) {
        Some(s) => x.reshape(s),
        None => x,
    }
}

fn unary(op: UnaryOp, x: Tensor<4>) -> Tensor<4> {
    match op {
        UnaryOp::Relu => activation::relu(x),
        UnaryOp::Clip { min, max } => match (min, max) {
            (Some(lo), Some(hi)) => x.clamp(lo, hi),
            (Some(lo), None) => x.clamp_min(lo),
            (None, Some(hi)) => x.clamp_max(hi),
            (None, None) => x,
        },
        UnaryOp::Sigmoid => activation::sigmoid(x),
        UnaryOp::HardSigmoid { alpha, beta } => activation::hard_sigmoid(x, alpha as f64, beta as f64),
        UnaryOp::HardSwish => activation::hard_swish(x),
        UnaryOp::Tanh => activation::tanh(x),
        UnaryOp::LeakyRelu { alpha } => activation::leaky_relu(x, alpha as f64),
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
