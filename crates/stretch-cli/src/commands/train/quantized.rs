//! The quantized files `stretch train --precision profile` writes: the
//! post-training quantized model (`--ptq`) and the fine-tuned one, each
//! with its validation accuracy as written.

use std::path::Path;

use anyhow::{Context, Result};
use graph_ir::Graph;
use training::FileScore;
use training::data::Dataset;

use crate::commands::qat::{Calibrated, evaluate_file};

/// The model as given, quantized at `cal`'s ranges (post-training
/// quantization), written to `path`; with `score`, its validation accuracy
/// as a file.
pub fn post_training(
    cal: &Calibrated,
    graph: &Graph,
    path: &Path,
    set: &dyn Dataset,
    score: bool,
) -> Result<Option<FileScore>> {
    let ptq = cal.quantized(graph)?;
    graph_ir::onnx::export_file(&ptq, path).with_context(|| format!("cannot write {}", path.display()))?;
    println!("wrote the post-training quantized model {}", path.display());
    score.then(|| score_file(cal, &ptq, path, set)).transpose()
}

/// The validation accuracy of `g`, written as `path`, run by tract on
/// `cal`'s validation split.
fn score_file(cal: &Calibrated, g: &Graph, path: &Path, set: &dyn Dataset) -> Result<FileScore> {
    let tally = evaluate_file(g, set, &cal.split.val, &cal.transform)?;
    println!(
        "{} as written: validation top-1 {:.2}%, top-5 {:.2}%",
        path.display(),
        tally.top1(),
        tally.top5()
    );
    Ok(FileScore::new(path, &tally))
}

/// The fine-tuned `graph` written as the quantized model `out` (the float
/// model beside it as `.fp32.onnx`); with `score`, the quantized file's
/// validation accuracy as written.
pub fn write_fine_tuned(
    cal: &Calibrated,
    graph: &Graph,
    out: &Path,
    set: &dyn Dataset,
    precision: &crate::commands::qat::PrecisionArgs,
    score: bool,
) -> Result<Option<FileScore>> {
    let fp32 = crate::recipe_args::beside(out, ".fp32.onnx");
    let quantized = cal.quantized(graph)?;
    graph_ir::onnx::export_file(graph, &fp32).with_context(|| format!("cannot write {}", fp32.display()))?;
    graph_ir::onnx::export_file(&quantized, out).with_context(|| format!("cannot write {}", out.display()))?;
    let scored = score.then(|| score_file(cal, &quantized, out, set)).transpose()?;
    println!(
        "fine-tuned at precisions {} ({} batch norms folded, {} activations calibrated on {} training images with {})",
        cal.prepared.map.describe(),
        cal.prepared.batch_norms,
        cal.ranges.len(),
        precision.calibration_samples,
        precision.calibration_method
    );
    println!("wrote the fine-tuned float model {}", fp32.display());
    Ok(scored)
}
