//! Bad ONNX inputs make the importer return an error, never panic, and the
//! error's message is one line naming the file, node, value or tensor at fault.

use bytes::Bytes;
use graph_ir::onnx::{ImportError, ImportOptions, export_bytes, import_bytes, import_file};
use graph_ir::ops::{Conv, Unary, UnaryOp};
use graph_ir::{Fact, Graph, Op, Tensor};
use onnx_ir::{Message, ModelProto, NodeProto};
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
    let path = scratch_dir("missing").join("no-such-model.onnx");
    let e = import_file(&path, &ImportOptions::default()).expect_err("no file");
    let msg = one_line(&e);
    assert!(matches!(e, ImportError::Io { .. }), "{e:?}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("cannot read file"), "{msg}");
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

fn probe(b: Bytes) {
    match import_bytes(b, "p", &ImportOptions::default()) {
        Err(e) => eprintln!("import err: {e}"),
        Ok(g) => {
            eprintln!("imported");
            eprintln!("export: {:?}", export_bytes(&g).map(|b| b.len()));
            eprintln!("analyze: {:?}", graph_ir::analysis::analyze(&g).map(|s| s.summary(&g).total));
        }
    }
}

#[test]
fn probe_huge_dims() {
    probe(edited(|m| {
        let graph = m.graph.as_mut().unwrap();
        let w = graph.initializer.iter_mut().find(|t| t.name == "w").unwrap();
        w.dims = vec![1 << 40, 3, 3, 3];
        w.raw_data = Default::default();
    }));
    for big in [1i64 << 20, 1 << 31, 1 << 40, 1 << 62] {
        probe(edited(|m| {
            let graph = m.graph.as_mut().unwrap();
            let x = graph.input.iter_mut().find(|t| t.name == "x").unwrap();
            let dims = &mut x.type_.as_mut().unwrap().mut_tensor_type().shape.as_mut().unwrap().dim;
            dims[2].set_dim_value(big);
            dims[3].set_dim_value(big);
        }));
    }
}

#[test]
fn probe_seeds() {
    for e in std::fs::read_dir("/tmp/seeds").unwrap() {
        let p = e.unwrap().path();
        eprintln!("{}", p.display());
        probe(Bytes::from(std::fs::read(&p).unwrap()));
    }
}

#[test]
fn probe_bad() {
    let mut files: Vec<_> = std::fs::read_dir("/tmp/bad").unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "onnx")).collect();
    files.sort();
    for p in files {
        eprintln!("=== {}", p.display());
        let b = Bytes::from(std::fs::read(&p).unwrap());
        if std::panic::catch_unwind(|| probe(b)).is_err() {
            eprintln!("PANIC {}", p.display());
        }
    }
}
