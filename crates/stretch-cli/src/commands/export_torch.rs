//! `stretch export --format torch`: a model as a PyTorch module.

use anyhow::{Context, Result, bail};
use graph_ir::Graph;
use std::path::Path;

/// The files `--format torch` writes into its directory.
pub const FILES: [&str; 3] = ["model.py", "weights.safetensors", "stretch-torch.json"];

/// Writes `graph` as `model.py`, `weights.safetensors` and
/// `stretch-torch.json` into `out` (new, empty, or with `force` holding
/// them already); each file is written beside its place and renamed into
/// it, so a failure leaves no partial file.
pub fn run(graph: &Graph, out: &Path, force: bool) -> Result<()> {
    let e = torch_io::export(graph)?;
    if out.is_dir() {
        let mut others = Vec::new();
        for entry in std::fs::read_dir(out).with_context(|| format!("cannot list {}", out.display()))? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if !force || !FILES.contains(&name.as_str()) {
                others.push(name);
            }
        }
        if !others.is_empty() {
            bail!(
                "{} is not empty ({}){}",
                out.display(),
                others.join(", "),
                if force {
                    ""
                } else {
                    "; --force replaces the files of an earlier --format torch export"
                }
            );
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let manifest = serde_json::to_vec_pretty(&e.manifest).context("the key map serialises")?;
    let contents: [&[u8]; 3] = [e.model_py.as_bytes(), &e.weights, &manifest];
    for (name, bytes) in FILES.iter().zip(contents) {
        let path = out.join(name);
        let partial = out.join(format!("{name}.partial"));
        std::fs::write(&partial, bytes).with_context(|| format!("cannot write {}", partial.display()))?;
        std::fs::rename(&partial, &path).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let keys = e.manifest["keys"].as_array().map_or(0, Vec::len);
    let groups: Vec<&str> = e.manifest["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_str())
        .collect();
    println!(
        "wrote {}: model.py (class {}, groups {}), weights.safetensors ({keys} tensors, {} bytes), stretch-torch.json (structure {})",
        out.display(),
        torch_io::CLASS,
        groups.join(", "),
        e.weights.len(),
        e.manifest["fingerprint"].as_str().unwrap_or("?")
    );
    Ok(())
}
