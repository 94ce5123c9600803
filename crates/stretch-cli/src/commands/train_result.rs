//! What `stretch train --json` writes (schema "stretch.train/1"): the run's
//! figures as `compare-accuracy` reports a row, and with `--precision
//! profile` the accuracy of the quantized files as written.

use std::path::Path;

use anyhow::{Context, Result};
use graph_ir::Graph;
use serde::{Deserialize, Serialize};
use training::data::Dataset;
use training::{EpochMetrics, Tally};

use crate::commands::qat::{Calibrated, evaluate_file};

pub const SCHEMA: &str = "stretch.train/1";

/// One `stretch train` run.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct TrainResult {
    pub schema: String,
    /// The model file trained.
    pub model: String,
    /// The file written.
    pub out: String,
    pub seed: u64,
    /// Epochs trained in all (a resumed run counts the earlier ones).
    pub epochs: usize,
    pub params: u64,
    pub macs: u64,
    /// Validation top-1 and top-5 of the last epoch (percent); with
    /// `--precision profile`, of the fake-quantized training model.
    pub top1: f64,
    pub top5: f64,
    pub best_top1: f64,
    /// Wall-clock seconds of training in this run.
    pub train_seconds: f64,
    pub file_bytes: u64,
    /// With `--precision profile`: the quantized files, each run by tract on
    /// the validation split.
    pub quantized: Option<QuantizedScores>,
}

/// The post-training quantized file (`--ptq`) and the fine-tuned one (OUT).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct QuantizedScores {
    pub ptq: Option<FileScore>,
    pub qat: FileScore,
}

/// A model file and its validation accuracy as written.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct FileScore {
    pub file: String,
    pub top1: f64,
    pub top5: f64,
    pub file_bytes: u64,
}

impl FileScore {
    pub fn new(file: &Path, tally: &Tally) -> FileScore {
        FileScore {
            file: file.display().to_string(),
            top1: tally.top1(),
            top5: tally.top5(),
            file_bytes: file_bytes(file),
        }
    }
}

pub fn file_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// The result of a run from its history, before quantized scores.
pub fn from_history(
    model: &Path,
    out: &Path,
    seed: u64,
    cost: (u64, u64),
    history: &[EpochMetrics],
    seconds: f64,
) -> Result<TrainResult> {
    let last = history.last().context("no epoch was trained")?;
    Ok(TrainResult {
        schema: SCHEMA.into(),
        model: model.display().to_string(),
        out: out.display().to_string(),
        seed,
        epochs: last.epoch,
        params: cost.0,
        macs: cost.1,
        top1: last.val_top1,
        top5: last.val_top5,
        best_top1: history.iter().map(|m| m.val_top1).fold(0.0, f64::max),
        train_seconds: seconds,
        file_bytes: file_bytes(out),
        quantized: None,
    })
}

pub fn write(path: &Path, result: &TrainResult) -> Result<()> {
    let text = serde_json::to_string_pretty(result)? + "\n";
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Reads a result written by [`write`], naming the file at fault.
pub fn read(path: &Path) -> Result<TrainResult> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let r: TrainResult = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a `stretch train --json` result", path.display()))?;
    anyhow::ensure!(
        r.schema == SCHEMA,
        "{}: schema `{}`, this build reads `{SCHEMA}`",
        path.display(),
        r.schema
    );
    Ok(r)
}

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
