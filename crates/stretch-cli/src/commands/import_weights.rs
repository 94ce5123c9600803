//! `stretch import-weights`: a state dict trained in PyTorch back into the
//! branched model.

use anyhow::{Context, Result, bail};
use std::path::PathBuf;

/// Write weights trained in PyTorch into a model, keeping its annotations.
///
/// MODEL is the ONNX file `stretch export --format torch` was given (a
/// branched model or an original); FILE is a safetensors state dict of the
/// module it wrote (`weights.safetensors` after training, keys as in
/// `stretch-torch.json`; DDP's `module.` prefix is accepted; BatchNorm
/// counters are ignored). Every node, name and annotation of MODEL is kept,
/// so `quantize`, `export`, `bench` and `run` take the result as they take
/// a `stretch train` result. A missing key, a key the model has not,
/// another shape, a NaN, a truncated file or weights of another model
/// (the file's recorded structure fingerprint) stop it, naming the key or
/// file. The input normalisation the weights were trained with, when the
/// file's metadata records it (`stretch.input_mean`, `stretch.input_std`,
/// as `scripts/torch/train.py` writes), replaces the model's. A
/// `torch.save` checkpoint (.pt) is converted first by
/// `scripts/torch/to_safetensors.py`, which needs torch.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model the weights are for (ONNX).
    #[arg(value_name = "MODEL.onnx")]
    pub model: PathBuf,

    /// The trained state dict (.safetensors).
    #[arg(long = "from", value_name = "FILE.safetensors")]
    pub from: PathBuf,

    /// Where to write the model with the trained weights.
    #[arg(short, long, value_name = "TRAINED.onnx")]
    pub output: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    let ext = args.from.extension().and_then(|e| e.to_str()).unwrap_or("");
    if matches!(ext, "pt" | "pth" | "ckpt" | "bin") {
        bail!(
            "{}: a torch.save checkpoint; convert it with `python scripts/torch/to_safetensors.py {} -o W.safetensors` (needs torch) and pass the .safetensors file",
            args.from.display(),
            args.from.display()
        );
    }
    let graph = graph_ir::onnx::import_file(&args.model, &Default::default())
        .with_context(|| format!("cannot import {}", args.model.display()))?;
    let bytes = std::fs::read(&args.from).with_context(|| format!("cannot read {}", args.from.display()))?;
    let (trained, n) = torch_io::import_weights(&graph, &bytes, &args.from.display().to_string())?;
    graph_ir::onnx::export_file(&trained, &args.output)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    let normalisation = match trained.input_normalisation() {
        Some(n) if graph.input_normalisation().as_ref() != Some(&n) => {
            format!("; input normalisation from the file: mean {:?}, std {:?}", n.0, n.1)
        }
        _ => String::new(),
    };
    println!(
        "wrote {}: {n} tensors from {} into {}, annotations kept{normalisation}",
        args.output.display(),
        args.from.display(),
        args.model.display()
    );
    Ok(())
}
