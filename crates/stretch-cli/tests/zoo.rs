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
