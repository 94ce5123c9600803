//! `stretch export`: a deployment bundle of a branched model.

use crate::model_args::ModelArgs;
use anyhow::{Context, Result};
use predictor::DeviceProfile;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Write a deployment bundle: one model file per processor subgraph.
///
/// Cuts the model into the subgraphs the runtime would run (by the
/// `processor` annotations of `stretch branch`/`stretch stretch`, quantized
/// or not) and writes into DIR: `sgNN-PROCESSOR.onnx` per subgraph (and
/// `.ort`, onnxruntime's mobile format, when its Python tools are found),
/// `bundle.json` (schema stretch.bundle/2: the device's processors with
/// kind, precision, the onnxruntime execution provider each maps to on a
/// phone and a pinning hint; each subgraph's file, processor, input and
/// output tensors, the subgraphs it waits for and whether it is a meeting
/// point; the model's inputs and outputs; the SHA-256 of every file),
/// reference inputs and the outputs tract computes for them on the whole
/// model (`reference-*.npy`), and `required_operators.config` for a
/// reduced onnxruntime build. `stretch-run DIR --check` runs it.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,

    /// Device profile whose processors the model's annotations name.
    #[arg(long, value_name = "PROFILE.toml")]
    pub device: PathBuf,

    /// Processor for nodes without a `processor` annotation (default: the
    /// device's first CPU).
    #[arg(long)]
    pub processor: Option<String>,

    /// Reference inputs (.npy, f32), one per model input (default: uniform
    /// in [-1, 1) from a fixed seed).
    #[arg(long = "input", value_name = "X.npy")]
    pub inputs: Vec<PathBuf>,

    /// Per-channel mean a caller subtracts from pixel values in [0, 1]
    /// before the model's input, written to the manifest with --std
    /// (default: what `stretch train` recorded in the model, if anything).
    #[arg(long, value_delimiter = ',', requires = "std", value_name = "M,M,M")]
    pub mean: Vec<f32>,

    /// Per-channel divisor applied after the mean (with --mean).
    #[arg(long, value_delimiter = ',', requires = "mean", value_name = "S,S,S")]
    pub std: Vec<f32>,

    /// Do not convert the subgraph files to onnxruntime's .ort format.
    #[arg(long)]
    pub no_ort: bool,

    /// The bundle directory: new or empty, or with --force a bundle to
    /// replace. The bundle is written beside it and moved into place when
    /// complete; a failed export leaves nothing.
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,

    /// Replace the bundle already in DIR (a directory holding anything but
    /// a bundle is never replaced).
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: Args) -> Result<()> {
    let graph = args.model.load_runnable()?;
    let device = DeviceProfile::load(&args.device).with_context(|| format!("device {}", args.device.display()))?;
    let default = match &args.processor {
        Some(p) => p.clone(),
        None => device
            .processors
            .iter()
            .find(|(_, p)| p.kind == predictor::profile::ProcessorKind::Cpu)
            .or_else(|| device.processors.iter().next())
            .map(|(n, _)| n.clone())
            .context("the device profile has no processors")?,
    };
    let inputs = if args.inputs.is_empty() {
        None
    } else {
        let mut v = Vec::new();
        for p in &args.inputs {
            let a = scheduler_rt::npy::read(p)?;
            v.push(graph_ir::Tensor::from_f32(a.shape, &a.data));
        }
        Some(v)
    };
    let options = bundle::Options {
        device: &device,
        default_processor: &default,
        inputs,
        normalisation: normalisation(&args, &graph)?,
    };
    let label = args.model.model.display().to_string();
    let staging = bundle::Staging::new(&args.out, args.force)?;
    let dir = staging.path();
    let mut manifest = bundle::export(&graph, dir, &options).with_context(|| format!("exporting {label}"))?;
    if !args.no_ort {
        match python() {
            Some(py) => {
                to_ort(&py, dir, &mut manifest)?;
                bundle::save(&manifest, dir)?;
            }
            None => println!(
                "note: onnxruntime's Python tools not found (.venv/bin/python; scripts/setup.sh installs them): no .ort files"
            ),
        }
    }
    staging.commit()?;
    for r in &manifest.rewrites {
        println!("rewrote {r}");
    }
    for w in &manifest.warnings {
        eprintln!("warning: {w}");
    }
    for s in &manifest.subgraphs {
        println!(
            "{:8} {:6} {:>3} in {:>3} out {}{}",
            s.name,
            s.processor,
            s.inputs.len(),
            s.outputs.len(),
            s.model.file,
            if s.meeting_point { "  (meeting point)" } else { "" }
        );
    }
    println!(
        "wrote {}: {} subgraphs on {} for {}, reference outputs by {}",
        args.out.join(bundle::MANIFEST).display(),
        manifest.subgraphs.len(),
        manifest
            .processors
            .iter()
            .map(|p| format!("{}[{}]", p.name, p.precision))
            .collect::<Vec<_>>()
            .join(", "),
        manifest.device,
        manifest.reference.computed_by
    );
    Ok(())
}

/// The manifest's input normalisation: --mean/--std, else the model's
/// training metadata; checked against the first input's channels.
fn normalisation(args: &Args, g: &graph_ir::Graph) -> Result<Option<bundle::Normalisation>> {
    let (mean, std, from) = match (args.mean.is_empty(), g.input_normalisation()) {
        (false, _) => (args.mean.clone(), args.std.clone(), "--mean/--std"),
        (true, Some((m, s))) => (m, s, "the model's metadata stretch.input_mean/stretch.input_std"),
        (true, None) => {
            println!("input normalisation: none recorded in the model and no --mean/--std; the manifest leaves it out");
            return Ok(None);
        }
    };
    let channels = g
        .inputs()
        .first()
        .and_then(|id| g.node(*id).outputs[0].shape.get(1).copied())
        .context("the model has no input with a channel dimension to normalise")?;
    if mean.len() != channels || std.len() != channels {
        anyhow::bail!(
            "input normalisation from {from} has {} mean and {} std values; the model's input has {channels} channels",
            mean.len(),
            std.len()
        );
    }
    if let Some(bad) = std
        .iter()
        .chain(&mean)
        .find(|v| !v.is_finite())
        .or(std.iter().find(|v| **v <= 0.0))
    {
        anyhow::bail!(
            "input normalisation from {from}: {bad} is not a usable value (std must be positive, both finite)"
        );
    }
    println!("input normalisation from {from}: mean {mean:?}, std {std:?}");
    Ok(Some(bundle::Normalisation { mean, std }))
}

/// The project's Python with onnxruntime (`.venv/bin/python` above the
/// working directory or the source tree).
fn python() -> Option<PathBuf> {
    engine::search_roots()
        .into_iter()
        .map(|r| r.join(".venv/bin/python"))
        .find(|p| p.is_file())
}

/// Converts every subgraph file to `.ort` with onnxruntime's tool (one
/// call for the directory, optimisations fixed at conversion) and takes
/// its required-operators list (of the converted, fused models) in place
/// of the ONNX-level one.
fn to_ort(py: &Path, dir: &Path, m: &mut bundle::Manifest) -> Result<()> {
    let ort_dir = dir.join("ort");
    if ort_dir.exists() {
        std::fs::remove_dir_all(&ort_dir).with_context(|| format!("cannot clear {}", ort_dir.display()))?;
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
        .with_context(|| format!("cannot run {}", py.display()))?;
    let failed = |what: String| {
        anyhow::anyhow!(
            "onnxruntime's .ort conversion in {} failed ({what}): {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("no message")
        )
    };
    if !out.status.success() {
        return Err(failed(format!("exit status {}", out.status)));
    }
    for s in &mut m.subgraphs {
        let file = format!("ort/{}", s.model.file.replace(".onnx", ".ort"));
        if !dir.join(&file).is_file() {
            return Err(failed(format!("no {file}")));
        }
        s.ort_model = Some(bundle::FileRef::of(dir, &file)?);
    }
    let config = ort_dir.join("required_operators.config");
    if config.is_file() {
        let target = dir.join(&m.required_operators.file);
        let text = std::fs::read_to_string(&config).with_context(|| format!("cannot read {}", config.display()))?;
        std::fs::write(&target, relative_paths(&text, dir))
            .with_context(|| format!("cannot write {}", target.display()))?;
        std::fs::remove_file(&config).with_context(|| format!("cannot remove {}", config.display()))?;
        m.required_operators = bundle::FileRef::of(dir, &m.required_operators.file)?;
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
