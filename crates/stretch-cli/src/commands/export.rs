//! `stretch export`: a deployment bundle of a branched model.

use crate::model_args::ModelArgs;
use anyhow::{Context, Result};
use predictor::DeviceProfile;
use std::path::{Path, PathBuf};

/// Write a deployment bundle: one model file per processor subgraph.
///
/// Cuts the model into the subgraphs the runtime would run (by the
/// `processor` annotations of `stretch branch`/`stretch stretch`, quantized
/// or not) and writes into DIR: `sgNN-PROCESSOR.onnx` per subgraph (and
/// `.ort`, onnxruntime's mobile format, when its Python tools are found;
/// `sgNN-PROCESSOR.tflite` with `--format onnx,tflite`),
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

    /// Device profile whose processors the model's annotations name
    /// (required for a bundle; not read by --format torch).
    #[arg(long, value_name = "PROFILE.toml")]
    pub device: Option<PathBuf>,

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

    /// File formats per subgraph, comma-separated: `onnx` (always
    /// written: the reference every other format is checked against) and
    /// `tflite` (LiteRT, NHWC, at each processor's precision: int8
    /// full-integer, float16 weights, or float32; the manifest names the
    /// LiteRT delegate of each processor). A node with no LiteRT form
    /// fails the export, naming it. `torch` alone writes no bundle but the
    /// whole model as a PyTorch module to train in one's own pipeline:
    /// `model.py` (imports only torch; a submodule per stem, stage branch,
    /// merge and head), `weights.safetensors` and `stretch-torch.json`
    /// (structure fingerprint, key ↔ initializer map, input shape and
    /// normalisation); `stretch import-weights` brings trained weights back.
    #[arg(long, value_delimiter = ',', default_value = "onnx", value_parser = ["onnx", "tflite", "torch"], value_name = "onnx[,tflite]|torch")]
    pub format: Vec<String>,

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
    if args.format.iter().any(|f| f == "torch") {
        if args.format.len() > 1 {
            anyhow::bail!("--format torch writes a PyTorch module, not a bundle: give it alone");
        }
        let graph = args.model.load_runnable()?;
        return super::export_torch::run(&graph, &args.out, args.force);
    }
    let Some(device_path) = &args.device else {
        anyhow::bail!("--device PROFILE.toml is required to write a bundle (--format onnx[,tflite])");
    };
    let graph = args.model.load_runnable()?;
    let device = DeviceProfile::load(device_path).with_context(|| format!("device {}", device_path.display()))?;
    let default = match &args.processor {
        Some(p) => p.clone(),
        None => bundle::default_processor(&device).context("the device profile has no processors")?,
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
        ort: !args.no_ort,
        tflite: args.format.iter().any(|f| f == "tflite"),
    };
    let label = args.model.model.display().to_string();
    let manifest = bundle::write(&graph, &label, &args.out, args.force, &options)?;
    if options.ort && manifest.subgraphs.iter().all(|s| s.ort_model.is_none()) {
        println!(
            "note: onnxruntime's Python tools not found (.venv/bin/python; scripts/setup.sh installs them): no .ort files"
        );
    }
    print_summary(&args.out, &manifest);
    Ok(())
}

fn print_summary(out: &Path, manifest: &bundle::Manifest) {
    for r in &manifest.rewrites {
        println!("rewrote {r}");
    }
    for w in &manifest.warnings {
        eprintln!("warning: {w}");
    }
    for s in &manifest.subgraphs {
        println!(
            "{:8} {:6} {:>3} in {:>3} out {}{}{}",
            s.name,
            s.processor,
            s.inputs.len(),
            s.outputs.len(),
            s.model.file,
            s.tflite_model
                .as_ref()
                .map(|t| format!(" {}", t.model.file))
                .unwrap_or_default(),
            if s.meeting_point { "  (meeting point)" } else { "" }
        );
        for note in s.tflite_model.iter().flat_map(|t| &t.notes) {
            println!("         note: {note}");
        }
    }
    println!(
        "wrote {}: {} subgraphs on {} for {}, reference outputs by {}",
        out.join(bundle::MANIFEST).display(),
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
    let n = bundle::normalisation(g, mean, std, from)?;
    println!("input normalisation from {from}: mean {:?}, std {:?}", n.mean, n.std);
    Ok(Some(n))
}
