//! One interpreter of a [`Program`] for every backend: the steps run in
//! order over the value slots, the layout kernels (concatenation, splits,
//! slices, reshapes, broadcasting alignment, matrix shapes) are written
//! once here, and every tensor operation is the backend's ([`Kernels`]):
//! burn's tensors in [`Program::forward`], LibTorch's in the `tch` build's
//! training step.

use burn::tensor::ops::{AvgPoolOptions, ConvOptions, ConvTransposeOptions, InterpolateOptions, MaxPoolOptions};
use graph_ir::ops::{BinaryOp, Lrn, ReduceKind, UnaryOp};

use crate::lower::{Kernel, Operand, Program, Step, aligned4, pad4};

/// The tensor operations the interpreter needs from a backend. A value is
/// a rank-4 tensor in the program's layout (a value of logical rank `r`
/// has `4 - r` trailing ones); parameters are named by their index in
/// [`Program::params`] and held by the backend.
///
/// The kernels after [`Kernels::pad`] exist on some backends only: a
/// backend without them refuses the programs that use them before running
/// one, and its methods for them are never called.
pub(crate) trait Kernels {
    type Value;

    /// Another handle on `v`, sharing its storage.
    fn share(&self, v: &Self::Value) -> Self::Value;
    /// `v` as slot `slot` keeps it (rounded where the backend fake-quantizes).
    fn store(&self, slot: usize, v: Self::Value) -> Self::Value;
    /// Parameter `p` in the rank-4 layout.
    fn param(&self, p: usize) -> Self::Value;
    fn reshape(&self, x: Self::Value, shape: [usize; 4]) -> Self::Value;
    fn narrow(&self, x: Self::Value, axis: usize, start: usize, len: usize) -> Self::Value;
    fn cat(&self, parts: Vec<Self::Value>, axis: usize) -> Self::Value;
    fn permute(&self, x: Self::Value, perm: [usize; 4]) -> Self::Value;

    /// A 2-d convolution by parameter `weight`, plus parameter `bias`.
    fn conv(&mut self, x: Self::Value, options: &ConvOptions<2>, weight: usize, bias: Option<usize>) -> Self::Value;
    /// BatchNorm by the parameters `[scale, shift, mean, var]`: batch
    /// statistics where the backend trains (and keeps them), the running
    /// ones otherwise.
    fn batch_norm(&mut self, x: Self::Value, epsilon: f64, momentum: f64, params: [usize; 4]) -> Self::Value;
    fn unary(&self, op: UnaryOp, x: Self::Value) -> Self::Value;
    /// `op` of two values already aligned for broadcasting.
    fn binary(&self, op: BinaryOp, a: Self::Value, b: Self::Value) -> Self::Value;
    fn softmax(&self, x: Self::Value, axis: usize, log: bool) -> Self::Value;
    fn max_pool(&self, x: Self::Value, options: &MaxPoolOptions<2>) -> Self::Value;
    fn avg_pool(&self, x: Self::Value, options: &AvgPoolOptions<2>) -> Self::Value;
    /// The mean over axes 2 and 3, kept as size-1 axes.
    fn global_average_pool(&self, x: Self::Value) -> Self::Value;
    /// The mean or sum over `axes`, kept as size-1 axes.
    fn reduce(&self, x: Self::Value, kind: ReduceKind, axes: &[usize]) -> Self::Value;
    /// `alpha · A·B (+ C·beta)` with `A` of shape `a`, `B` of shape `b`
    /// (transposed first with `trans_b`) and `C` of its shape, as `out`.
    fn gemm(
        &self,
        a: (Self::Value, [usize; 2]),
        b: (Self::Value, [usize; 2]),
        trans_b: bool,
        alpha: f64,
        c: Option<(Self::Value, [usize; 2], f64)>,
        out: [usize; 4],
    ) -> Self::Value;
    /// The matrix product of `a` and `b` taken at the given 2-d shapes,
    /// as `out`.
    fn matmul(&self, a: (Self::Value, [usize; 2]), b: (Self::Value, [usize; 2]), out: [usize; 4]) -> Self::Value;
    /// Constant padding, `(axis, before, after)` per padded axis.
    fn pad(&self, x: Self::Value, pads: &[(usize, usize, usize)], value: f32) -> Self::Value;

    fn instance_norm(&self, x: Self::Value, epsilon: f64, scale: usize, shift: usize) -> Self::Value;
    fn lrn(&self, x: Self::Value, l: &Lrn) -> Self::Value;
    fn conv_transpose(
        &self,
        x: Self::Value,
        options: &ConvTransposeOptions<2>,
        weight: usize,
        bias: Option<usize>,
    ) -> Self::Value;
    fn interpolate(&self, x: Self::Value, options: &InterpolateOptions) -> Self::Value;
    fn tile(&self, x: Self::Value, reps: [usize; 4]) -> Self::Value;
    /// Normalisation over the axes from `first` on of a value of logical
    /// rank `rank`: Y, Mean and InvStdDev.
    fn layer_norm(
        &self,
        x: Self::Value,
        rank: usize,
        first: usize,
        epsilon: f64,
        params: (usize, Option<usize>),
    ) -> [Self::Value; 3];
    fn global_max_pool(&self, x: Self::Value) -> Self::Value;
    fn depth_to_space(&self, x: Self::Value, block: usize, crd: bool) -> Self::Value;
    fn space_to_depth(&self, x: Self::Value, block: usize, crd: bool) -> Self::Value;
    /// Separable resampling by the row-major weight matrices `rows`
    /// (`[output[0], input[0]]`) and `cols` (`[output[1], input[1]]`).
    fn resample(
        &self,
        x: Self::Value,
        rows: &[f32],
        cols: &[f32],
        input: [usize; 2],
        output: [usize; 2],
    ) -> Self::Value;
}

/// Runs `program` on `x`, a batch of `n`, with `k`'s kernels: the value of
/// the program's output slot.
pub(crate) fn run<K: Kernels>(program: &Program, k: &mut K, x: K::Value, n: usize) -> K::Value {
    let mut slots: Vec<Option<K::Value>> = (0..program.slots.len()).map(|_| None).collect();
    slots[program.input] = Some(k.store(program.input, x));
    for step in &program.steps {
        let frame = Frame {
            program,
            step,
            slots: &slots,
            n,
        };
        let outputs = kernel(k, &frame);
        for (slot, t) in step.outputs.iter().zip(outputs) {
            slots[*slot] = Some(k.store(*slot, t));
        }
    }
    slots[program.output].take().expect("output computed")
}

/// One step with the values computed before it.
struct Frame<'a, V> {
    program: &'a Program,
    step: &'a Step,
    slots: &'a [Option<V>],
    n: usize,
}

impl<V> Frame<'_, V> {
    /// Operand `i` of the step.
    fn read<K: Kernels<Value = V>>(&self, k: &K, i: usize) -> V {
        match self.step.inputs[i] {
            Operand::Slot(s) => k.share(self.slots[s].as_ref().expect("topological order")),
            Operand::Param(p) => k.param(p),
        }
    }

    /// The logical shape of operand `i`.
    fn shape_of(&self, i: usize) -> Vec<usize> {
        match self.step.inputs[i] {
            Operand::Slot(s) => self.program.shape(s, self.n),
            Operand::Param(p) => self.program.params[p].shape.clone(),
        }
    }

    /// The logical shape of the step's first output.
    fn out_shape(&self) -> Vec<usize> {
        self.program.shape(self.step.outputs[0], self.n)
    }

    /// Operand `i` lined up with a result of rank `rank` for broadcasting.
    fn aligned<K: Kernels<Value = V>>(&self, k: &K, i: usize, rank: usize) -> V {
        let x = self.read(k, i);
        match aligned4(&self.shape_of(i), rank) {
            Some(s) => k.reshape(x, s),
            None => x,
        }
    }
}

/// The outputs of the frame's step.
fn kernel<K: Kernels>(k: &mut K, f: &Frame<K::Value>) -> Vec<K::Value> {
    let x = || f.read(k, 0);
    match &f.step.kernel {
        Kernel::Conv { options, weight, bias } => {
            let x = x();
            vec![k.conv(x, options, *weight, *bias)]
        }
        Kernel::BatchNorm {
            epsilon,
            momentum,
            scale,
            shift,
            mean,
            var,
        } => {
            let x = x();
            vec![k.batch_norm(x, *epsilon, *momentum, [*scale, *shift, *mean, *var])]
        }
        Kernel::Unary(op) => vec![k.unary(*op, x())],
        Kernel::Binary(op) => {
            let r = f.out_shape().len();
            let (a, b) = (f.aligned(k, 0, r), f.aligned(k, 1, r));
            vec![k.binary(*op, a, b)]
        }
        Kernel::Softmax { axis, log } => vec![k.softmax(x(), *axis, *log)],
        Kernel::Concat(axis) => {
            let parts = (0..f.step.inputs.len()).map(|i| f.read(k, i)).collect();
            vec![k.cat(parts, *axis)]
        }
        Kernel::Split { axis, sizes } => {
            let x = x();
            let mut start = 0;
            sizes
                .iter()
                .map(|&len| {
                    let part = k.narrow(k.share(&x), *axis, start, len);
                    start += len;
                    part
                })
                .collect()
        }
        Kernel::Narrow(ranges) => {
            let mut x = x();
            for &(axis, start, len) in ranges {
                x = k.narrow(x, axis, start, len);
            }
            vec![x]
        }
        Kernel::Reshape => vec![k.reshape(x(), pad4(&f.out_shape()))],
        Kernel::Transpose(perm) => vec![k.permute(x(), *perm)],
        Kernel::MaxPool(o) => vec![k.max_pool(x(), o)],
        Kernel::AvgPool(o) => vec![k.avg_pool(x(), o)],
        Kernel::GlobalAveragePool => vec![k.global_average_pool(x())],
        Kernel::Reduce(kind, axes) => {
            let y = k.reduce(x(), *kind, axes);
            vec![k.reshape(y, pad4(&f.out_shape()))]
        }
        Kernel::Gemm { alpha, beta, trans_b } => vec![gemm(k, f, *alpha, *beta, *trans_b)],
        Kernel::MatMul => {
            let (sa, sb) = (f.shape_of(0), f.shape_of(1));
            let inner = sa[sa.len() - 1];
            let rows = sa.iter().product::<usize>() / inner.max(1);
            let a = (f.read(k, 0), [rows, inner]);
            let b = (f.read(k, 1), [sb[0], sb.get(1).copied().unwrap_or(1)]);
            vec![k.matmul(a, b, pad4(&f.out_shape()))]
        }
        Kernel::Pad(pads, value) => vec![k.pad(x(), pads, *value)],
        Kernel::InstanceNorm { epsilon, scale, shift } => vec![k.instance_norm(x(), *epsilon, *scale, *shift)],
        Kernel::Lrn(l) => vec![k.lrn(x(), l)],
        Kernel::ConvTranspose { options, weight, bias } => vec![k.conv_transpose(x(), options, *weight, *bias)],
        Kernel::Interpolate(options) => vec![k.interpolate(x(), options)],
        Kernel::Tile(reps) => vec![k.tile(x(), *reps)],
        Kernel::LayerNorm {
            first,
            epsilon,
            scale,
            shift,
        } => {
            let rank = f.shape_of(0).len();
            k.layer_norm(x(), rank, *first, *epsilon, (*scale, *shift)).into()
        }
        Kernel::GlobalMaxPool => vec![k.global_max_pool(x())],
        Kernel::DepthToSpace { block, crd } => vec![k.depth_to_space(x(), *block, *crd)],
        Kernel::SpaceToDepth { block, crd } => vec![k.space_to_depth(x(), *block, *crd)],
        Kernel::Resample {
            rows,
            cols,
            input,
            output,
        } => vec![k.resample(x(), rows, cols, *input, *output)],
    }
}

/// `[N, K] x [K, M]` (or `[M, K]` transposed), plus `C` broadcast over the
/// rows when it has one row's values or one value, as `[N, M, 1, 1]`.
fn gemm<K: Kernels>(k: &K, f: &Frame<K::Value>, alpha: f64, beta: f64, trans_b: bool) -> K::Value {
    let n = f.n;
    let (inner, bs) = (f.shape_of(0)[1], f.shape_of(1));
    let m = if trans_b { bs[0] } else { bs[1] };
    let a = (f.read(k, 0), [n, inner]);
    let b = (f.read(k, 1), [bs[0], bs[1]]);
    let c = (f.step.inputs.len() > 2 && beta != 0.0).then(|| {
        let vol: usize = f.shape_of(2).iter().product();
        let rows = if vol == m || vol == 1 { 1 } else { n };
        (f.read(k, 2), [rows, vol / rows], beta)
    });
    k.gemm(a, b, trans_b, alpha, c, [n, m, 1, 1])
}
