use super::*;
use crate::onnx::tensor_proto::tensor_from_proto;
use crate::tensor::DType;
use onnx_ir::AttributeProto;
use onnx_ir::TensorProto;

fn tensor(name: &str, dtype: DType, dims: &[i64], raw: Vec<u8>) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.data_type = dtype.onnx_code();
    t.dims = dims.to_vec();
    t.raw_data = raw.into();
    t
}

fn f32s(name: &str, values: &[f32]) -> TensorProto {
    let dims: &[i64] = if values.len() == 1 { &[] } else { &[values.len() as i64] };
    tensor(
        name,
        DType::F32,
        dims,
        values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    )
}

fn node(op: &str, inputs: &[&str], output: &str) -> NodeProto {
    let mut n = NodeProto::new();
    n.op_type = op.into();
    n.name = format!("{op}_{output}");
    n.input = inputs.iter().map(|s| s.to_string()).collect();
    n.output = vec![output.into()];
    n
}

/// Input channels per output channel of the convolutions of [`model`]:
/// `NARROW` (weights 5 and -2: sums far below 2²⁴) or `WIDE` (weights of
/// ±127 on 600 channels: 600 · 127 · 252 ≥ 2²⁴).
const NARROW: usize = 1;
const WIDE: usize = 600;

/// The node between the convolution of [`model`] and its quantization.
#[derive(Clone, Copy)]
enum Act {
    None,
    Relu,
    /// `Clip(min, max)`, both given as constants.
    Clip(f32, f32),
}

/// `x (uint8) → DQ → Conv(2 output channels, 1x1, DQ'd int8 weights and
/// int32 bias) → [Relu] → Q(scale 0.1, zero point y_zero) → y`, with one more reader
/// of the convolution's output when `shared`.
fn model(relu: bool, y_zero: u8, bias_scale: f32, shared: bool) -> Vec<u8> {
    let act = if relu { Act::Relu } else { Act::None };
    model_with(act, y_zero, bias_scale, shared, NARROW)
}

fn model_with(act: Act, y_zero: u8, bias_scale: f32, shared: bool, inputs: usize) -> Vec<u8> {
    let weights = if inputs == NARROW {
        vec![5, 0xfe]
    } else {
        [vec![127u8; inputs], vec![0x81; inputs]].concat()
    };
    let mut g = GraphProto::new();
    g.initializer = vec![
        f32s("sx", &[0.5]),
        tensor("zx", DType::U8, &[], vec![3]),
        tensor("wq", DType::I8, &[2, inputs as i64, 1, 1], weights),
        f32s("sw", &[0.25, 0.125]),
        tensor("zw", DType::I8, &[2], vec![0, 0]),
        tensor(
            "bq",
            DType::I32,
            &[2],
            [7i32, -2].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        f32s("sb", &[0.125, bias_scale]),
        tensor("zb", DType::I32, &[2], vec![0; 8]),
        f32s("sy", &[0.1]),
        tensor("zy", DType::U8, &[], vec![y_zero]),
    ];
    let mut w = node("DequantizeLinear", &["wq", "sw", "zw"], "w");
    w.attribute.push(int_attr("axis", 0));
    let mut conv = node("Conv", &["xd", "w", "b"], "c");
    conv.attribute.push(int_attr("group", 1));
    g.node = vec![
        node("DequantizeLinear", &["x", "sx", "zx"], "xd"),
        w,
        node("DequantizeLinear", &["bq", "sb", "zb"], "b"),
        conv,
    ];
    let quantized = match act {
        Act::None => "c",
        Act::Relu => {
            g.node.push(node("Relu", &["c"], "r"));
            "r"
        }
        Act::Clip(min, max) => {
            g.initializer.extend([f32s("min", &[min]), f32s("max", &[max])]);
            g.node.push(node("Clip", &["c", "min", "max"], "r"));
            "r"
        }
    };
    g.node.push(node("QuantizeLinear", &[quantized, "sy", "zy"], "y"));
    if shared {
        g.node.push(node("Neg", &["c"], "n"));
    }
    encode(g)
}

fn int_attr(name: &str, value: i64) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.i = value;
    a
}

fn encode(g: GraphProto) -> Vec<u8> {
    let mut m = ModelProto::new();
    m.ir_version = 8;
    m.graph = Some(g).into();
    m.write_to_bytes().expect("encode")
}

fn ops(bytes: &[u8]) -> Vec<String> {
    let m = ModelProto::parse_from_bytes(bytes).expect("decode");
    m.graph
        .as_ref()
        .expect("graph")
        .node
        .iter()
        .map(|n| n.op_type.clone())
        .collect()
}

#[test]
fn a_qdq_convolution_runs_on_float_kernels_where_no_sum_can_reach_2_24() {
    let (bytes, fused) = fuse_qdq(&model(false, 3, 0.0625, false)).expect("fused");
    assert_eq!(
        (fused.products, fused.float_products, fused.adds, fused.quantizations),
        (1, 1, 0, 0)
    );
    assert_eq!(fused.product_names, ["Conv_c"]);
    assert_eq!(
        ops(&bytes),
        ["DequantizeLinear", "Conv", "Cast", "Mul", "Cast", "QuantizeLinear"]
    );
    let m = ModelProto::parse_from_bytes(&bytes).expect("decode");
    let g = m.graph.as_ref().expect("graph");
    let constant = |name: &str| {
        let t = g.initializer.iter().find(|t| t.name == name).expect("constant");
        tensor_from_proto(t).expect("tensor").to_f64_vec().expect("values")
    };
    assert_eq!(g.node[0].input, ["x", "y.qconvf.one", "zx"]);
    assert_eq!(g.node[1].name, "Conv_c");
    assert_eq!(g.node[1].attribute.len(), 1);
    assert_eq!(constant("y.qconvf.w"), [5.0, -2.0]);
    assert_eq!(constant("y.qconvf.b"), [7.0, -2.0]);
    let multipliers = [0.5f32 * 0.25 / 0.1, 0.5f32 * 0.125 / 0.1].map(f64::from);
    assert_eq!(constant("y.qconvf.m"), multipliers);
    assert_eq!(g.node[5].input, ["y.qconvf.scaled", "y.qconvf.one", "zy"]);
    assert_eq!(g.node[5].output, ["y"]);
}

#[test]
fn a_qdq_convolution_whose_sums_could_reach_2_24_becomes_one_qlinearconv() {
    let (bytes, fused) = fuse_qdq(&model_with(Act::None, 3, 0.0625, false, WIDE)).expect("fused");
    assert_eq!((fused.products, fused.float_products), (1, 0));
    assert_eq!(ops(&bytes), ["QLinearConv"]);
    let m = ModelProto::parse_from_bytes(&bytes).expect("decode");
    let g = m.graph.as_ref().expect("graph");
    let q = &g.node[0];
    let (one, requant) = ("y.qconv.one", "y.qconv.requant");
    assert_eq!(q.input, ["x", one, "zx", "wq", requant, "zw", one, "zy", "bq"]);
    assert_eq!(q.name, "Conv_c");
    let constant = |name: &str| {
        let t = g.initializer.iter().find(|t| t.name == name).expect("constant");
        tensor_from_proto(t).expect("tensor").to_f32_vec().expect("f32")
    };
    assert_eq!(constant(one), [1.0]);
    assert_eq!(constant(requant), [0.5f32 * 0.25 / 0.1, 0.5f32 * 0.125 / 0.1]);
}

fn fused(bytes: &[u8]) -> (Vec<String>, Fused) {
    let (out, fused) = fuse_qdq(bytes).expect("rewritten");
    (ops(&out), fused)
}

#[test]
fn a_relu_folds_only_when_quantizing_clamps_as_it_does() {
    let (ops, f) = fused(&model(true, 0, 0.0625, false));
    assert_eq!((f.products, ops.contains(&"Relu".to_string())), (1, false));
    let (ops, f) = fused(&model(true, 3, 0.0625, false));
    assert_eq!((f.products, f.quantizations), (0, 1));
    assert!(ops.contains(&"Conv".to_string()) && ops.contains(&"Relu".to_string()));
}

/// onnxruntime removes a `Clip` before a `QuantizeLinear` (its
/// `ClipQuantFusion`) when every value the clip keeps out would be
/// quantized to the same integer anyway: the clip's range covers the
/// quantization's, from half a step above the lowest integer to half a
/// step below the highest (a ReLU6 before `Q(6/255, 0)`). The convolution
/// then runs as its integer kernel; so does the rewrite, which otherwise
/// leaves a float convolution on dequantized values whose sums round by
/// summation order (tract's AVX-512 kernels put a ReLU6 of MobileNetV2 a
/// step away from onnxruntime).
#[test]
fn a_clip_covering_the_quantized_range_folds_as_onnxruntime_removes_it() {
    // Q(0.1, zero point 0) keeps [0.05, 25.45] apart: a Clip to [0, 25.5]
    // changes no quantized value, to [0, 6] or [0.1, 25.5] it does.
    let (ops, f) = fused(&model_with(Act::Clip(0.0, 25.5), 0, 0.0625, false, NARROW));
    assert_eq!((f.products, f.float_products), (1, 1));
    assert!(!ops.contains(&"Clip".to_string()), "{ops:?}");
    let (ops, f) = fused(&model_with(Act::Clip(-1.0, f32::MAX), 0, 0.0625, false, WIDE));
    assert_eq!((f.products, ops), (1, vec!["QLinearConv".to_string()]));
    for (min, max) in [(0.0, 6.0), (0.1, 25.5)] {
        let (ops, f) = fused(&model_with(Act::Clip(min, max), 0, 0.0625, false, NARROW));
        assert_eq!((f.products, f.quantizations), (0, 1), "Clip({min}, {max})");
        assert!(ops.contains(&"Conv".to_string()) && ops.contains(&"Clip".to_string()));
    }
    // Zero point 3: the highest integer, 252 steps up, takes values from
    // 25.15.
    let (_, f) = fused(&model_with(Act::Clip(-1.0, 25.1), 3, 0.0625, false, NARROW));
    assert_eq!(f.products, 0);
    let (_, f) = fused(&model_with(Act::Clip(-1.0, 25.2), 3, 0.0625, false, NARROW));
    assert_eq!(f.products, 1);
}

#[test]
fn a_bias_at_another_scale_or_a_second_reader_keeps_the_float_convolution() {
    for m in [model(false, 3, 0.07, false), model(false, 3, 0.0625, true)] {
        let (ops, f) = fused(&m);
        assert_eq!((f.products, f.quantizations), (0, 1));
        assert!(ops.contains(&"Conv".to_string()), "{ops:?}");
    }
    assert!(fuse_qdq(b"not a model").is_none());
}

/// `DQ(a) + DQ(b or a constant) → Relu → Q(zero point 0) → y`.
fn add_model(constant_operand: bool) -> Vec<u8> {
    let mut g = GraphProto::new();
    g.initializer = vec![
        f32s("sa", &[0.5]),
        tensor("za", DType::U8, &[], vec![3]),
        f32s("sb", &[0.25]),
        tensor("zb", DType::U8, &[], vec![7]),
        f32s("sy", &[0.1]),
        tensor("zy", DType::U8, &[], vec![0]),
    ];
    if constant_operand {
        g.initializer.push(tensor("b", DType::U8, &[], vec![9]));
    }
    g.node = vec![
        node("DequantizeLinear", &["a", "sa", "za"], "ad"),
        node("DequantizeLinear", &["b", "sb", "zb"], "bd"),
        node("Add", &["ad", "bd"], "s"),
        node("Relu", &["s"], "r"),
        node("QuantizeLinear", &["r", "sy", "zy"], "y"),
    ];
    encode(g)
}

#[test]
fn an_addition_of_two_quantized_activations_is_computed_as_qlinearadd_computes_it() {
    let (ops, f) = fused(&add_model(false));
    assert_eq!((f.adds, f.quantizations), (1, 0));
    assert!(
        !ops.iter()
            .any(|o| o == "DequantizeLinear" || o == "Relu" || o == "QuantizeLinear"),
        "{ops:?}"
    );
    assert_eq!(ops.iter().filter(|o| *o == "Cast").count(), 6, "{ops:?}");
    assert_eq!(ops.last().map(String::as_str), Some("Cast"));
    let (ops, f) = fused(&add_model(true));
    assert_eq!((f.adds, f.quantizations), (0, 1));
    assert!(ops.contains(&"Add".to_string()));
}

/// `x → DQ → Gemm(DQ'd int8 weights [2, 3] per row, transB) → Q → y`.
fn gemm_model(trans_b: i64) -> Vec<u8> {
    let mut g = GraphProto::new();
    g.initializer = vec![
        f32s("sx", &[0.5]),
        tensor("zx", DType::U8, &[], vec![3]),
        tensor("wq", DType::I8, &[2, 3], vec![5, 0xfe, 1, 7, 0, 0xff]),
        f32s("sw", &[0.25, 0.125]),
        tensor("zw", DType::I8, &[2], vec![0, 0]),
        f32s("sy", &[0.1]),
        tensor("zy", DType::U8, &[], vec![9]),
    ];
    let mut w = node("DequantizeLinear", &["wq", "sw", "zw"], "w");
    w.attribute.push(int_attr("axis", 0));
    let mut gemm = node("Gemm", &["xd", "w"], "c");
    gemm.attribute.push(int_attr("transB", trans_b));
    g.node = vec![
        node("DequantizeLinear", &["x", "sx", "zx"], "xd"),
        w,
        gemm,
        node("QuantizeLinear", &["c", "sy", "zy"], "y"),
    ];
    encode(g)
}

#[test]
fn a_qdq_gemm_with_transposed_weights_runs_in_float_on_its_integer_values() {
    let (ops, f) = fused(&gemm_model(1));
    assert_eq!((f.products, f.float_products, f.quantizations), (1, 1, 0));
    assert_eq!(
        ops,
        ["DequantizeLinear", "Gemm", "Cast", "Mul", "Cast", "QuantizeLinear"]
    );
    let (ops, f) = fused(&gemm_model(0));
    assert_eq!((f.products, f.quantizations), (0, 1));
    assert!(
        ops.contains(&"Gemm".to_string()) && !ops.contains(&"Mul".to_string()),
        "{ops:?}"
    );
}
