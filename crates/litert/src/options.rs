//! Builtin options tables: an operator's [`Options`] written as the union
//! member LiteRT's schema gives its operator.

use crate::model::{EmptyOptions, Options, Window};
use crate::schema::litert as fb;
use flatbuffers::{FlatBufferBuilder, UnionWIPOffset, WIPOffset};

fn padding(same: bool) -> fb::Padding {
    if same { fb::Padding::SAME } else { fb::Padding::VALID }
}

/// The union's type tag and table for `o` (`NONE` and no table for
/// operators without options).
pub fn write<'a>(
    b: &mut FlatBufferBuilder<'a>,
    o: &Options,
) -> (fb::BuiltinOptions, Option<WIPOffset<UnionWIPOffset>>) {
    use fb::BuiltinOptions as U;
    let (kind, table) = match o {
        Options::None => return (U::NONE, None),
        Options::Window(w) => window(b, w),
        Options::FullyConnected { act } => {
            let args = fb::FullyConnectedOptionsArgs {
                fused_activation_function: act_fb(*act),
                keep_num_dims: false,
            };
            let t = fb::FullyConnectedOptions::create(b, &args);
            (U::FullyConnectedOptions, t.as_union_value())
        }
        Options::Softmax => {
            let t = fb::SoftmaxOptions::create(b, &fb::SoftmaxOptionsArgs { beta: 1.0 });
            (U::SoftmaxOptions, t.as_union_value())
        }
        Options::Concat { axis, act } => {
            let args = fb::ConcatenationOptionsArgs {
                axis: *axis as i32,
                fused_activation_function: act_fb(*act),
            };
            let t = fb::ConcatenationOptions::create(b, &args);
            (U::ConcatenationOptions, t.as_union_value())
        }
        Options::Add(act) => {
            let args = fb::AddOptionsArgs {
                fused_activation_function: act_fb(*act),
            };
            (U::AddOptions, fb::AddOptions::create(b, &args).as_union_value())
        }
        Options::Mul(act) => {
            let args = fb::MulOptionsArgs {
                fused_activation_function: act_fb(*act),
            };
            (U::MulOptions, fb::MulOptions::create(b, &args).as_union_value())
        }
        Options::Sub(act) => {
            let args = fb::SubOptionsArgs {
                fused_activation_function: act_fb(*act),
            };
            (U::SubOptions, fb::SubOptions::create(b, &args).as_union_value())
        }
        Options::Div(act) => {
            let args = fb::DivOptionsArgs {
                fused_activation_function: act_fb(*act),
            };
            (U::DivOptions, fb::DivOptions::create(b, &args).as_union_value())
        }
        Options::Reshape(shape) => {
            let shape: Vec<i32> = shape.iter().map(|d| *d as i32).collect();
            let new_shape = Some(b.create_vector(&shape));
            let t = fb::ReshapeOptions::create(b, &fb::ReshapeOptionsArgs { new_shape });
            (U::ReshapeOptions, t.as_union_value())
        }
        Options::Reducer { keep_dims } => {
            let t = fb::ReducerOptions::create(b, &fb::ReducerOptionsArgs { keep_dims: *keep_dims });
            (U::ReducerOptions, t.as_union_value())
        }
        Options::LeakyRelu(alpha) => {
            let t = fb::LeakyReluOptions::create(b, &fb::LeakyReluOptionsArgs { alpha: *alpha });
            (U::LeakyReluOptions, t.as_union_value())
        }
        Options::ResizeBilinear {
            align_corners,
            half_pixel,
        } => {
            let args = fb::ResizeBilinearOptionsArgs {
                align_corners: *align_corners,
                half_pixel_centers: *half_pixel,
            };
            let t = fb::ResizeBilinearOptions::create(b, &args);
            (U::ResizeBilinearOptions, t.as_union_value())
        }
        Options::ResizeNearest {
            align_corners,
            half_pixel,
        } => {
            let args = fb::ResizeNearestNeighborOptionsArgs {
                align_corners: *align_corners,
                half_pixel_centers: *half_pixel,
            };
            let t = fb::ResizeNearestNeighborOptions::create(b, &args);
            (U::ResizeNearestNeighborOptions, t.as_union_value())
        }
        Options::Empty(e) => empty(b, *e),
    };
    (kind, Some(table))
}

/// The options of the window operators (convolutions and pools).
fn window<'a>(b: &mut FlatBufferBuilder<'a>, w: &Window) -> (fb::BuiltinOptions, WIPOffset<UnionWIPOffset>) {
    use fb::BuiltinOptions as U;
    match w {
        Window::Conv {
            same,
            stride,
            dilation,
            act,
        } => {
            let args = fb::Conv2DOptionsArgs {
                padding: padding(*same),
                stride_h: stride[0] as i32,
                stride_w: stride[1] as i32,
                dilation_h_factor: dilation[0] as i32,
                dilation_w_factor: dilation[1] as i32,
                fused_activation_function: act_fb(*act),
            };
            (U::Conv2DOptions, fb::Conv2DOptions::create(b, &args).as_union_value())
        }
        Window::Depthwise {
            same,
            stride,
            dilation,
            multiplier,
            act,
        } => {
            let args = fb::DepthwiseConv2DOptionsArgs {
                padding: padding(*same),
                stride_h: stride[0] as i32,
                stride_w: stride[1] as i32,
                depth_multiplier: *multiplier as i32,
                dilation_h_factor: dilation[0] as i32,
                dilation_w_factor: dilation[1] as i32,
                fused_activation_function: act_fb(*act),
            };
            let t = fb::DepthwiseConv2DOptions::create(b, &args);
            (U::DepthwiseConv2DOptions, t.as_union_value())
        }
        Window::Pool {
            same,
            stride,
            filter,
            act,
        } => {
            let args = fb::Pool2DOptionsArgs {
                padding: padding(*same),
                stride_h: stride[0] as i32,
                stride_w: stride[1] as i32,
                filter_height: filter[0] as i32,
                filter_width: filter[1] as i32,
                fused_activation_function: act_fb(*act),
            };
            (U::Pool2DOptions, fb::Pool2DOptions::create(b, &args).as_union_value())
        }
    }
}

fn empty<'a>(b: &mut FlatBufferBuilder<'a>, e: EmptyOptions) -> (fb::BuiltinOptions, WIPOffset<UnionWIPOffset>) {
    use fb::BuiltinOptions as U;
    match e {
        EmptyOptions::Pad => (
            U::PadOptions,
            fb::PadOptions::create(b, &Default::default()).as_union_value(),
        ),
        EmptyOptions::PadV2 => (
            U::PadV2Options,
            fb::PadV2Options::create(b, &Default::default()).as_union_value(),
        ),
        EmptyOptions::Transpose => (
            U::TransposeOptions,
            fb::TransposeOptions::create(b, &Default::default()).as_union_value(),
        ),
        EmptyOptions::Dequantize => (
            U::DequantizeOptions,
            fb::DequantizeOptions::create(b, &Default::default()).as_union_value(),
        ),
        EmptyOptions::Quantize => (
            U::QuantizeOptions,
            fb::QuantizeOptions::create(b, &Default::default()).as_union_value(),
        ),
        EmptyOptions::HardSwish => (
            U::HardSwishOptions,
            fb::HardSwishOptions::create(b, &Default::default()).as_union_value(),
        ),
        EmptyOptions::MaximumMinimum => (
            U::MaximumMinimumOptions,
            fb::MaximumMinimumOptions::create(b, &Default::default()).as_union_value(),
        ),
        EmptyOptions::Slice => (
            U::SliceOptions,
            fb::SliceOptions::create(b, &Default::default()).as_union_value(),
        ),
    }
}

fn act_fb(a: crate::model::Act) -> fb::ActivationFunctionType {
    a.fb()
}
