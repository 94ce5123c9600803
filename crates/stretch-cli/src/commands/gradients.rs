//! `stretch gradients`: one training step's loss gradients on a given batch,
//! written for comparison with another framework's.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use torch_io::safetensors::{self, Data, Entry};
use training::Backend;

/// Write the gradients `stretch train` takes on one batch.
///
/// BATCH is a safetensors file with `images` (finite floats, `[n, c, h, w]`, already
/// normalised: no transform is applied) and `labels` (int64, `[n]`). The
/// model runs in training mode (BatchNorm on the batch's statistics), the
/// loss is the batch's mean cross entropy, and burn's autodiff takes the
/// gradient of every learnable constant, as one step of `stretch train`
/// does before weight decay and momentum. The output holds one float32
/// tensor per learnable initializer, keyed by its name in MODEL
/// (`stretch-torch.json` maps those names to PyTorch state-dict keys), and
/// the loss in the metadata key `stretch.loss`.
/// `scripts/torch/check_gradients.py` compares them with PyTorch's.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model (ONNX, an original or a branched model).
    #[arg(value_name = "MODEL.onnx")]
    pub model: PathBuf,

    /// The batch: `images` and `labels` (.safetensors).
    #[arg(long, value_name = "BATCH.safetensors")]
    pub batch: PathBuf,

    /// Where to write the gradients (.safetensors).
    #[arg(short, long, value_name = "GRADS.safetensors")]
    pub output: PathBuf,

    /// Backend: `flex` (CPU), `cuda[:INDEX]` or `tch[:cpu|:cuda[:INDEX]]`, as
    /// for `stretch train`.
    #[arg(long, default_value = "flex")]
    pub backend: Backend,

    /// Threads for burn's CPU kernels (0: all cores).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
}

pub fn run(args: Args) -> Result<()> {
    let file = args.batch.display().to_string();
    let bytes = std::fs::read(&args.batch).with_context(|| format!("cannot read {file}"))?;
    let mut batch = safetensors::read(&bytes, &file)?;
    let images = match batch.tensors.remove("images") {
        Some(Entry {
            shape,
            data: Data::F32(v),
        }) if shape.len() == 4 => v,
        Some(e) => bail!(
            "{file}: `images` must be a float tensor [n, c, h, w]; it has shape {:?}",
            e.shape
        ),
        None => bail!("{file}: no tensor `images`"),
    };
    if let Some(i) = images.iter().position(|v| !v.is_finite()) {
        bail!("{file}: `images` holds {} at element {i}", images[i]);
    }
    let labels = match batch.tensors.remove("labels") {
        Some(Entry {
            shape,
            data: Data::I64(v),
        }) if shape.len() == 1 => v,
        Some(e) => bail!(
            "{file}: `labels` must be an int64 tensor [n]; it has shape {:?}",
            e.shape
        ),
        None => bail!("{file}: no tensor `labels`"),
    };
    let graph = graph_ir::onnx::import_file(&args.model, &Default::default())
        .with_context(|| format!("cannot import {}", args.model.display()))?;
    let backend = args.backend;
    let out = training::with_threads(args.threads, || {
        training::batch_gradients(&graph, images, &labels, backend)
    })
    .with_context(|| format!("{}: gradients on {file}", args.model.display()))?;
    let tensors: BTreeMap<String, Entry> = out
        .grads
        .into_iter()
        .map(|(name, shape, v)| {
            (
                name,
                Entry {
                    shape,
                    data: Data::F32(v),
                },
            )
        })
        .collect();
    let metadata = BTreeMap::from([("stretch.loss".to_string(), format!("{:e}", out.loss))]);
    std::fs::write(&args.output, safetensors::write(&tensors, &metadata))
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    println!(
        "wrote {}: gradients of {} tensors, loss {:.6} over {} images",
        args.output.display(),
        tensors.len(),
        out.loss,
        labels.len()
    );
    Ok(())
}
