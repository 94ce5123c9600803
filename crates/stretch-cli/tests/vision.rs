//! The vision fixtures (`fixtures/vision`: torchvision segmentation nets,
//! a style-transfer net and a YOLO-style detector, from
//! `scripts/fixtures/export_torchvision.py --family vision`) through every
//! step a user takes: weights filled by Python, `convert` (equal to the
//! filled file in onnxruntime, every output), `run` on the subgraph
//! runtime (every output equal to onnxruntime's), and `stretch` (plan and
//! branch on host.toml) whose branched file runs on the runtime, with its
//! tract engine and with its onnxruntime engine, with every output equal
//! to onnxruntime's run of that file. Stages are found
//! in the backbone; a stage left whole says why. The two files exported
//! with torch's weights (`*_full.onnx`) convert equal to themselves.

mod common;

use common::{reference, repo, scratch, stretch_ok};
use scheduler_rt::npy::{Array, write};
use std::path::{Path, PathBuf};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs `model` on the runtime with a fixed input and checks every output
/// against onnxruntime's run of the same file.
fn runs_like_onnxruntime(dir: &Path, model: &Path, shape: &[usize], outputs: usize, extra: &[&str]) {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|k| ((k * 7919) % 2000) as f32 / 1000.0 - 1.0).collect();
    let x = dir.join("x.npy");
    write(
        &x,
        &Array {
            shape: shape.to_vec(),
            data,
        },
    )
    .unwrap();
    let ys: Vec<PathBuf> = (0..outputs).map(|k| dir.join(format!("y{k}.npy"))).collect();
    let mut args = vec!["run", s(model), "--input", s(&x)];
    args.extend(extra);
    for y in &ys {
        args.extend(["--output", s(y)]);
    }
    stretch_ok(&args);
    let mut check = vec!["expect", s(model), s(&x)];
    check.extend(ys.iter().map(|y| s(y)));
    check.extend(["--rtol", "1e-4"]);
    let report = reference(&check);
    assert_eq!(report.matches("max abs diff").count(), outputs, "{report}");
}

#[test]
fn vision_fixtures_convert_run_and_branch_like_onnxruntime() {
    let dir = scratch("vision");
    let host = repo().join("configs/devices/host.toml");
    let cases = [
        ("lraspp_mobilenet_v3_large", 1, 2),
        ("deeplabv3_mobilenet_v3_large", 2, 3),
        ("fcn_resnet50", 2, 3),
        ("style_transfer", 1, 1),
        ("yolo_tiny", 2, 2),
    ];
    for (name, outputs, stages) in cases {
        let src = repo().join(format!("fixtures/vision/{name}.onnx"));
        let filled = dir.join(format!("{name}.filled.onnx"));
        reference(&["fill", s(&src), s(&filled), "--seed", "3"]);
        let info: serde_json::Value = serde_json::from_str(&stretch_ok(&["inspect", s(&filled), "--json"])).unwrap();
        assert_eq!(info["outputs"].as_array().unwrap().len(), outputs, "{name}");
        assert_eq!(info["stages"].as_array().unwrap().len(), stages, "{name}: {info}");
        let parts = ["stem", "head"]
            .iter()
            .map(|p| info[p]["macs"].as_u64().unwrap())
            .sum::<u64>()
            + info["stages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|st| st["macs"].as_u64().unwrap())
                .sum::<u64>();
        assert_eq!(
            parts,
            info["total"]["macs"].as_u64().unwrap(),
            "{name}: parts do not cover the model"
        );
        let shape: Vec<usize> = info["input"]["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();

        let converted = dir.join(format!("{name}.converted.onnx"));
        stretch_ok(&["convert", s(&filled), "-o", s(&converted)]);
        reference(&["compare", s(&filled), s(&converted), "--atol", "1e-5", "--rtol", "1e-5"]);
        runs_like_onnxruntime(&dir, &converted, &shape, outputs, &[]);

        let branched = dir.join(format!("{name}.branched.onnx"));
        let plan = stretch_ok(&["stretch", s(&filled), "--device", s(&host), "-o", s(&branched)]);
        let whole = plan.lines().filter(|l| l.contains("(whole:")).collect::<Vec<_>>();
        for line in &whole {
            assert!(
                line.contains("Eq.") || line.contains("cannot") || line.contains("constraint"),
                "{name}: a stage left whole without a reason: {line}"
            );
        }
        runs_like_onnxruntime(&dir, &branched, &shape, outputs, &[]);
        let ort = [
            "--processor",
            "cpu0=inline,engine=ort",
            "--processor",
            "cpu1=pool,engine=ort",
        ];
        runs_like_onnxruntime(&dir, &branched, &shape, outputs, &ort);
    }
    for name in ["style_transfer_full", "yolo_tiny_full"] {
        let src = repo().join(format!("fixtures/vision/{name}.onnx"));
        let converted = dir.join(format!("{name}.converted.onnx"));
        stretch_ok(&["convert", s(&src), "-o", s(&converted)]);
        reference(&["compare", s(&src), s(&converted), "--atol", "1e-5", "--rtol", "1e-5"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
