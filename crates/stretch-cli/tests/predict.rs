//! `stretch predict`: kernels and their predicted latencies, the JSON
//! document, and the errors for an unknown processor or a bad profile.

mod common;

use common::*;
use serde_json::Value;
use std::process::Output;

fn device() -> String {
    repo()
        .join("configs/devices/snapdragon855.toml")
        .to_string_lossy()
        .into_owned()
}

/// Runs `stretch predict` on a fixture with a device profile and processor.
fn predict(fixture: &str, device: &str, processor: &str, extra: &[&str]) -> Output {
    let model = repo()
        .join(format!("fixtures/models/{fixture}.onnx"))
        .to_string_lossy()
        .into_owned();
    let mut args = vec!["predict", &model, "--device", device, "--processor", processor];
    args.extend_from_slice(extra);
    stretch(&args)
}

fn stdout_ok(out: Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr_err(out: Output) -> String {
    assert!(!out.status.success(), "expected failure");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn kernels_sum_to_the_total() {
    let out = stdout_ok(predict("resnet18_bn", &device(), "cpu", &["--json"]));
    let v: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["schema"], "stretch.predict/1");
    let kernels = v["kernels"].as_array().expect("kernels");
    let sum: f64 = kernels.iter().map(|k| k["ms"].as_f64().expect("ms")).sum();
    let total = v["total_ms"].as_f64().expect("total") - v["subgraph_overhead_ms"].as_f64().expect("overhead");
    assert!((sum - total).abs() < 1e-9 && total > 0.0, "{sum} vs {total}");
    let first = &kernels[0];
    assert_eq!(first["ops"], serde_json::json!(["Conv", "BatchNormalization", "Relu"]));
    assert_eq!(first["source"]["kind"], "analytic");
    assert!(kernels.iter().any(|k| k["ops"] == serde_json::json!(["Add", "Relu"])));
}

#[test]
fn table_says_figures_are_predicted() {
    let out = stdout_ok(predict("mobilenet_v2", &device(), "cpu", &[]));
    assert!(out.contains("predicted total on snapdragon855/cpu"), "{out}");
    assert!(out.contains("analytic"), "{out}");
}

#[test]
fn unknown_processor_lists_the_available_ones() {
    let err = stderr_err(predict("resnet18", &device(), "npu", &[]));
    assert!(
        err.contains("no processor `npu`") && err.contains("it has: cpu"),
        "{err}"
    );
}

#[test]
fn bad_profile_names_file_and_key() {
    let dir = scratch("bad-profile");
    let path = dir.join("bad.toml");
    let text = std::fs::read_to_string(device())
        .expect("profile")
        .replacen("bandwidth_gbs", "bandwidth", 1);
    std::fs::write(&path, text).expect("write");
    let err = stderr_err(predict("resnet18", &path.to_string_lossy(), "cpu", &[]));
    assert!(err.contains("bad.toml") && err.contains("bandwidth"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A profile whose `per_cpu` table names this machine's CPU is replaced by
/// the named file: the text report and the JSON say which file was read.
#[test]
fn a_per_cpu_profile_says_which_file_it_read() {
    let dir = scratch("predict-per-cpu");
    let text = std::fs::read_to_string(device()).expect("snapdragon855.toml");
    let cpu = predictor::profiler::host::this_cpu_model();
    let main = dir.join("main.toml");
    let variant = dir.join("variant.toml");
    std::fs::write(
        &main,
        text.replacen(
            "\n[",
            &format!("\nper_cpu = {{ \"{cpu}\" = \"variant.toml\" }}\n\n["),
            1,
        ),
    )
    .expect("write main");
    std::fs::write(
        &variant,
        text.replacen(
            "\n[",
            &format!("\nmeasured_on = {{ cpu = \"{cpu}\", date = \"2026-11-26\", source = \"test\" }}\n\n["),
            1,
        ),
    )
    .expect("write variant");
    let main = main.to_string_lossy().into_owned();
    let out = stdout_ok(predict("resnet18_bn", &main, "cpu", &[]));
    assert!(
        out.contains(&format!("profile read from {}", variant.display())),
        "{out}"
    );
    let v: Value = serde_json::from_str(&stdout_ok(predict("resnet18_bn", &main, "cpu", &["--json"]))).expect("JSON");
    assert_eq!(v["profile_file"], variant.display().to_string());
    let plain: Value =
        serde_json::from_str(&stdout_ok(predict("resnet18_bn", &device(), "cpu", &["--json"]))).expect("JSON");
    assert_eq!(plain["profile_file"], device());
}
