//! What `stretch export --format onnx,tflite` refuses, and how: a node
//! with no LiteRT form, a quantization LiteRT's int8 rules cannot take (a
//! scale of 0), a subgraph input of rank above 4. Each is one error line
//! naming the node or tensor and its subgraph, a non-zero exit, and no
//! bundle written; the same model still exports as ONNX only. A bundle
//! whose `.tflite` file was altered after export does not run.

mod common;

use common::{arg, repo, scratch, stretch, stretch_ok, stretch_run};
use graph_ir::ops::{Unary, UnaryOp};
use graph_ir::{DType, Fact, Graph, Op};
use std::path::Path;

fn host() -> String {
    arg(&repo().join("configs/devices/host.toml"))
}

/// A one-node model: `op` on an f32 input of `shape`.
fn one_node(path: &Path, op: Op, shape: &[usize]) -> String {
    let mut g = Graph::new("one");
    let x = g.add_input("x", Fact::new(DType::F32, shape.to_vec())).unwrap();
    let y = g.add_node("the_node", op, &[x]).unwrap();
    g.set_outputs(vec![("y".into(), y.out(0))]).unwrap();
    graph_ir::onnx::export_file(&g, path).unwrap();
    arg(path)
}

/// Exports `model` with LiteRT files: it must fail with one line holding
/// every one of `want`, and leave no bundle.
fn refused(model: &str, dir: &Path, want: &[&str]) {
    let out = dir.join("bundle");
    let o = arg(&out);
    let d = host();
    let r = stretch(&[
        "export",
        model,
        "--device",
        &d,
        "--no-ort",
        "--format",
        "onnx,tflite",
        "-o",
        &o,
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "exported:\n{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(lines.len(), 1, "one error line:\n{err}");
    for w in want {
        assert!(lines[0].contains(w), "`{w}` missing from: {}", lines[0]);
    }
    assert!(!out.exists(), "a failed export left {}", out.display());
    let onnx = dir.join("onnx-only");
    stretch_ok(&["export", model, "--device", &d, "--no-ort", "-o", &arg(&onnx)]);
}

#[test]
fn a_node_without_a_litert_form_is_named() {
    let dir = scratch("litert-unsupported");
    let op = Op::Unary(Unary { op: UnaryOp::Erf });
    let m = one_node(&dir.join("erf.onnx"), op, &[1, 3, 8, 8]);
    refused(&m, &dir, &["the_node", "Erf", "sg0@cpu0", "no LiteRT form"]);
}

#[test]
fn an_input_of_rank_five_is_named() {
    let dir = scratch("litert-rank");
    let op = Op::Unary(Unary { op: UnaryOp::Relu });
    let m = one_node(&dir.join("rank5.onnx"), op, &[1, 2, 3, 4, 5]);
    refused(&m, &dir, &["`x`", "rank 5", "sg0@cpu0"]);
}

/// resnet-mini quantized for two int8 cores.
fn quantized(dir: &Path) -> graph_ir::Graph {
    let m = arg(&dir.join("m.onnx"));
    stretch_ok(&["zoo", "resnet-mini", "--seed", "5", "-o", &m]);
    let pair = dir.join("pair.toml");
    std::fs::write(&pair, common::INT8_PAIR).unwrap();
    let q = arg(&dir.join("q.onnx"));
    let args = [
        "quantize",
        &m,
        "--device",
        &arg(&pair),
        "--processor",
        "cpu0",
        "--calibration",
        "digits",
        "--samples",
        "4",
        "-o",
        &q,
    ];
    stretch_ok(&args);
    graph_ir::onnx::import_file(&q, &Default::default()).unwrap()
}

#[test]
fn a_weight_scale_of_zero_is_named() {
    let dir = scratch("litert-scale");
    let mut g = quantized(&dir);
    let (dq, scale) = g
        .node_ids()
        .into_iter()
        .find_map(|id| {
            let n = g.node(id);
            let weights = n.inputs.first().is_some_and(|x| g.const_tensor(*x).is_some());
            (matches!(n.op, Op::DequantizeLinear(_)) && weights && n.name.contains("weight")).then(|| (id, n.inputs[1]))
        })
        .expect("a weight dequantization");
    let old = g.const_tensor(scale).unwrap().clone();
    let zeros = graph_ir::Tensor::from_f32(old.shape().to_vec(), &vec![0.0; old.volume()]);
    g.replace_op(scale.node, Op::Const(zeros)).unwrap();
    let name = g.node(dq).name.clone();
    let bad = dir.join("zero-scale.onnx");
    graph_ir::onnx::export_file(&g, &bad).unwrap();
    let pair = arg(&dir.join("pair.toml"));
    let out = dir.join("bundle");
    let r = stretch(&[
        "export",
        &arg(&bad),
        "--device",
        &pair,
        "--no-ort",
        "--format",
        "onnx,tflite",
        "-o",
        &arg(&out),
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "exported:\n{err}");
    assert!(err.contains(&name) && err.contains("scale 0"), "{err}");
    assert!(!out.exists(), "a failed export left {}", out.display());
}

#[test]
fn an_altered_tflite_file_stops_the_runner() {
    let dir = scratch("litert-altered");
    let m = arg(&dir.join("m.onnx"));
    stretch_ok(&["zoo", "mbnet-mini", "--seed", "6", "-o", &m]);
    let out = dir.join("bundle");
    let d = host();
    stretch_ok(&[
        "export",
        &m,
        "--device",
        &d,
        "--no-ort",
        "--format",
        "onnx,tflite",
        "-o",
        &arg(&out),
    ]);
    let manifest = bundle::Manifest::load(&out).unwrap();
    let file = manifest.subgraphs[0].tflite_model.as_ref().unwrap().model.file.clone();
    let mut bytes = std::fs::read(out.join(&file)).unwrap();
    let k = bytes.len() / 2;
    bytes[k] ^= 0x5a;
    std::fs::write(out.join(&file), &bytes).unwrap();
    let r = stretch_run(&[&arg(&out), "--check"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "ran an altered bundle");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&file) && err.contains("altered"), "{err}");
}
