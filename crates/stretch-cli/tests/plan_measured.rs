//! `stretch plan --measure-on`: a plan whose every subgraph time was
//! measured on this machine's engines says so, times a subgraph once
//! (a second plan with the same database times nothing and comes out the
//! same), and a runtime configuration that does not fit the device is
//! refused by name.

mod common;

use common::*;
use serde_json::Value;

#[test]
fn a_measured_plan_says_so_and_times_each_subgraph_once() {
    let dir = scratch("plan-measured");
    let model = dir.join("mini.onnx");
    stretch_ok(&["zoo", "resnet-mini", "--input-size", "32", "-o", &arg(&model)]);
    let device = arg(&repo().join("configs/devices/host.toml"));
    let runtime = arg(&repo().join("configs/runtime/host.toml"));
    let db = dir.join("db.json");
    let plan = |out: &str| {
        let out = dir.join(out);
        let res = stretch(&[
            "plan",
            &arg(&model),
            "--device",
            &device,
            "--alpha",
            "1",
            "--measure-on",
            &runtime,
            "--cost-db",
            &arg(&db),
            "-o",
            &arg(&out),
        ]);
        assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        (
            doc,
            String::from_utf8_lossy(&res.stdout).into_owned(),
            String::from_utf8_lossy(&res.stderr).into_owned(),
        )
    };
    let (first, text, err) = plan("a.json");
    assert!(text.contains("latencies: measured on this machine"), "{text}");
    assert!(
        first["predicted_by"]
            .as_str()
            .unwrap()
            .starts_with("measured on this machine"),
        "{}",
        first["predicted_by"]
    );
    let timed: usize = err
        .split("measured: ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of timed subgraphs in:\n{err}"));
    assert!(timed > 10, "{err}");
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&db).unwrap()).unwrap();
    assert_eq!(
        kept["pieces"].as_object().unwrap().len(),
        timed,
        "every timed subgraph is kept"
    );
    let stages = first["stages"].as_array().unwrap();
    assert!(
        stages.iter().any(|s| !s["branches"].as_array().unwrap().is_empty()),
        "{text}"
    );
    for s in stages {
        for ms in s["original_ms"].as_object().unwrap().values() {
            assert!(ms.as_f64().unwrap() > 0.0, "stage {}: {ms}", s["index"]);
        }
    }
    let (second, _, err) = plan("b.json");
    assert!(err.contains("measured: 0 subgraphs timed"), "{err}");
    assert_eq!(first["stages"], second["stages"], "the same times give the same plan");
}

#[test]
fn a_runtime_configuration_naming_another_processor_is_refused() {
    let dir = scratch("plan-measured-bad");
    let model = dir.join("mini.onnx");
    stretch_ok(&["zoo", "resnet-mini", "--input-size", "32", "-o", &arg(&model)]);
    let runtime = dir.join("rt.toml");
    std::fs::write(
        &runtime,
        "[[processor]]\nname = \"cpu0\"\nkind = \"inline\"\n\n[[processor]]\nname = \"npu\"\nkind = \"pool\"\n",
    )
    .unwrap();
    let res = stretch(&[
        "plan",
        &arg(&model),
        "--device",
        &arg(&repo().join("configs/devices/host.toml")),
        "--measure-on",
        &arg(&runtime),
    ]);
    assert!(!res.status.success());
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(
        err.contains("rt.toml: processor `npu` is not in device `host`'s profile (it has cpu0, cpu1)"),
        "{err}"
    );
}
