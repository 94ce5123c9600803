//! `stretch inspect --json` on the torchvision fixtures: blocks per stage as
//! the architectures define them, MACs within 2% of torchvision's published
//! figures, and parameters exactly equal to the initializer elements counted
//! straight from the protobuf.

mod common;

use common::*;
use onnx_ir::{Message, ModelProto};
use serde_json::Value;

/// (model, blocks per stage, torchvision's published GMACs ("GFLOPS" column)).
const EXPECTED: &[(&str, &[u64], f64)] = &[
    ("resnet18", &[2, 2, 2, 2], 1.81),
    ("resnet34", &[3, 4, 6, 3], 3.66),
    ("resnet50", &[3, 4, 6, 3], 4.09),
    ("mobilenet_v2", &[1, 2, 3, 4, 3, 3, 1], 0.30),
    ("efficientnet_b0", &[1, 2, 2, 3, 3, 4, 1], 0.39),
    ("regnet_x_1_6gf", &[2, 4, 10, 2], 1.60),
];

fn initializer_elements(path: &std::path::Path) -> u64 {
    let bytes = std::fs::read(path).expect("read fixture");
    let model = ModelProto::parse_from_bytes(&bytes).expect("parse fixture");
    model
        .graph
        .initializer
        .iter()
        .map(|t| t.dims.iter().product::<i64>() as u64)
        .sum()
}

fn check(name: &str, blocks: &[u64], gmacs: f64) {
    let path = repo().join(format!("fixtures/models/{name}.onnx"));
    let out = stretch_ok(&["inspect", "--json", &path.to_string_lossy()]);
    let v: Value = serde_json::from_str(&out).expect("inspect --json prints JSON");
    assert_eq!(v["schema"], "stretch.inspect/1");
    let got: Vec<u64> = v["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|s| s["blocks"].as_u64().expect("blocks"))
        .collect();
    assert_eq!(got, blocks, "{name}: blocks per stage");
    let macs = v["total"]["macs"].as_f64().expect("total macs") / 1e9;
    assert!(
        (macs - gmacs).abs() / gmacs <= 0.02,
        "{name}: {macs:.3} GMACs vs published {gmacs}"
    );
    let params = v["total"]["params"].as_u64().expect("total params");
    assert_eq!(params, initializer_elements(&path), "{name}: params");
    let parts: u64 = ["stem", "head"]
        .iter()
        .map(|k| v[k]["macs"].as_u64().expect("part macs"))
        .sum::<u64>()
        + v["stages"]
            .as_array()
            .expect("stages")
            .iter()
            .map(|s| s["macs"].as_u64().expect("macs"))
            .sum::<u64>();
    assert_eq!(
        parts,
        v["total"]["macs"].as_u64().expect("macs"),
        "{name}: parts add up to the total"
    );
}

#[test]
fn fixtures_match_published_figures() {
    for (name, blocks, gmacs) in EXPECTED {
        check(name, blocks, *gmacs);
        let bn = format!("{name}_bn");
        check(&bn, blocks, *gmacs);
    }
}

#[test]
fn table_lists_every_part() {
    let path = repo().join("fixtures/models/resnet18.onnx");
    let out = stretch_ok(&["inspect", &path.to_string_lossy()]);
    for part in ["stem", "stage 0", "stage 3", "head", "total", "head: starts where"] {
        assert!(out.contains(part), "missing `{part}` in:\n{out}");
    }
}
