//! Where the project's Python environment (`.venv`) is looked for.

use std::path::{Path, PathBuf};

/// The directories searched, in order, for files the set-up installs under
/// the repository (the `.venv` with onnxruntime): the current directory,
/// each of its ancestors, then the repository this crate was built from.
pub fn search_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = std::env::current_dir()
        .map(|d| d.ancestors().map(Path::to_path_buf).collect())
        .unwrap_or_default();
    roots.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    roots
}
