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

#[test]
fn every_fixture_round_trips_in_onnxruntime() {
    for model in fixtures() {
        roundtrip(&model);
    }
}
