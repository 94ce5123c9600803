//! Bad ONNX inputs make the importer return an error, never panic, and the
//! error's message is one line naming the file, node, value or tensor at fault.

use bytes::Bytes;
use graph_ir::onnx::{ImportError, ImportOptions, export_bytes, import_bytes, import_file};
use graph_ir::ops::{Conv, Unary, UnaryOp};
use graph_ir::{Fact, Graph, Op, Tensor};
use onnx_ir::{AttributeProto, AttributeType, Message, ModelProto, NodeProto, TensorProto};
use std::path::PathBuf;

/// `x [1,3,8,8] -> conv (weight `w` [4,3,3,3]) -> relu -> y`, serialized.
fn tiny_model() -> Vec<u8> {
    let mut g = Graph::new("tiny");
    let x = g.add_input("x", Fact::f32([1, 3, 8, 8])).unwrap();
    let w = g.add_const("w", Tensor::from_f32([4, 3, 3, 3], &[0.5; 108])).unwrap();
    let conv = Conv {
        pads: [1; 4],
        ..Conv::default()
    };
    let conv = g.add_node("conv", Op::Conv(conv), &[x, w]).unwrap();
    let relu = g
        .add_node("relu", Op::Unary(Unary { op: UnaryOp::Relu }), &[conv.out(0)])
        .unwrap();
    g.set_outputs(vec![("y".into(), relu.out(0))]).unwrap();
    export_bytes(&g).unwrap()
}

/// The tiny model after `edit`, serialized again.
fn edited(edit: impl FnOnce(&mut ModelProto)) -> Bytes {
    let mut model = ModelProto::parse_from_bytes(&tiny_model()).unwrap();
    edit(&mut model);
    Bytes::from(model.write_to_bytes().unwrap())
}

fn node<'m>(model: &'m mut ModelProto, op_type: &str) -> &'m mut NodeProto {
    let graph = model.graph.as_mut().unwrap();
    graph.node.iter_mut().find(|n| n.op_type == op_type).unwrap()
}

/// Imports `bytes` labelled `model.onnx`, expecting an error.
fn import_err(bytes: Bytes) -> ImportError {
    import_bytes(bytes, "model.onnx", &ImportOptions::default()).expect_err("import should fail")
}

/// The error's message, checked to be a single line.
fn one_line(e: &ImportError) -> String {
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "multi-line message: {msg:?}");
    msg
}

/// A fresh directory under the system temp dir for this test.
fn scratch_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stretch-import-errors-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn tiny_model_imports() {
    let g = import_bytes(Bytes::from(tiny_model()), "tiny.onnx", &ImportOptions::default()).unwrap();
    let (name, y) = &g.outputs()[0];
    assert_eq!(name, "y");
    assert_eq!(g.fact(*y), Some(&Fact::f32([1, 4, 8, 8])));
    assert!(g.find("conv").is_some() && g.find("relu").is_some());
}

#[test]
fn missing_file_names_the_path() {
    let dir = scratch_dir("missing");
    let path = dir.join("no-such-model.onnx");
    let e = import_file(&path, &ImportOptions::default()).expect_err("no file");
    let msg = one_line(&e);
    assert!(matches!(e, ImportError::File(_)), "{e:?}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("cannot read"), "{msg}");
    let mut chain = msg.clone();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        chain += &format!(": {c}");
        cause = c.source();
    }
    assert_eq!(
        chain.matches("No such file").count(),
        1,
        "said once, as anyhow prints it: {chain}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn text_file_is_not_onnx() {
    let dir = scratch_dir("text");
    let path = dir.join("notes.onnx");
    std::fs::write(&path, "these are notes, not a neural network\n").unwrap();
    let e = import_file(&path, &ImportOptions::default()).expect_err("text is not ONNX");
    let msg = one_line(&e);
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("not a valid ONNX model"), "{msg}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn random_bytes_are_not_onnx() {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let noise: Vec<u8> = (0..4096)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let msg = one_line(&import_err(Bytes::from(noise)));
    assert!(msg.starts_with("model.onnx: not a valid ONNX model"), "{msg}");
}

#[test]
fn truncated_model_is_not_onnx() {
    let bytes = tiny_model();
    let e = import_err(Bytes::copy_from_slice(&bytes[..bytes.len() / 2]));
    let msg = one_line(&e);
    assert!(matches!(e, ImportError::NotOnnx { .. }), "{e:?}");
    assert!(msg.starts_with("model.onnx: not a valid ONNX model"), "{msg}");
    assert!(msg.contains("truncated"), "{msg}");
}

#[test]
fn unsupported_operator_names_op_node_and_opset() {
    let e = import_err(edited(|m| node(m, "Relu").op_type = "LSTM".into()));
    let msg = one_line(&e);
    assert!(matches!(e, ImportError::Unsupported { .. }), "{e:?}");
    for part in ["`LSTM`", "`relu`", "opset 17"] {
        assert!(msg.contains(part), "{part} missing from: {msg}");
    }
}

#[test]
fn cycle_names_a_node_in_it() {
    let e = import_err(edited(|m| {
        let relu_out = node(m, "Relu").output[0].clone();
        node(m, "Conv").input[0] = relu_out;
    }));
    let msg = one_line(&e);
    assert!(matches!(e, ImportError::Cycle { .. }), "{e:?}");
    assert!(msg.contains("cycle"), "{msg}");
    assert!(msg.contains("`conv`") || msg.contains("`relu`"), "{msg}");
}

#[test]
fn dangling_input_names_node_and_input() {
    let e = import_err(edited(|m| node(m, "Relu").input[0] = "nowhere".into()));
    let msg = one_line(&e);
    assert!(matches!(e, ImportError::DanglingInput { .. }), "{e:?}");
    for part in ["`relu`", "`nowhere`", "not produced"] {
        assert!(msg.contains(part), "{part} missing from: {msg}");
    }
}

#[test]
fn weight_length_mismatch_names_tensor_and_byte_counts() {
    let e = import_err(edited(|m| {
        let graph = m.graph.as_mut().unwrap();
        let w = graph.initializer.iter_mut().find(|t| t.name == "w").unwrap();
        w.dims = vec![4, 3, 3, 4];
    }));
    let msg = one_line(&e);
    assert!(
        matches!(
            e,
            ImportError::WeightLength {
                expected: 576,
                actual: 432,
                ..
            }
        ),
        "{e:?}"
    );
    for part in ["`w`", "432 bytes", "576"] {
        assert!(msg.contains(part), "{part} missing from: {msg}");
    }
}

#[test]
fn overflowing_weight_dims_name_the_tensor() {
    let e = import_err(edited(|m| {
        let graph = m.graph.as_mut().unwrap();
        let w = graph.initializer.iter_mut().find(|t| t.name == "w").unwrap();
        w.dims = vec![1 << 40, 1 << 40, 3, 3];
    }));
    let msg = one_line(&e);
    assert!(matches!(e, ImportError::BadTensor { .. }), "{e:?}");
    assert!(
        msg.contains("`w`") && msg.contains("more bytes than can be addressed"),
        "{msg}"
    );
}

/// An int64 initializer.
fn ints(name: &str, dims: &[i64], values: &[i64]) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.data_type = 7;
    t.dims = dims.to_vec();
    t.int64_data = values.to_vec();
    t
}

fn onnx_node(op_type: &str, inputs: &[&str], output: &str, attrs: Vec<AttributeProto>) -> NodeProto {
    let mut n = NodeProto::new();
    n.op_type = op_type.into();
    n.name = op_type.to_lowercase();
    n.input = inputs.iter().map(|s| s.to_string()).collect();
    n.output = vec![output.into()];
    n.attribute = attrs;
    n
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INT.into();
    a.i = v;
    a
}

fn string_attr(name: &str, v: &str) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::STRING.into();
    a.s = v.as_bytes().to_vec().into();
    a
}

/// The tiny model's input `x` and output `y` around `nodes` and `initializers`.
fn model_of(nodes: Vec<NodeProto>, initializers: Vec<TensorProto>) -> Bytes {
    edited(|m| {
        let graph = m.graph.as_mut().unwrap();
        graph.node = nodes;
        graph.initializer = initializers;
    })
}

/// `y = Reshape(x, t)` where `op` computes `t` from constant inputs `a`, `b`.
fn fold_into_reshape(op: NodeProto, initializers: Vec<TensorProto>) -> Bytes {
    model_of(vec![op, onnx_node("Reshape", &["x", "t"], "y", vec![])], initializers)
}

/// Malformed constant subgraphs and shape operands fail with the node named, never panic.
#[test]
fn malformed_operands_are_errors_naming_the_node() {
    let squeeze = onnx_node("Squeeze", &["a", "b"], "t", vec![]);
    let unsqueeze = onnx_node("Unsqueeze", &["a", "b"], "t", vec![]);
    let concat = onnx_node("Concat", &["a", "b"], "t", vec![int_attr("axis", 0)]);
    let gather = onnx_node("Gather", &["a", "b"], "t", vec![]);
    let mul = onnx_node("Mul", &["a", "b"], "t", vec![]);
    let mut empty_value = AttributeProto::new();
    empty_value.name = "value".into();
    empty_value.type_ = AttributeType::TENSOR.into();
    empty_value.t = Some(ints("v", &[0], &[])).into();
    let constant_of_shape = onnx_node("ConstantOfShape", &["a"], "t", vec![empty_value]);
    let pad = onnx_node("Pad", &["x", "a", "", "b"], "y", vec![]);
    let split = onnx_node(
        "Split",
        &["x"],
        "y",
        vec![int_attr("axis", 1), int_attr("num_outputs", -1)],
    );
    let same_conv = onnx_node("Conv", &["a", "w"], "y", vec![string_attr("auto_pad", "SAME_UPPER")]);
    let mut empty_image = TensorProto::new();
    empty_image.name = "a".into();
    empty_image.data_type = 1;
    empty_image.dims = vec![1, 3, 0, 0];
    let mut weight = TensorProto::new();
    weight.name = "w".into();
    weight.data_type = 1;
    weight.dims = vec![4, 3, 3, 3];
    weight.float_data = vec![0.5; 108];
    let wide = (0..1 << 16).map(|_| 1).collect::<Vec<_>>();
    let cases = [
        (
            "squeeze",
            fold_into_reshape(
                squeeze,
                vec![ints("a", &[2, 2], &[1, 48, 1, 48]), ints("b", &[1], &[0])],
            ),
            "cannot squeeze axis 0 of size 2",
        ),
        (
            "unsqueeze",
            fold_into_reshape(unsqueeze, vec![ints("a", &[], &[5]), ints("b", &[2], &[1, 1])]),
            "name an axis twice",
        ),
        (
            "concat",
            fold_into_reshape(concat, vec![ints("a", &[2], &[1, 192]), ints("b", &[2, 2], &[1; 4])]),
            "does not concatenate",
        ),
        (
            "gather",
            fold_into_reshape(gather, vec![ints("a", &[], &[3]), ints("b", &[], &[0])]),
            "rank 1 or more",
        ),
        (
            "mul",
            fold_into_reshape(
                mul,
                vec![ints("a", &[1 << 16, 1], &wide), ints("b", &[1, 1 << 16], &wide)],
            ),
            "too large to fold",
        ),
        (
            "constantofshape",
            fold_into_reshape(constant_of_shape, vec![ints("a", &[1], &[2])]),
            "exactly one element",
        ),
        (
            "pad",
            model_of(vec![pad], vec![ints("a", &[1], &[1]), ints("b", &[2], &[2, 3])]),
            "2 values per axis",
        ),
        ("split", model_of(vec![split], vec![]), "num_outputs"),
        (
            "conv",
            model_of(vec![same_conv], vec![empty_image, weight]),
            "cannot hold a window",
        ),
    ];
    for (node, bytes, problem) in cases {
        let e = import_err(bytes);
        let msg = one_line(&e);
        assert!(msg.contains(&format!("`{node}`")), "{node}: {msg}");
        assert!(msg.contains(problem), "{node}: {msg}");
    }
}

/// Squeeze and Unsqueeze of a computed value become a Reshape to the shape
/// they give; squeezing an axis whose size is not 1 names the node and axis.
#[test]
fn squeeze_and_unsqueeze_of_a_computed_value() {
    let ok = model_of(
        vec![
            onnx_node("Unsqueeze", &["x", "u"], "t", vec![]),
            onnx_node("Squeeze", &["t", "s"], "y", vec![]),
        ],
        vec![ints("u", &[2], &[0, -1]), ints("s", &[1], &[0])],
    );
    let g = import_bytes(ok, "model.onnx", &ImportOptions::default()).unwrap();
    let (_, y) = &g.outputs()[0];
    assert_eq!(g.fact(*y).unwrap().shape, [1, 3, 8, 8, 1]);
    assert!(g.node_ids().iter().all(|id| !matches!(g.node(*id).op, Op::Unary(_))));
    let bad = model_of(
        vec![onnx_node("Squeeze", &["x", "s"], "y", vec![])],
        vec![ints("s", &[1], &[1])],
    );
    let e = one_line(&import_err(bad));
    assert!(e.contains("squeeze") && e.contains("cannot squeeze axis 1"), "{e}");
}

/// A real model's weight built at import time folds: VGG-19's 25088x4096
/// fully connected weight from a `ConstantOfShape` (102,760,448 elements,
/// 392 MiB), as in the ONNX package's `light_vgg19.onnx`; ten times more
/// is refused before anything is allocated.
#[test]
fn a_vgg_sized_weight_folds_and_a_larger_one_is_refused() {
    let mut value = AttributeProto::new();
    value.name = "value".into();
    value.type_ = AttributeType::TENSOR.into();
    let mut half = TensorProto::new();
    half.name = "v".into();
    half.data_type = 1;
    half.dims = vec![1];
    half.float_data = vec![0.5];
    value.t = Some(half).into();
    let model = |rows: i64| {
        let fill = onnx_node("ConstantOfShape", &["s"], "w", vec![value.clone()]);
        let flat = onnx_node("Flatten", &["x"], "f", vec![int_attr("axis", 1)]);
        let pad = onnx_node("Pad", &["f", "p"], "g", vec![]);
        let matmul = onnx_node("MatMul", &["g", "w"], "y", vec![]);
        model_of(
            vec![fill, flat, pad, matmul],
            vec![ints("s", &[2], &[rows, 4096]), ints("p", &[4], &[0, 0, 0, rows - 192])],
        )
    };
    let g = import_bytes(model(25088), "model.onnx", &ImportOptions::default()).unwrap();
    let (_, y) = &g.outputs()[0];
    assert_eq!(g.fact(*y).unwrap().shape, [1, 4096]);
    let e = one_line(&import_err(model(250880)));
    assert!(e.contains("ConstantOfShape") && e.contains("too large to fold"), "{e}");
}

#[test]
fn two_writers_of_one_tensor_are_refused() {
    let e = import_err(edited(|m| {
        let y = node(m, "Relu").output[0].clone();
        m.graph
            .as_mut()
            .unwrap()
            .node
            .push(onnx_node("Identity", &["x"], &y, vec![]));
    }));
    let msg = one_line(&e);
    assert!(
        msg.contains("node `identity` (Identity): writes tensor `y`, and node `relu` writes it too"),
        "{msg}"
    );
    let e = import_err(edited(|m| {
        m.graph
            .as_mut()
            .unwrap()
            .node
            .push(onnx_node("Identity", &["x"], "w", vec![]));
    }));
    assert!(
        one_line(&e).contains("writes tensor `w`, and it is a graph input or initializer"),
        "{e}"
    );
}

#[test]
fn an_opset_newer_than_the_importer_is_refused() {
    let e = import_err(edited(|m| {
        for o in m
            .opset_import
            .iter_mut()
            .filter(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        {
            o.version = 30;
        }
    }));
    assert!(
        one_line(&e).contains("opset 30 is newer than this importer knows"),
        "{e}"
    );
}

/// Opset imports ONNX forbids, and an IR version newer than the importer
/// reads, are refused with the value at fault named.
#[test]
fn invalid_opset_imports_and_ir_versions_are_refused() {
    let set_default = |version: i64| {
        edited(move |m| {
            for o in m.opset_import.iter_mut().filter(|o| o.domain.is_empty()) {
                o.version = version;
            }
        })
    };
    for version in [0, -3] {
        let msg = one_line(&import_err(set_default(version)));
        assert!(
            msg.contains(&format!("domain `ai.onnx`: version {version} is not a version")),
            "{msg}"
        );
    }
    let twice = edited(|m| {
        let mut again = m.opset_import[0].clone();
        again.domain = "ai.onnx".into();
        again.version = 30;
        m.opset_import.push(again);
    });
    let msg = one_line(&import_err(twice));
    assert!(
        msg.contains("domain `ai.onnx`: version 30 is declared beside version 17"),
        "{msg}"
    );
    let msg = one_line(&import_err(edited(|m| m.ir_version = 99)));
    assert!(msg.contains("IR version 99 is newer than this importer reads"), "{msg}");
}

#[test]
fn training_mode_dropout_is_refused_and_inference_dropout_is_its_input() {
    let with_dropout = |training: Option<i32>| {
        edited(|m| {
            let g = m.graph.as_mut().unwrap();
            let mut inputs = vec!["x", ""];
            if let Some(t) = training {
                let mut flag = TensorProto::new();
                flag.name = "train".into();
                flag.data_type = 9;
                flag.int32_data = vec![t];
                g.initializer.push(flag);
                inputs.push("train");
            }
            g.node.insert(0, onnx_node("Dropout", &inputs, "d", vec![]));
            for n in g.node.iter_mut().filter(|n| n.op_type == "Conv") {
                n.input[0] = "d".into();
            }
        })
    };
    let e = import_err(with_dropout(Some(1)));
    assert!(
        one_line(&e).contains("node `dropout` (Dropout): training-mode Dropout"),
        "{e}"
    );
    for training in [None, Some(0)] {
        let g = import_bytes(with_dropout(training), "model.onnx", &ImportOptions::default()).unwrap();
        assert!(g.find("conv").is_some(), "{training:?}");
    }
}

#[test]
fn a_graph_output_from_an_unsupported_second_output_names_its_node() {
    let e = import_err(edited(|m| {
        let g = m.graph.as_mut().unwrap();
        let mut dropout = onnx_node("Dropout", &["x"], "d", vec![]);
        dropout.output.push("mask".into());
        g.node.push(dropout);
        let mut out = g.output[0].clone();
        out.name = "mask".into();
        g.output.push(out);
    }));
    let msg = one_line(&e);
    assert!(
        msg.contains(
            "node `dropout` (Dropout): graph output `mask` is its output 1, which the importer does not produce"
        ),
        "{msg}"
    );
    let e = import_err(edited(|m| {
        let g = m.graph.as_mut().unwrap();
        let mut dropout = onnx_node("Dropout", &["x"], "d", vec![]);
        dropout.name.clear();
        dropout.output.push("mask".into());
        g.node.push(dropout);
        let mut out = g.output[0].clone();
        out.name = "mask".into();
        g.output.push(out);
    }));
    let msg = one_line(&e);
    assert!(msg.contains("node `Dropout_2` (Dropout): graph output `mask`"), "{msg}");
}

#[test]
fn a_declared_dimension_that_is_not_a_size_is_named_as_such() {
    for (dim, value) in [(2, 0), (0, -5)] {
        let e = import_err(edited(|m| {
            let input = &mut m.graph.as_mut().unwrap().input[0];
            let shape = input.type_.as_mut().unwrap().mut_tensor_type().shape.as_mut().unwrap();
            shape.dim[dim].set_dim_value(value);
        }));
        let msg = one_line(&e);
        assert!(
            msg.contains(&format!("dimension {dim} is declared {value}, which is not a size")),
            "{msg}"
        );
    }
}

#[test]
fn a_name_holding_a_newline_is_refused_and_shown_escaped() {
    let err = import_err(edited(|m| node(m, "Relu").name = "re\nlu".into()));
    let msg = one_line(&err);
    assert!(msg.contains(r#"node name "re\nlu" holds a control character"#), "{msg}");
    let err = import_err(edited(|m| {
        let g = m.graph.as_mut().unwrap();
        g.node.iter_mut().for_each(|n| {
            for v in n.input.iter_mut().chain(n.output.iter_mut()) {
                if v == "conv" {
                    *v = "co\tnv".into();
                }
            }
        });
    }));
    assert!(one_line(&err).contains(r#""co\tnv""#), "{err}");
}
