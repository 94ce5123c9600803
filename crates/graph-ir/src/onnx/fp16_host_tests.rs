use super::*;
use onnx_ir::{AttributeProto, AttributeType, ValueInfoProto};

fn value(name: &str, elem: i32) -> ValueInfoProto {
    let mut t = onnx_ir::TypeProto::new();
    t.mut_tensor_type().elem_type = elem;
    let mut v = ValueInfoProto::new();
    v.name = name.into();
    v.type_ = Some(t).into();
    v
}

fn node(op: &str, inputs: &[&str], output: &str, to: Option<i32>) -> NodeProto {
    let mut n = NodeProto::new();
    n.op_type = op.into();
    n.name = output.into();
    n.input = inputs.iter().map(|s| s.to_string()).collect();
    n.output = vec![output.into()];
    if let Some(to) = to {
        let mut a = AttributeProto::new();
        a.name = "to".into();
        a.type_ = AttributeType::INT.into();
        a.i = i64::from(to);
        n.attribute.push(a);
    }
    n
}

/// `x (f32) → Cast(f16) → Mul(w: f16 1.5) → Relu → Cast(f32) → y`, and a
/// second output `h` of the Relu in float16.
fn model() -> Vec<u8> {
    let mut g = GraphProto::new();
    let mut w = TensorProto::new();
    w.name = "w".into();
    w.data_type = FLOAT16;
    w.raw_data = half::f16::from_f32(1.5).to_bits().to_le_bytes().to_vec().into();
    g.initializer.push(w);
    g.node = vec![
        node("Cast", &["x"], "xh", Some(FLOAT16)),
        node("Mul", &["xh", "w"], "m", None),
        node("Relu", &["m"], "h", None),
        node("Cast", &["h"], "y", Some(FLOAT)),
    ];
    g.input.push(value("x", FLOAT));
    g.output.push(value("y", FLOAT));
    g.output.push(value("h", FLOAT16));
    let mut m = ModelProto::new();
    m.graph = Some(g).into();
    m.write_to_bytes().unwrap()
}

#[test]
fn arithmetic_is_float32_rounded_to_float16_after_each_operator() {
    let out = ModelProto::parse_from_bytes(&fp16_rounded(&model()).expect("rewritten")).unwrap();
    let g = out.graph.as_ref().unwrap();
    assert!(
        g.initializer.iter().all(|t| t.data_type == FLOAT),
        "float16 constants widened"
    );
    let w: Vec<u8> = g.initializer[0].raw_data.to_vec();
    assert_eq!(w, 1.5f32.to_le_bytes(), "exactly");
    let ops: Vec<(&str, &str)> = g
        .node
        .iter()
        .map(|n| (n.op_type.as_str(), n.output[0].as_str()))
        .collect();
    assert_eq!(
        ops,
        [
            ("Cast", "xh.f16"),
            ("Cast", "xh"),
            ("Mul", "m.unrounded"),
            ("Cast", "m.f16"),
            ("Cast", "m"),
            ("Relu", "h.f32"),
            ("Cast", "y"),
            ("Cast", "h"),
        ],
        "the Mul is rounded, the Relu (exact) is not, the float16 output keeps its type"
    );
    let to = |i: usize| g.node[i].attribute[0].i;
    assert_eq!((to(0), to(1), to(3), to(4), to(7)), (10, 1, 10, 1, 10));
    assert_eq!(g.node[6].input[0], "h.f32");
}

#[test]
fn a_float32_model_is_left_alone() {
    let mut g = GraphProto::new();
    g.node = vec![node("Relu", &["x"], "y", None)];
    g.input.push(value("x", FLOAT));
    g.output.push(value("y", FLOAT));
    let mut m = ModelProto::new();
    m.graph = Some(g).into();
    assert!(fp16_rounded(&m.write_to_bytes().unwrap()).is_none());
}
