//! `stretch evaluate` scores a trained model as `stretch train` validated
//! it (same images, the recorded normalisation, running statistics), says
//! when a model records no normalisation, and refuses a dataset of another
//! class count by name.

mod common;

use common::{arg, scratch, stretch, stretch_ok};

/// The number after `key` in `text`, up to the `%`.
fn percent(text: &str, key: &str) -> String {
    text.split(key)
        .nth(1)
        .and_then(|s| s.split('%').next())
        .unwrap_or_else(|| panic!("no `{key}` in:\n{text}"))
        .trim()
        .to_string()
}

#[test]
fn a_trained_model_scores_what_training_reported() {
    let dir = scratch("evaluate");
    let m = arg(&dir.join("m.onnx"));
    stretch_ok(&["zoo", "resnet-mini", "--input-size", "16", "--seed", "1", "-o", &m]);
    let t = arg(&dir.join("t.onnx"));
    let trained = stretch_ok(&[
        "train",
        &m,
        "--dataset",
        "digits",
        "--epochs",
        "2",
        "--seed",
        "4",
        "--threads",
        "1",
        "-o",
        &t,
    ]);
    let want = percent(&trained, "validation top-1");
    let got = stretch_ok(&["evaluate", &t, "--dataset", "digits", "--seed", "4"]);
    assert_eq!(
        percent(&got, "top-1"),
        want,
        "train said:\n{trained}\nevaluate said:\n{got}"
    );
    assert!(got.contains("recorded in the model"), "{got}");
    assert!(got.contains("over 359 validation images"), "{got}");

    let torch = dir.join("torch");
    stretch_ok(&["export", &t, "--format", "torch", "-o", &arg(&torch)]);
    let w = std::fs::read(torch.join("weights.safetensors")).expect("weights");
    let mut w = torch_io::safetensors::read(&w, "w").expect("safetensors");
    w.metadata.insert("stretch.input_mean".into(), "0.5,0.5,0.5".into());
    w.metadata.insert("stretch.input_std".into(), "0.25,0.25,0.25".into());
    let file = dir.join("renorm.safetensors");
    std::fs::write(&file, torch_io::safetensors::write(&w.tensors, &w.metadata)).expect("write");
    let renorm = arg(&dir.join("renorm.onnx"));
    stretch_ok(&["import-weights", &t, "--from", &arg(&file), "-o", &renorm]);
    let other = stretch_ok(&["evaluate", &renorm, "--dataset", "digits", "--seed", "4"]);
    assert!(
        other.contains("mean [0.5, 0.5, 0.5], std [0.25, 0.25, 0.25]"),
        "{other}"
    );

    let fresh = stretch_ok(&["evaluate", &m, "--dataset", "digits", "--seed", "4"]);
    assert!(fresh.contains("none recorded in the model"), "{fresh}");

    let m7 = arg(&dir.join("m7.onnx"));
    stretch_ok(&["zoo", "resnet-mini", "--input-size", "16", "--classes", "7", "-o", &m7]);
    let out = stretch(&["evaluate", &m7, "--dataset", "digits"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("m7.onnx outputs 7 scores per image") && err.contains("10 classes"),
        "{err}"
    );
}
