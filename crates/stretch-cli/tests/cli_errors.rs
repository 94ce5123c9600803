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
    assert!(stderr.contains("cannot read file"), "{stderr}");
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
