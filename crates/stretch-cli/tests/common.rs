//! Helpers shared by the CLI integration tests: paths, the `stretch` binary
//! and the Python reference checker.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `p` as a command-line argument.
pub fn arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory, removed when it goes out of scope unless the test
/// is failing (its files are then left for a look).
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A fresh scratch directory for one test; bind it (`let dir = scratch(..)`)
/// for as long as its files are used.
pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("stretch-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    Scratch(dir)
}

/// Runs `stretch` with arguments.
pub fn stretch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stretch"))
        .args(args)
        .output()
        .expect("run stretch")
}

/// Runs `stretch` and fails the test, with its stderr, unless it succeeds.
pub fn stretch_ok(args: &[&str]) -> String {
    succeeded("stretch", args, stretch(args))
}

/// `out`'s stdout; fails the test, with its stderr, unless `program` succeeded.
fn succeeded(program: &str, args: &[&str], out: Output) -> String {
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The Python interpreter with onnx and onnxruntime: `$STRETCH_PYTHON`, else the
/// project's `.venv` made by scripts/setup.sh, else `python3`.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("STRETCH_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = repo().join(".venv/bin/python");
    if venv.exists() { venv } else { PathBuf::from("python3") }
}

/// Runs `scripts/check_litert.py` on `bundles` (with `extra` options) and
/// fails the test, with its report, unless every bundle passes; returns
/// the report.
pub fn check_litert(bundles: &[PathBuf], extra: &[&str]) -> String {
    let out = Command::new(python())
        .arg(repo().join("scripts/check_litert.py"))
        .args(bundles)
        .args(extra)
        .output()
        .expect("run python (install the reference tools with scripts/setup.sh)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "LiteRT files differ from their ONNX subgraphs:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Runs `scripts/check_onnx.py` and fails the test unless it succeeds.
pub fn reference(args: &[&str]) -> String {
    reference_script("check_onnx.py", args)
}

/// Runs `scripts/SCRIPT` (a reference checker) and fails the test unless
/// it succeeds.
pub fn reference_script(script: &str, args: &[&str]) -> String {
    let out = Command::new(python())
        .arg(repo().join("scripts").join(script))
        .args(args)
        .output()
        .expect("run python (install the reference tools with scripts/setup.sh)");
    assert!(
        out.status.success(),
        "{script} {args:?} failed (reference tools come from scripts/setup.sh):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// All fixture models, sorted.
pub fn fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join("fixtures/models"))
        .expect("fixtures/models exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    v.sort();
    assert_eq!(v.len(), 12, "expected the 12 torchvision fixtures");
    v
}

/// The slim runner (`crates/stretch-run`) beside the `stretch` binary:
/// `cargo test --workspace` builds it (stretch-run has integration tests
/// of its own). Run alone, these tests build it once when it is missing;
/// after changing the runner, build it (or test the workspace) again.
pub fn stretch_run_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let bin = Path::new(env!("CARGO_BIN_EXE_stretch")).with_file_name("stretch-run");
        if !bin.is_file() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let out = Command::new(cargo)
                .args(["build", "-q", "-p", "stretch-run"])
                .current_dir(repo())
                .output()
                .expect("run cargo");
            assert!(
                out.status.success(),
                "building stretch-run failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        bin
    })
    .clone()
}

/// Runs `stretch-run` with arguments.
pub fn stretch_run(args: &[&str]) -> Output {
    Command::new(stretch_run_bin())
        .args(args)
        .output()
        .expect("run stretch-run")
}

/// Runs `stretch-run` and fails the test, with its stderr, unless it succeeds.
pub fn stretch_run_ok(args: &[&str]) -> String {
    succeeded("stretch-run", args, stretch_run(args))
}

/// Two identical int8 cores with a cheap link, so small models branch.
pub const INT8_PAIR: &str = r#"
name = "int8-pair"
description = "two int8 cores (test)"
[processors.cpu0]
kind = "cpu"
precision = "int8"
speedup.int8 = { value = 2.0, source = "test" }
peak_gflops = { value = 20.0, source = "test" }
bandwidth_gbs = { value = 10.0, source = "test" }
kernel_overhead_us = { value = 5.0, source = "test" }
efficiency = { value = 1.0, source = "test" }
[processors.cpu1]
kind = "cpu"
precision = "int8"
speedup.int8 = { value = 2.0, source = "test" }
peak_gflops = { value = 20.0, source = "test" }
bandwidth_gbs = { value = 10.0, source = "test" }
kernel_overhead_us = { value = 5.0, source = "test" }
efficiency = { value = 1.0, source = "test" }
[[links]]
between = ["cpu0", "cpu1"]
latency_us = { value = 20.0, source = "test" }
bandwidth_gbs = { value = 10.0, source = "test" }
"#;

/// A copy of the files directly in `from` (a bundle) into `to`.
pub fn copy_files(from: &Path, to: &Path) -> PathBuf {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
    to.to_path_buf()
}

/// Rewrites `dir/bundle.json` through `f`.
pub fn edit_manifest(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("bundle.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}
