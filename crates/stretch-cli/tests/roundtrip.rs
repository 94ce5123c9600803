//! Import→export round trips of every fixture, judged by onnx.checker and
//! onnxruntime (scripts/check_onnx.py), never by stretch itself:
//! - a structure-only fixture filled with random weights by Python, then
//!   converted by stretch, gives outputs equal to the filled original
//!   (max abs difference ≤ 1e-5);
//! - the same fixture converted with `--random-weights` passes the full
//!   checker and runs in onnxruntime with finite outputs.

mod common;

use common::*;

fn roundtrip(model: &std::path::Path) {
    let name = model.file_stem().and_then(|s| s.to_str()).expect("file name");
    let dir = scratch(&format!("roundtrip-{name}"));
    let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let model = model.to_string_lossy().into_owned();
    reference(&["fill", &model, &p("orig.onnx"), "--seed", "3"]);
    stretch_ok(&["convert", &p("orig.onnx"), "-o", &p("conv.onnx")]);
    stretch_ok(&["convert", &model, "--random-weights", "7", "-o", &p("rw.onnx")]);
    reference(&["check", &p("conv.onnx"), &p("rw.onnx")]);
    let cmp = reference(&["compare", &p("orig.onnx"), &p("conv.onnx"), "--atol", "1e-5"]);
    assert!(cmp.contains("equal within"), "{cmp}");
    reference(&["run", &p("rw.onnx")]);
    let _ = std::fs::remove_dir_all(&dir);
}

macro_rules! fixture_tests {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            roundtrip(&repo().join(concat!("fixtures/models/", stringify!($name), ".onnx")));
        }
    )*
        #[test]
        fn every_fixture_has_a_round_trip_test() {
            let listed = [$(stringify!($name)),*];
            for f in fixtures() {
                let stem = f.file_stem().and_then(|s| s.to_str()).expect("file name").to_string();
                assert!(listed.contains(&stem.as_str()), "no round-trip test for {stem}");
            }
        }
    };
}

fixture_tests!(
    resnet18,
    resnet18_bn,
    resnet34,
    resnet34_bn,
    resnet50,
    resnet50_bn,
    mobilenet_v2,
    mobilenet_v2_bn,
    efficientnet_b0,
    efficientnet_b0_bn,
    regnet_x_1_6gf,
    regnet_x_1_6gf_bn,
);

/// Annotations written on every node kind pass the full checker, are ignored
/// by onnxruntime, and come back on import.
#[test]
fn annotated_model_is_valid_onnx_and_keeps_annotations() {
    use graph_ir::builder::{Builder, ConvSpec};
    use graph_ir::keys;
    let mut b = Builder::new("annotated");
    let x = b.input("x", &[1, 3, 16, 16]).expect("input");
    let y = b.conv_bn("c1", x, ConvSpec::new(8, 3, 2), true).expect("conv");
    let y = b.classifier("head", y, 5).expect("head");
    let mut g = b.finish("y", y).expect("graph");
    g.fill_missing_weights(1);
    for (i, id) in g.node_ids().into_iter().enumerate() {
        g.annotate(id, keys::PROCESSOR, if i % 2 == 0 { "cpu" } else { "gpu" });
        g.annotate(id, keys::MEETING_POINT, (i % 3).to_string());
        g.annotate(id, keys::STAGE, "1");
        g.annotate(id, keys::BRANCH, "0");
    }
    let dir = scratch("annotated");
    let path = dir.join("annotated.onnx");
    graph_ir::onnx::export_file(&g, &path).expect("export");
    let p = path.to_string_lossy().into_owned();
    reference(&["check", &p]);
    reference(&["run", &p]);
    let back = graph_ir::onnx::import_file(&path, &Default::default()).expect("import");
    for id in g.node_ids() {
        let n = g.node(id);
        let m = back.node(back.find(&n.name).expect("same names"));
        assert_eq!(n.annotations, m.annotations, "annotations of `{}`", n.name);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `convert` counts the operators it wrote, not the inputs and weights
/// beside them: a Conv and an Add are 2, whatever their initializers.
#[test]
fn convert_counts_operators() {
    let dir = scratch("convert-count");
    let model = repo().join("fixtures/ops/add_residual_opset13.onnx");
    let out = dir.join("out.onnx");
    let said = stretch_ok(&["convert", &arg(&model), "-o", &arg(&out)]);
    assert!(said.contains("(2 operators, "), "{said}");
}
