//! The rows of an accuracy comparison (`stretch compare-accuracy`, a
//! sweep's tables): one per trained model, one per quantized version of a
//! model, gaps against the original, and each model's mean and spread
//! over seeds.

use crate::result::{FileScore, ResultError, TrainResult};
use serde::Serialize;
use std::path::PathBuf;

/// One trained model of the comparison.
#[derive(Serialize, Debug)]
pub struct Row {
    pub label: String,
    pub file: String,
    pub distilled: bool,
    pub params: u64,
    pub macs: u64,
    pub top1: f64,
    pub top5: f64,
    pub best_top1: f64,
    pub gap_top1: f64,
    pub train_seconds: f64,
    pub precision: &'static str,
    pub file_bytes: u64,
    pub gap_fp32_branched: Option<f64>,
}

/// A trained model's results: its `stretch train --json` file and, when it
/// was also quantized, the quantized run's.
#[derive(Debug, Clone)]
pub struct Trained {
    pub label: String,
    /// The model file trained (or what it was made from).
    pub source: String,
    pub distilled: bool,
    pub result: PathBuf,
    pub quantized: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ComparisonError {
    #[error(transparent)]
    Result(#[from] ResultError),
    #[error("{}: no quantized scores", path.display())]
    NoQuantizedScores { path: PathBuf },
}

/// The row of a trained model.
pub fn fp32_row(t: &Trained, r: &TrainResult) -> Row {
    Row {
        label: t.label.clone(),
        file: t.source.clone(),
        distilled: t.distilled,
        params: r.params,
        macs: r.macs,
        top1: r.top1,
        top5: r.top5,
        best_top1: r.best_top1,
        gap_top1: 0.0,
        train_seconds: r.train_seconds,
        precision: "fp32",
        file_bytes: r.file_bytes,
        gap_fp32_branched: None,
    }
}

/// The row of a quantized version (`kind`: ptq or qat) of `fp32`'s model.
pub fn quantized_row(fp32: &Row, kind: &'static str, score: &FileScore, seconds: f64) -> Row {
    Row {
        label: format!("{}-{kind}", fp32.label),
        file: fp32.file.clone(),
        distilled: false,
        params: fp32.params,
        macs: fp32.macs,
        top1: score.top1,
        top5: score.top5,
        best_top1: score.top1,
        gap_top1: 0.0,
        train_seconds: seconds,
        precision: kind,
        file_bytes: score.file_bytes,
        gap_fp32_branched: Some(score.top1 - fp32.top1),
    }
}

/// The rows of one seed's models in the order given (each followed by its
/// quantized versions), gaps against the row labelled `original`.
pub fn seed_rows(models: &[Trained]) -> Result<Vec<Row>, ComparisonError> {
    let mut rows = Vec::new();
    for t in models {
        let fp32 = fp32_row(t, &TrainResult::read(&t.result)?);
        let quantized = match &t.quantized {
            Some(path) => {
                let q = TrainResult::read(path)?;
                let scores = q
                    .quantized
                    .ok_or_else(|| ComparisonError::NoQuantizedScores { path: path.clone() })?;
                let mut extra = Vec::new();
                if let Some(ptq) = &scores.ptq {
                    extra.push(quantized_row(&fp32, "ptq", ptq, 0.0));
                }
                extra.push(quantized_row(&fp32, "qat", &scores.qat, q.train_seconds));
                extra
            }
            None => Vec::new(),
        };
        rows.push(fp32);
        rows.extend(quantized);
    }
    if let Some(base) = rows.iter().find(|r| r.label == "original").map(|r| r.top1) {
        for row in rows.iter_mut().filter(|r| r.label != "original") {
            row.gap_top1 = row.top1 - base;
        }
    }
    Ok(rows)
}

/// One seed's rows.
#[derive(Serialize, Debug)]
pub struct SeedRows {
    pub seed: u64,
    pub rows: Vec<Row>,
}

/// Mean and sample standard deviation of `xs` (0 for one value).
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = if xs.len() > 1 {
        xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var.sqrt())
}

/// One model's figures over the seeds it finished at.
#[derive(Debug, Clone, PartialEq)]
pub struct OverSeeds {
    pub label: String,
    pub seeds: usize,
    /// Mean and standard deviation of validation top-1 (percent).
    pub top1: (f64, f64),
    /// Mean and standard deviation of the gap to the original (points).
    pub gap_top1: (f64, f64),
}

/// Each model's figures over `seeds`, in the order models first appear.
pub fn over_seeds(seeds: &[SeedRows]) -> Vec<OverSeeds> {
    let mut labels: Vec<&str> = Vec::new();
    for s in seeds {
        for r in &s.rows {
            if !labels.contains(&r.label.as_str()) {
                labels.push(&r.label);
            }
        }
    }
    labels
        .into_iter()
        .map(|label| {
            let rows: Vec<&Row> = seeds
                .iter()
                .filter_map(|s| s.rows.iter().find(|r| r.label == label))
                .collect();
            OverSeeds {
                label: label.to_string(),
                seeds: rows.len(),
                top1: mean_sd(&rows.iter().map(|r| r.top1).collect::<Vec<_>>()),
                gap_top1: mean_sd(&rows.iter().map(|r| r.gap_top1).collect::<Vec<_>>()),
            }
        })
        .collect()
}

/// A job that failed, and why.
#[derive(Serialize, Debug)]
pub struct Failed<'a> {
    pub job: &'a str,
    pub error: &'a str,
}

/// What `stretch sweep --json` writes (schema `stretch.sweep/1`): each
/// seed's rows and the jobs that failed.
#[derive(Serialize, Debug)]
pub struct SweepReport<'a> {
    pub schema: &'static str,
    pub dataset: &'a str,
    pub seeds: Vec<SeedRows>,
    pub failed: Vec<Failed<'a>>,
}

impl SweepReport<'_> {
    /// Writes the report as pretty JSON to `path`.
    pub fn write(&self, path: &std::path::Path) -> Result<(), ResultError> {
        write_json(self, path)
    }
}

/// What `stretch compare-accuracy --json` writes (schema
/// `stretch.compare-accuracy/1`): one seed's rows and how they were trained.
#[derive(Serialize, Debug)]
pub struct CompareReport<'a> {
    pub schema: &'static str,
    pub seed: u64,
    pub epochs: usize,
    pub train_images: usize,
    pub val_images: usize,
    pub val_source: &'static str,
    /// The recipe every model was trained with (the distilled ones add the
    /// teacher's settings in `distill`).
    pub recipe: crate::Recipe,
    pub backend: String,
    pub rows: &'a [Row],
}

impl CompareReport<'_> {
    /// Writes the report as pretty JSON to `path`.
    pub fn write(&self, path: &std::path::Path) -> Result<(), ResultError> {
        write_json(self, path)
    }
}

pub(crate) fn write_json(value: &impl Serialize, path: &std::path::Path) -> Result<(), ResultError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| ResultError::Io {
        action: "serialise for",
        path: path.into(),
        error: std::io::Error::other(e),
    })? + "\n";
    std::fs::write(path, text).map_err(|error| ResultError::Io {
        action: "write",
        path: path.into(),
        error,
    })
}
