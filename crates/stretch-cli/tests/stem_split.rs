//! A stem split across processors by output channels computes the
//! original's function: with every stage kept whole, the split model run
//! on the subgraph runtime (pieces on two workers) matches onnxruntime on
//! the original, batch norm included; the plan search splits resnet18's
//! 7x7 stem on the host profile unless told not to; a plan whose split
//! does not fit the model is refused with the channels named.

mod common;

use common::*;
use serde_json::Value;

#[test]
fn a_split_stem_runs_on_two_workers_like_the_original() {
    use scheduler_rt::npy::{Array, write};
    let dir = scratch("stem-split");
    let model = dir.join("mini.onnx");
    stretch_ok(&["zoo", "resnet-mini", "--seed", "3", "-o", &arg(&model)]);
    let device = arg(&repo().join("configs/devices/host.toml"));
    let plan = dir.join("plan.json");
    stretch_ok(&[
        "plan",
        &arg(&model),
        "--device",
        &device,
        "--alpha",
        "1e-9",
        "-o",
        &arg(&plan),
    ]);
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert!(
        doc["stages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["branches"].as_array().unwrap().is_empty()),
        "every stage stays whole at this alpha"
    );
    doc["stem"]["split"] = serde_json::json!([
        {"processor": "cpu0", "channels": 8, "predicted_ms": 0.0},
        {"processor": "cpu1", "channels": 8, "predicted_ms": 0.0}
    ]);
    std::fs::write(&plan, doc.to_string()).unwrap();
    let split = dir.join("split.onnx");
    stretch_ok(&["branch", &arg(&model), "--plan", &arg(&plan), "-o", &arg(&split)]);
    let x = dir.join("x.npy");
    let data = (0..3 * 32 * 32)
        .map(|i| ((i * 7919) % 2000) as f32 / 1000.0 - 1.0)
        .collect();
    write(
        &x,
        &Array {
            shape: vec![1, 3, 32, 32],
            data,
        },
    )
    .unwrap();
    let y = dir.join("y.npy");
    let out = stretch_ok(&[
        "run",
        &arg(&split),
        "--input",
        &arg(&x),
        "--output",
        &arg(&y),
        "--processor",
        "cpu0=inline",
        "--processor",
        "cpu1=pool",
    ]);
    assert!(out.contains("cpu0") && out.contains("cpu1"), "{out}");
    reference(&["expect", &arg(&model), &arg(&x), &arg(&y), "--rtol", "1e-5"]);

    doc["stem"]["split"][1]["channels"] = serde_json::json!(4);
    std::fs::write(&plan, doc.to_string()).unwrap();
    let bad = stretch(&["branch", &arg(&model), "--plan", &arg(&plan), "-o", &arg(&split)]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("splits the stem into [8, 4] channels; its first convolution has 16"),
        "{err}"
    );
}

#[test]
fn resnet18s_stem_is_split_unless_asked_not_to() {
    let dir = scratch("stem-split-plan");
    let model = arg(&repo().join("fixtures/models/resnet18.onnx"));
    let device = arg(&repo().join("configs/devices/host.toml"));
    let plan = |extra: &[&str]| -> Value {
        let out = dir.join("plan.json");
        let mut args = vec!["plan", &model, "--device", &device, "-o"];
        let o = arg(&out);
        args.push(&o);
        args.extend(extra);
        stretch_ok(&args);
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
    };
    let split = plan(&[]);
    let shares = split["stem"]["split"].as_array().expect("a split stem");
    let channels: u64 = shares.iter().map(|s| s["channels"].as_u64().unwrap()).sum();
    assert_eq!(channels, 64);
    assert!(shares.len() >= 2);
    let whole = plan(&["--no-split-stem"]);
    assert!(whole["stem"].get("split").is_none(), "{}", whole["stem"]);
    assert!(
        split["stem"]["predicted_ms"].as_f64().unwrap() < whole["stem"]["predicted_ms"].as_f64().unwrap(),
        "a split is taken only when predicted faster"
    );
}
