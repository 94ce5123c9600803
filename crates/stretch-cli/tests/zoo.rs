//! `stretch zoo` writes models that pass onnx.checker, run in onnxruntime with
//! the asked number of classes, and branch on the host profile.

mod common;

use common::*;

#[test]
fn zoo_models_check_run_and_branch() {
    let dir = scratch("zoo");
    let mut files = Vec::new();
    for name in ["resnet-mini", "mbnet-mini"] {
        let out = dir.join(format!("{name}.onnx")).to_string_lossy().into_owned();
        let text = stretch_ok(&["zoo", name, "--input-size", "32", "--classes", "7", "-o", &out]);
        assert!(text.contains("7 classes"), "{text}");
        let inspect = stretch_ok(&["inspect", &out]);
        assert!(inspect.contains("3 stages"), "{inspect}");
        let branched = dir.join(format!("{name}-b.onnx")).to_string_lossy().into_owned();
        let device = repo().join("configs/devices/host.toml").to_string_lossy().into_owned();
        stretch_ok(&["stretch", &out, "--device", &device, "--alpha", "1", "-o", &branched]);
        files.push(out);
        files.push(branched);
    }
    let mut check = vec!["check"];
    check.extend(files.iter().map(String::as_str));
    reference(&check);
    let mut run = vec!["run"];
    run.extend(files.iter().map(String::as_str));
    let ran = reference(&run);
    assert_eq!(ran.matches("shape [1, 7], finite").count(), 4, "{ran}");
    let bad = stretch(&["zoo", "vgg", "-o", &dir.join("x.onnx").to_string_lossy()]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("available: resnet-mini, mbnet-mini"));
}

/// The plan → branch → run path: zoo models branched on the host profile in
/// both merge modes run on the subgraph runtime with their branches on two
/// workers and match onnxruntime on the whole model within 1e-4 relative.
#[test]
fn branched_zoo_models_run_on_the_runtime_like_onnxruntime() {
    use scheduler_rt::npy::{Array, write};
    let dir = scratch("zoo-runtime");
    let device = repo().join("configs/devices/host.toml").to_string_lossy().into_owned();
    let n = 3 * 32 * 32;
    let x = dir.join("x.npy");
    let data = (0..n).map(|i| ((i * 7919) % 2000) as f32 / 1000.0 - 1.0).collect();
    write(
        &x,
        &Array {
            shape: vec![1, 3, 32, 32],
            data,
        },
    )
    .expect("write input");
    let xs = x.to_string_lossy().into_owned();
    for name in ["resnet-mini", "mbnet-mini"] {
        let m = dir.join(format!("{name}.onnx")).to_string_lossy().into_owned();
        stretch_ok(&["zoo", name, "--seed", "3", "-o", &m]);
        for merge in ["project", "concat"] {
            let b = dir.join(format!("{name}-{merge}.onnx")).to_string_lossy().into_owned();
            stretch_ok(&[
                "stretch", &m, "--device", &device, "--alpha", "1", "--merge", merge, "-o", &b,
            ]);
            for specs in [["cpu0=inline", "cpu1=pool"], ["cpu0=pool", "cpu1=pool"]] {
                let y = dir.join("y.npy").to_string_lossy().into_owned();
                let out = stretch_ok(&[
                    "run",
                    &b,
                    "--input",
                    &xs,
                    "--output",
                    &y,
                    "--processor",
                    specs[0],
                    "--processor",
                    specs[1],
                ]);
                assert!(out.contains("shape [1, 10]"), "{out}");
                reference(&["expect", &b, &xs, &y, "--rtol", "1e-4"]);
            }
        }
    }
}

#[test]
fn a_closed_output_ends_the_command_quietly() {
    let dir = scratch("zoo-closed-output");
    let out = dir.join("m.onnx");
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let done = std::process::Command::new(env!("CARGO_BIN_EXE_stretch"))
        .args(["zoo", "resnet-mini", "-o", out.to_str().unwrap()])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run stretch");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "status {:?}, stderr:\n{stderr}", done.status);
    assert!(stderr.is_empty(), "stderr:\n{stderr}");
    assert!(out.exists(), "the model is written before the report");
}
