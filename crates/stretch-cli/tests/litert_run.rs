//! `stretch-run --format tflite`: a bundle's LiteRT files run on tract
//! as the manifest cuts the model, values handed between subgraphs in the
//! ONNX files' form, and pass `--check` (int8 and float16 files in
//! `bundle.rs`, grouped convolutions there too); a bundle without
//! `.tflite` files fails in one line.

mod common;

use common::{arg, repo, scratch, stretch_ok, stretch_run, stretch_run_ok};
use std::path::Path;

/// resnet-mini at 32x32 branched on the host's two cores, exported with
/// `formats` into `dir/bundle`.
fn bundle(dir: &Path, formats: &str) -> String {
    let m = arg(&dir.join("m.onnx"));
    stretch_ok(&["zoo", "resnet-mini", "--seed", "4", "-o", &m]);
    let b = arg(&dir.join("b.onnx"));
    let host = arg(&repo().join("configs/devices/host.toml"));
    let args = [
        "stretch",
        &m,
        "--device",
        &host,
        "--processors",
        "cpu0,cpu1",
        "--alpha",
        "1",
        "-o",
        &b,
    ];
    stretch_ok(&args);
    let out = arg(&dir.join("bundle"));
    let args = [
        "export", &b, "--device", &host, "--no-ort", "--format", formats, "-o", &out,
    ];
    stretch_ok(&args);
    out
}

/// `stretch-run args` fails with one `error:` line holding every `want`.
fn fails(args: &[&str], want: &[&str]) {
    let out = stretch_run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "stretch-run {args:?} succeeded");
    assert_eq!(err.lines().count(), 1, "one line expected:\n{err}");
    assert!(err.starts_with("error: "), "{err}");
    for w in want {
        assert!(err.contains(w), "want `{w}`:\n{err}");
    }
}

#[test]
fn a_branched_bundle_runs_its_tflite_files_within_the_reference_tolerance() {
    let dir = scratch("litert-run");
    let out = bundle(&dir, "onnx,tflite");
    let m = bundle::Bundle::open(Path::new(&out)).unwrap().manifest;
    assert!(m.subgraphs.len() > 2, "{} subgraphs", m.subgraphs.len());
    assert!(m.subgraphs.iter().any(|s| s.meeting_point), "no meeting point");
    let text = stretch_run_ok(&[&out, "--format", "tflite", "--check", "--runs", "3"]);
    assert!(
        text.contains("check: output 0") && text.contains("3 runs: min"),
        "{text}"
    );
    assert!(
        text.contains("engine=tflite") && !text.contains("engine=tract"),
        "{text}"
    );
    let onnx = stretch_run_ok(&[&out, "--check"]);
    assert!(onnx.contains("engine=tract"), "{onnx}");
}

#[test]
fn tflite_needs_tflite_files_in_the_bundle() {
    let dir = scratch("litert-run-none");
    let out = bundle(&dir, "onnx");
    fails(
        &[&out, "--format", "tflite", "--check"],
        &["--format tflite", "has no .tflite file", "--format onnx,tflite"],
    );
}
