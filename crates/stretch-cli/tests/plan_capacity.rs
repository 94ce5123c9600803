//! Plans at the default capacity band compare like with like: on five
//! torchvision models and two device profiles, every branched stage keeps
//! at least the original stage's MACs, and no predicted plan is faster than
//! the ideal bound for its own work. A band below 1 is honoured and the
//! plan says how much work it cut.

mod common;

use common::{repo, scratch, stretch_ok};
use serde_json::Value;

const MODELS: [&str; 5] = [
    "resnet18",
    "resnet50",
    "mobilenet_v2",
    "efficientnet_b0",
    "regnet_x_1_6gf",
];
const DEVICES: [&str; 2] = ["host", "snapdragon855"];

fn plan(model: &str, device: &str, extra: &[&str]) -> (Value, String) {
    let tag = format!("plan-{model}-{device}-{}", extra.join("").replace(',', "_"));
    let dir = scratch(&tag);
    let out = dir.join("plan.json");
    let m = repo().join(format!("fixtures/models/{model}.onnx"));
    let d = repo().join(format!("configs/devices/{device}.toml"));
    let mut args = vec![
        "plan",
        m.to_str().unwrap(),
        "--device",
        d.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    let text = stretch_ok(&args);
    let v = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    (v, text)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn every_branched_stage_keeps_at_least_the_original_work_by_default() {
    let mut branched = 0;
    for model in MODELS {
        for device in DEVICES {
            let (p, text) = plan(model, device, &[]);
            assert_eq!(p["settings"]["capacity"][0], 1.0, "{model} on {device}");
            for st in p["stages"].as_array().unwrap() {
                let branches = st["branches"].as_array().unwrap();
                if branches.is_empty() {
                    continue;
                }
                let macs: u64 = branches.iter().map(|b| b["macs"].as_u64().unwrap()).sum();
                let ratio = macs as f64 / st["macs"].as_u64().unwrap() as f64;
                assert!(
                    ratio >= 1.0,
                    "{model} on {device}, stage {}: work {ratio:.3}",
                    st["index"]
                );
                assert!((ratio - f(&st["work_ratio"])).abs() < 1e-9, "{model} on {device}: {st}");
                branched += 1;
            }
            assert!(f(&p["totals"]["work_ratio"]) >= 1.0, "{model} on {device}");
            assert!(text.contains("x the original's MACs"), "{text}");
        }
    }
    assert!(branched >= 20, "only {branched} stages branched");
}

#[test]
fn no_prediction_beats_the_ideal_bound_for_its_own_work() {
    for model in MODELS {
        for device in DEVICES {
            for capacity in ["1.0,1.2", "0.8,1.2"] {
                let (p, _) = plan(model, device, &["--capacity", capacity]);
                let t = &p["totals"];
                assert!(
                    f(&t["plan_ms"]) >= f(&t["ideal_ms"]) - 1e-9,
                    "{model} on {device} at {capacity}: plan {} ms below its ideal bound {} ms",
                    t["plan_ms"],
                    t["ideal_ms"]
                );
                assert!(f(&t["speedup"]) <= f(&t["ideal_speedup"]) + 1e-9);
            }
        }
    }
}

#[test]
fn a_band_below_one_cuts_work_and_says_so() {
    let (p, text) = plan("resnet50", "host", &["--capacity", "0.5,0.8"]);
    let ratio = f(&p["totals"]["work_ratio"]);
    assert!(ratio < 1.0, "work ratio {ratio}");
    assert!(
        text.contains(&format!("with {ratio:.2}x the original's MACs")),
        "{text}"
    );
}
