//! Convolutions (grouped and depthwise), fully-connected layers and 2-D
//! pools: NHWC, weights as float32 constants.

use super::Loader;
use litert::schema::litert as fb;
use tract_core::internal::*;
use tract_core::ops::change_axes::wire_with_rank_broadcast;
use tract_core::ops::cnn::{Conv, KernelFormat, MaxPool, PaddingSpec, PoolSpec, SumPool};
use tract_core::ops::einsum::EinSum;
use tract_core::ops::nn::DataFormat;

fn padding(p: fb::Padding) -> TractResult<PaddingSpec> {
    Ok(match p {
        fb::Padding::SAME => PaddingSpec::SameUpper,
        fb::Padding::VALID => PaddingSpec::Valid,
        other => bail!("has padding {other:?}"),
    })
}

fn positive(what: &str, v: i32) -> TractResult<usize> {
    usize::try_from(v)
        .ok()
        .filter(|v| *v > 0)
        .with_context(|| format!("has {what} {v}"))
}

/// The float32 weights (`ins[1]`) and bias (`ins[2]`, zeros where absent)
/// of a layer with `outputs` output channels.
fn weights(l: &mut Loader, ins: &[i32], outputs: impl Fn(&Tensor) -> usize) -> TractResult<(Arc<Tensor>, Arc<Tensor>)> {
    let k = *ins.get(1).context("has no filter input")?;
    let kernel = l.float_const(k)?.context("has a filter that is not a constant")?;
    let n = outputs(&kernel);
    let bias = match ins.get(2).copied().filter(|b| *b >= 0) {
        Some(b) => l.float_const(b)?.context("has a bias that is not a constant")?,
        None => Arc::new(Tensor::zero::<f32>(&[n])?),
    };
    ensure!(
        bias.shape() == [n],
        "has a bias of shape {:?} for {n} output channels",
        bias.shape()
    );
    Ok((kernel, bias))
}

fn input_shape(l: &Loader, x: i32) -> TractResult<TVec<usize>> {
    let s = l.shape(x)?;
    ensure!(s.len() == 4, "reads an input of rank {} (NHWC expected)", s.len());
    Ok(s)
}

/// CONV_2D: filters `[O, H, W, I/groups]`, groups = input channels / I.
pub(super) fn conv2d(l: &mut Loader, name: &str, op: &fb::Operator, ins: &[i32]) -> TractResult<OutletId> {
    let o = op
        .builtin_options_as_conv_2_doptions()
        .context("has no Conv2DOptions")?;
    let xs = input_shape(l, ins[0])?;
    let (kernel, bias) = weights(l, ins, |k| k.shape().first().copied().unwrap_or(0))?;
    let ks = kernel.shape().to_vec();
    ensure!(ks.len() == 4, "has a filter of rank {}", ks.len());
    let (cin, per_group) = (xs[3], ks[3]);
    ensure!(
        per_group > 0 && cin % per_group == 0 && ks[0] % (cin / per_group) == 0,
        "has a filter of shape {ks:?} for {cin} input channels"
    );
    let kernel = Arc::new(kernel.as_ref().clone().permute_axes(&[0, 3, 1, 2])?);
    let window = Window {
        padding: o.padding(),
        strides: (o.stride_h(), o.stride_w()),
        dilations: (o.dilation_h_factor(), o.dilation_w_factor()),
    };
    let w = convolve(l, name, ins[0], kernel, bias, cin / per_group, &window)?;
    l.activation(name, w, o.fused_activation_function())
}

/// DEPTHWISE_CONV_2D: filters `[1, H, W, C·M]`, one group per input channel.
pub(super) fn depthwise(l: &mut Loader, name: &str, op: &fb::Operator, ins: &[i32]) -> TractResult<OutletId> {
    let o = op
        .builtin_options_as_depthwise_conv_2_doptions()
        .context("has no DepthwiseConv2DOptions")?;
    let xs = input_shape(l, ins[0])?;
    let (kernel, bias) = weights(l, ins, |k| k.shape().last().copied().unwrap_or(0))?;
    let ks = kernel.shape().to_vec();
    let cin = xs[3];
    ensure!(
        ks.len() == 4 && ks[0] == 1 && cin > 0 && ks[3] % cin == 0,
        "has a filter of shape {ks:?} for {cin} input channels"
    );
    let kernel = Arc::new(kernel.as_ref().clone().permute_axes(&[3, 0, 1, 2])?);
    let window = Window {
        padding: o.padding(),
        strides: (o.stride_h(), o.stride_w()),
        dilations: (o.dilation_h_factor(), o.dilation_w_factor()),
    };
    let w = convolve(l, name, ins[0], kernel, bias, cin, &window)?;
    l.activation(name, w, o.fused_activation_function())
}

/// The window options of a CONV_2D or DEPTHWISE_CONV_2D: LiteRT's
/// padding, strides and dilations `(h, w)`.
struct Window {
    padding: fb::Padding,
    strides: (i32, i32),
    dilations: (i32, i32),
}

/// Tensor `x` (NHWC) convolved in `group` groups by `kernel` plus `bias`.
/// The kernel is OIHW, `[O, I/group, H, W]`: tract reads a grouped OHWI
/// filter with the groups on O.
fn convolve(
    l: &mut Loader,
    name: &str,
    x: i32,
    kernel: Arc<Tensor>,
    bias: Arc<Tensor>,
    group: usize,
    w: &Window,
) -> TractResult<OutletId> {
    let ks = kernel.shape();
    let spec = PoolSpec {
        data_format: DataFormat::NHWC,
        kernel_shape: tvec!(ks[2], ks[3]),
        padding: padding(w.padding)?,
        dilations: Some(tvec!(
            positive("dilation", w.dilations.0)?,
            positive("dilation", w.dilations.1)?
        )),
        strides: Some(tvec!(
            positive("stride", w.strides.0)?,
            positive("stride", w.strides.1)?
        )),
        input_channels: ks[1] * group,
        output_channels: ks[0],
    };
    let conv = Conv {
        pool_spec: spec,
        kernel_fmt: KernelFormat::OIHW,
        group,
        q_params: None,
    };
    let x = l.float(x)?;
    let k = l.konst(&format!("{name}.filter"), kernel)?;
    let b = l.konst(&format!("{name}.bias"), bias)?;
    l.wire(name, conv, &[x, k, b])
}

/// FULLY_CONNECTED: weights `[O, I]`; the input is read as rows of `I`,
/// the result takes the output tensor's shape.
pub(super) fn fully_connected(
    l: &mut Loader,
    name: &str,
    op: &fb::Operator,
    ins: &[i32],
    y: i32,
) -> TractResult<OutletId> {
    let act = op
        .builtin_options_as_fully_connected_options()
        .map(|o| o.fused_activation_function())
        .unwrap_or(fb::ActivationFunctionType::NONE);
    let (weights, bias) = weights(l, ins, |k| k.shape().first().copied().unwrap_or(0))?;
    let ws = weights.shape().to_vec();
    ensure!(ws.len() == 2 && ws[1] > 0, "has weights of shape {ws:?}");
    let xs = l.shape(ins[0])?;
    let len: usize = xs.iter().product();
    ensure!(
        len.is_multiple_of(ws[1]),
        "reads an input of shape {xs:?} as rows of {}",
        ws[1]
    );
    let rows = len / ws[1];
    let mut x = l.float(ins[0])?;
    if xs[..] != [rows, ws[1]] {
        let to = tvec!(rows.to_dim(), ws[1].to_dim());
        x = l.wire(&format!("{name}.rows"), AxisOp::Reshape(0, dims(&xs), to), &[x])?;
    }
    let w = l.konst(&format!("{name}.weights"), weights)?;
    let einsum = EinSum {
        axes: "BI,OI->BO".parse()?,
        operating_dt: DatumType::F32,
        q_params: None,
    };
    let product = l.wire(&format!("{name}.product"), einsum, &[x, w])?;
    let b = l.konst(&format!("{name}.bias"), bias)?;
    let sum = wire_with_rank_broadcast(
        l.model.unique_name(format!("{name}.add_bias")),
        &mut l.model,
        tract_core::ops::math::add(),
        &[product, b],
    )?[0];
    let mut out = l.activation(name, sum, act)?;
    let ys = l.shape(y)?;
    if ys[..] != [rows, ws[0]] {
        let from = tvec!(rows.to_dim(), ws[0].to_dim());
        out = l.wire(&format!("{name}.shape"), AxisOp::Reshape(0, from, dims(&ys)), &[out])?;
    }
    Ok(out)
}

pub(super) fn dims(shape: &[usize]) -> TVec<TDim> {
    shape.iter().map(|d| d.to_dim()).collect()
}

/// AVERAGE_POOL_2D (padding not counted) and MAX_POOL_2D.
pub(super) fn pool(
    l: &mut Loader,
    name: &str,
    code: fb::BuiltinOperator,
    op: &fb::Operator,
    x: i32,
) -> TractResult<OutletId> {
    let o = op
        .builtin_options_as_pool_2_doptions()
        .context("has no Pool2DOptions")?;
    let xs = input_shape(l, x)?;
    let spec = PoolSpec {
        data_format: DataFormat::NHWC,
        kernel_shape: tvec!(
            positive("filter height", o.filter_height())?,
            positive("filter width", o.filter_width())?
        ),
        padding: padding(o.padding())?,
        dilations: None,
        strides: Some(tvec!(
            positive("stride", o.stride_h())?,
            positive("stride", o.stride_w())?
        )),
        input_channels: xs[3],
        output_channels: xs[3],
    };
    let xw = l.float(x)?;
    let w = if code == fb::BuiltinOperator::MAX_POOL_2D {
        let op = MaxPool {
            pool_spec: spec,
            with_index_outputs: None,
        };
        l.wire(name, op, &[xw])?
    } else {
        let op = SumPool {
            pool_spec: spec,
            count_include_pad: false,
            normalize: true,
        };
        l.wire(name, op, &[xw])?
    };
    l.activation(name, w, o.fused_activation_function())
}
