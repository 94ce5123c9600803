//! `engine::tflite_load` on LiteRT files built here operator by operator:
//! a grouped CONV_2D computes what its groups say, QUANTIZE rounds half to
//! even and clamps to int8 and DEQUANTIZE reads the grid back, and an
//! operator the loader does not run is named with its index.

use flatbuffers::FlatBufferBuilder;
use litert::schema::litert as fb;
use tract_core::prelude::*;

/// A tensor of a test file.
struct T {
    shape: Vec<i32>,
    ty: fb::TensorType,
    data: Option<Vec<u8>>,
    quant: Option<(f32, i64)>,
}

fn f32s(v: &[f32]) -> Option<Vec<u8>> {
    Some(v.iter().flat_map(|x| x.to_le_bytes()).collect())
}

/// A one-subgraph file: `ops` as (operator, inputs, outputs), a CONV_2D
/// with stride 1 and VALID padding.
fn file(tensors: &[T], ops: &[(fb::BuiltinOperator, Vec<i32>, Vec<i32>)], inputs: &[i32], outputs: &[i32]) -> Vec<u8> {
    let mut b = FlatBufferBuilder::new();
    let mut buffers = vec![fb::Buffer::create(&mut b, &fb::BufferArgs::default())];
    let mut ts = Vec::new();
    for (k, t) in tensors.iter().enumerate() {
        let buffer = match &t.data {
            Some(d) => {
                let data = b.create_vector(d);
                buffers.push(fb::Buffer::create(&mut b, &fb::BufferArgs { data: Some(data) }));
                buffers.len() as u32 - 1
            }
            None => 0,
        };
        let quantization = t.quant.map(|(s, z)| {
            let (scale, zero_point) = (b.create_vector(&[s]), b.create_vector(&[z]));
            let args = fb::QuantizationParametersArgs {
                scale: Some(scale),
                zero_point: Some(zero_point),
                ..Default::default()
            };
            fb::QuantizationParameters::create(&mut b, &args)
        });
        let (shape, name) = (b.create_vector(&t.shape), b.create_string(&format!("t{k}")));
        let args = fb::TensorArgs {
            shape: Some(shape),
            type_: t.ty,
            buffer,
            name: Some(name),
            quantization,
        };
        ts.push(fb::Tensor::create(&mut b, &args));
    }
    let mut codes = Vec::new();
    let mut operators = Vec::new();
    for (k, (code, ins, outs)) in ops.iter().enumerate() {
        let args = fb::OperatorCodeArgs {
            builtin_code: *code,
            deprecated_builtin_code: code.0.min(127) as i8,
            ..Default::default()
        };
        codes.push(fb::OperatorCode::create(&mut b, &args));
        let (options_type, options) = if *code == fb::BuiltinOperator::CONV_2D {
            let args = fb::Conv2DOptionsArgs {
                padding: fb::Padding::VALID,
                stride_w: 1,
                stride_h: 1,
                ..Default::default()
            };
            let o = fb::Conv2DOptions::create(&mut b, &args);
            (fb::BuiltinOptions::Conv2DOptions, Some(o.as_union_value()))
        } else {
            (fb::BuiltinOptions::NONE, None)
        };
        let (inputs, outputs) = (b.create_vector(ins), b.create_vector(outs));
        let args = fb::OperatorArgs {
            opcode_index: k as u32,
            inputs: Some(inputs),
            outputs: Some(outputs),
            builtin_options_type: options_type,
            builtin_options: options,
        };
        operators.push(fb::Operator::create(&mut b, &args));
    }
    let (tensors, operators) = (b.create_vector(&ts), b.create_vector(&operators));
    let (inputs, outputs) = (b.create_vector(inputs), b.create_vector(outputs));
    let args = fb::SubGraphArgs {
        tensors: Some(tensors),
        inputs: Some(inputs),
        outputs: Some(outputs),
        operators: Some(operators),
        name: None,
    };
    let sub = fb::SubGraph::create(&mut b, &args);
    let (subgraphs, codes, buffers) = (
        b.create_vector(&[sub]),
        b.create_vector(&codes),
        b.create_vector(&buffers),
    );
    let args = fb::ModelArgs {
        version: 3,
        operator_codes: Some(codes),
        subgraphs: Some(subgraphs),
        buffers: Some(buffers),
        ..Default::default()
    };
    let m = fb::Model::create(&mut b, &args);
    fb::finish_model_buffer(&mut b, m);
    b.finished_data().to_vec()
}

fn run(bytes: &[u8], x: Tensor) -> Vec<f32> {
    let model = engine::tflite_load::typed_model(bytes).expect("the file loads");
    let plan = model.into_optimized().unwrap().into_runnable().unwrap();
    let y = plan.run(tvec!(x.into_tvalue())).unwrap();
    y[0].to_plain_array_view::<f32>().unwrap().iter().copied().collect()
}

fn float(shape: &[i32], data: Option<Vec<u8>>) -> T {
    T {
        shape: shape.to_vec(),
        ty: fb::TensorType::FLOAT32,
        data,
        quant: None,
    }
}

#[test]
fn a_grouped_convolution_reads_each_group_of_input_channels() {
    // 4 input channels in 2 groups of 2; 4 filters, 2 per group, 1x1.
    let w: Vec<f32> = (0..8).map(|k| k as f32 - 3.5).collect();
    let bias = [0.25, -0.5, 1.0, 2.0];
    let tensors = [
        float(&[1, 2, 2, 4], None),
        float(&[4, 1, 1, 2], f32s(&w)),
        float(&[4], f32s(&bias)),
        float(&[1, 2, 2, 4], None),
    ];
    let bytes = file(
        &tensors,
        &[(fb::BuiltinOperator::CONV_2D, vec![0, 1, 2], vec![3])],
        &[0],
        &[3],
    );
    let x: Vec<f32> = (0..16).map(|k| (k as f32 * 0.37).sin()).collect();
    let got = run(&bytes, Tensor::from_shape(&[1, 2, 2, 4], &x).unwrap());
    for p in 0..4 {
        for o in 0..4 {
            let g = o / 2;
            let want = bias[o] + (0..2).map(|i| x[p * 4 + g * 2 + i] * w[o * 2 + i]).sum::<f32>();
            let d = (got[p * 4 + o] - want).abs();
            assert!(d < 1e-5, "pixel {p} channel {o}: {} vs {want}", got[p * 4 + o]);
        }
    }
}

#[test]
fn quantize_rounds_half_to_even_and_clamps_and_dequantize_reads_the_grid() {
    let tensors = [
        float(&[4], None),
        T {
            shape: vec![4],
            ty: fb::TensorType::INT8,
            data: None,
            quant: Some((0.5, 3)),
        },
        float(&[4], None),
    ];
    let ops = [
        (fb::BuiltinOperator::QUANTIZE, vec![0], vec![1]),
        (fb::BuiltinOperator::DEQUANTIZE, vec![1], vec![2]),
    ];
    let bytes = file(&tensors, &ops, &[0], &[2]);
    let got = run(&bytes, tensor1(&[0.25f32, 0.75, 100.0, -100.0]));
    assert_eq!(got, [0.5, 0.5, 62.0, -65.5]);
}

#[test]
fn an_operator_the_loader_does_not_run_is_named_with_its_index() {
    let tensors = [float(&[4], None), float(&[4], None)];
    let bytes = file(&tensors, &[(fb::BuiltinOperator::SPLIT, vec![0], vec![1])], &[0], &[1]);
    let e = engine::tflite_load::typed_model(&bytes).expect_err("SPLIT is refused");
    assert_eq!(e.to_string(), "operator 0 is SPLIT, which stretch-run does not run");
    let e = engine::tflite_load::typed_model(b"ONNX").expect_err("not a LiteRT file");
    assert!(e.to_string().starts_with("not a LiteRT model"), "{e}");
}
