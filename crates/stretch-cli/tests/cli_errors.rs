//! `stretch inspect` on a file that is missing or not ONNX exits non-zero with
//! one `error:` line naming the file, and never panics.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory under the system temp dir for this test.
fn scratch_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stretch-cli-errors-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `stretch inspect path`, checks it failed cleanly and returns its stderr.
fn inspect_fails(path: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_stretch"))
        .arg("inspect")
        .arg(path)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success(), "inspect succeeded on {}", path.display());
    assert!(
        out.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    stderr
}

#[test]
fn inspect_missing_file() {
    let dir = scratch_dir("missing");
    let path = dir.join("no-such-model.onnx");
    let stderr = inspect_fails(&path);
    assert!(stderr.contains(&format!("cannot read {}", path.display())), "{stderr}");
    assert_eq!(stderr.matches("os error").count(), 1, "I/O error repeated: {stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn inspect_text_file() {
    let dir = scratch_dir("text");
    let path = dir.join("notes.onnx");
    std::fs::write(&path, "these are notes, not a neural network\n").unwrap();
    let stderr = inspect_fails(&path);
    assert!(stderr.contains("not a valid ONNX model"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// `error`'s chain as anyhow's `{:#}` prints it.
fn chain(error: impl std::error::Error + Send + Sync + 'static) -> String {
    format!("{:#}", anyhow::Error::from(error))
}

#[test]
fn a_library_error_prints_its_cause_once() {
    let dir = scratch_dir("cause-once");
    let missing = dir.join("absent");
    let texts = [
        chain(predictor::DeviceProfile::load_exact(&missing).unwrap_err()),
        chain(predictor::forest::Forest::load(&missing).unwrap_err()),
        chain(predictor::phone::load_blocks(&missing).unwrap_err()),
        chain(predictor::fit::KernelRegressors::load(&missing).unwrap_err()),
    ];
    for text in texts {
        assert!(text.contains(&missing.display().to_string()), "{text}");
        assert_eq!(text.matches("os error").count(), 1, "cause repeated: {text}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_engine_that_cannot_load_is_named_once() {
    let dir = scratch_dir("ort-missing");
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/ops/relu_basic_opset14.onnx");
    let g = graph_ir::onnx::import_file(&model, &Default::default()).unwrap();
    let shape = g.fact(g.inputs()[0].out(0)).unwrap().shape.clone();
    let data = vec![0.5; shape.iter().product()];
    let x = dir.join("x.npy");
    scheduler_rt::npy::write(&x, &scheduler_rt::npy::Array { shape, data }).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stretch"))
        .env("ORT_DYLIB_PATH", dir.join("libonnxruntime.so"))
        .args([
            "run",
            &model.display().to_string(),
            "--processor",
            "cpu0=inline,engine=ort",
        ])
        .args(["--input", &x.display().to_string()])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("ORT_DYLIB_PATH is set to"), "{stderr}");
    assert_eq!(stderr.matches("is not available").count(), 1, "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}
