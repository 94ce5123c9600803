//! onnxruntime's mobile format: each subgraph file converted to `.ort` by
//! onnxruntime's own Python tool, and its required-operators list (of the
//! converted, fused models) in place of the ONNX-level one.

use crate::error::BundleError;
use crate::manifest::{FileRef, Manifest};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The project's Python with onnxruntime (`.venv/bin/python` above the
/// working directory or the source tree), if there is one.
pub fn python() -> Option<PathBuf> {
    engine::search_roots()
        .into_iter()
        .map(|r| r.join(".venv/bin/python"))
        .find(|p| p.is_file())
}

/// Converts every subgraph file of the bundle being written in `dir` to
/// `ort/*.ort` with `py`'s onnxruntime (one call for the directory,
/// optimisations fixed at conversion), names them in `m` and replaces
/// `m`'s required-operators list by the tool's.
pub fn convert(py: &Path, dir: &Path, m: &mut Manifest) -> Result<(), BundleError> {
    let ort_dir = dir.join("ort");
    if ort_dir.exists() {
        std::fs::remove_dir_all(&ort_dir).map_err(|e| BundleError::io("clear", &ort_dir, e))?;
    }
    let out = Command::new(py)
        .args([
            "-m",
            "onnxruntime.tools.convert_onnx_models_to_ort",
            "--optimization_style",
            "Fixed",
            "--output_dir",
        ])
        .arg(&ort_dir)
        .arg(dir)
        .output()
        .map_err(|e| BundleError::io("run", py, e))?;
    let failed = |what: String| BundleError::OrtConversion {
        dir: dir.to_path_buf(),
        what,
        message: String::from_utf8_lossy(&out.stderr)
            .lines()
            .last()
            .unwrap_or("no message")
            .to_string(),
    };
    if !out.status.success() {
        return Err(failed(format!("exit status {}", out.status)));
    }
    for s in &mut m.subgraphs {
        let file = format!("ort/{}", s.model.file.replace(".onnx", ".ort"));
        if !dir.join(&file).is_file() {
            return Err(failed(format!("no {file}")));
        }
        s.ort_model = Some(FileRef::of(dir, &file)?);
    }
    let config = ort_dir.join("required_operators.config");
    if config.is_file() {
        let target = dir.join(&m.required_operators.file);
        let text = std::fs::read_to_string(&config).map_err(|e| BundleError::io("read", &config, e))?;
        std::fs::write(&target, relative_paths(&text, dir)).map_err(|e| BundleError::io("write", &target, e))?;
        std::fs::remove_file(&config).map_err(|e| BundleError::io("remove", &config, e))?;
        m.required_operators = FileRef::of(dir, &m.required_operators.file)?;
    }
    Ok(())
}

/// `text` with every path under `dir` (as given and resolved) written
/// relative to it: the bundle names no path of the machine it was made on.
fn relative_paths(text: &str, dir: &Path) -> String {
    let mut out = text.to_string();
    let resolved = std::fs::canonicalize(dir).ok();
    for d in resolved.iter().map(|p| p.as_path()).chain([dir]) {
        out = out.replace(&format!("{}/", d.display()), "");
    }
    out
}
