//! `stretch evaluate`: a model's top-1 and top-5 on a dataset's validation
//! images, as `stretch train` validates.

use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use training::data::{self, Augment, Dataset, DatasetSpec, Transform, split_of};
use training::{Backend, Inference, Tally, cross_entropy};

use crate::progress;

/// Measure a model's accuracy on a dataset's validation images.
///
/// The validation images are those `stretch train` validates on: the
/// dataset's own test split (MNIST, Fashion-MNIST, CIFAR-10), else the
/// seeded `--val-fraction` split. Images are resized to the model's input
/// and normalised with the mean and standard deviation recorded in the
/// model (what `stretch train` and `stretch import-weights` write); a model
/// without them is normalised with the training split's, as `stretch train`
/// would, and the output says so. BatchNorm uses its running statistics.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model (ONNX).
    #[arg(value_name = "MODEL.onnx")]
    pub model: PathBuf,

    /// Dataset, as `stretch train --dataset` takes it: `digits`,
    /// `digits:FILE.csv.gz`, `cifar10:DIR|FILE.bin`, `mnist:DIR` or
    /// `folder:DIR`.
    #[arg(long, value_name = "KIND[:PATH]")]
    pub dataset: DatasetSpec,

    /// Share held out for validation when the dataset has no test split.
    #[arg(long, default_value_t = 0.2)]
    pub val_fraction: f64,

    /// Seed of that split (the training run's `--seed`).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Backend: `flex` (CPU), `cuda[:INDEX]` or `tch[:cpu|:cuda[:INDEX]]`.
    #[arg(long, default_value = "flex")]
    pub backend: Backend,

    /// Threads for burn's CPU kernels (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

pub fn run(args: Args) -> Result<()> {
    let model = args.model.display().to_string();
    let graph = graph_ir::onnx::import_file(&args.model, &Default::default())
        .with_context(|| format!("cannot import {model}"))?;
    let backend = args.backend;
    let inference = Inference::new(&graph, &backend.device()).with_context(|| format!("cannot evaluate {model}"))?;
    let shape = inference.program.input_shape();
    let set = data::load(&args.dataset, [shape[1], shape[2]])?;
    if set.classes() != inference.program.classes() {
        bail!(
            "{model} outputs {} scores per image but {} has {} classes",
            inference.program.classes(),
            set.describe(),
            set.classes()
        );
    }
    let split = split_of(&set, args.val_fraction, args.seed, None);
    let mut transform = Transform::fit(&set, &split.train, shape, Augment::default())?;
    let normalisation = match graph.input_normalisation() {
        Some((mean, std)) if mean.len() == shape[0] && std.len() == shape[0] => {
            transform.mean = mean;
            transform.std = std;
            "recorded in the model"
        }
        Some((mean, std)) => bail!(
            "{model}: the recorded input normalisation has {} mean(s) and {} std(s) for a {}-channel input",
            mean.len(),
            std.len(),
            shape[0]
        ),
        None => "none recorded in the model: fitted on the training split",
    };
    let tally = training::with_threads(args.threads, || {
        tally(&set, &split.val, &transform, 256, |images, n| {
            Ok(inference.scores(images, n))
        })
    })?;
    println!(
        "{model}: top-1 {:.2}%, top-5 {:.2}%, loss {:.4} over {} validation images of {} (normalisation {normalisation}: mean {:?}, std {:?})",
        tally.top1(),
        tally.top5(),
        tally.mean_loss(),
        tally.count,
        set.describe(),
        transform.mean,
        transform.std
    );
    Ok(())
}

/// Top-1, top-5 and loss of the images `indices` of `set`, normalised by
/// `transform`, `chunk` images at a time: `score` returns the scores of
/// `n` images (`[n, C, H, W]`) as `[n, classes]`, row-major. Draws a
/// progress bar.
pub(crate) fn tally(
    set: &dyn Dataset,
    indices: &[usize],
    transform: &Transform,
    chunk: usize,
    mut score: impl FnMut(&[f32], usize) -> Result<Vec<f32>>,
) -> Result<Tally> {
    let bar = progress::bar(
        indices.len() as u64,
        "evaluating {bar:30} {pos}/{len} images [{elapsed}<{eta}]",
    );
    let mut tally = Tally::default();
    for idx in indices.chunks(chunk) {
        let images = transform.batch(set, idx, None);
        let scores = score(&images, idx.len())?;
        let labels: Vec<usize> = idx.iter().map(|&i| set.label(i)).collect();
        tally.add(&scores, &labels, cross_entropy(&scores, &labels));
        bar.inc(idx.len() as u64);
    }
    bar.finish_and_clear();
    Ok(tally)
}
