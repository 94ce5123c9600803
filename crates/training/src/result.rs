//! What `stretch train --json` writes (schema `stretch.train/1`): one run's
//! figures, as `compare-accuracy` and a sweep report a row, and with
//! quantization-aware training the accuracy of the quantized files as
//! written.

use crate::metrics::Tally;
use crate::recipe::EpochMetrics;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

pub const SCHEMA: &str = "stretch.train/1";

#[derive(Debug, Error)]
pub enum ResultError {
    #[error("no epoch was trained")]
    NoEpoch,
    #[error("cannot {action} {}: {error}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: not a `stretch train --json` result: {reason}", path.display())]
    NotAResult { path: PathBuf, reason: String },
    #[error("{}: schema `{found}`, this build reads `{SCHEMA}`", path.display())]
    Schema { path: PathBuf, found: String },
}

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

/// The size of the file at `path`; 0 when it cannot be read.
pub fn file_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

impl TrainResult {
    /// The result of a run from its history, before quantized scores:
    /// `cost` is the model's parameters and MACs, `seconds` the run's
    /// training time.
    pub fn from_history(
        model: &Path,
        out: &Path,
        seed: u64,
        cost: (u64, u64),
        history: &[EpochMetrics],
        seconds: f64,
    ) -> Result<TrainResult, ResultError> {
        let last = history.last().ok_or(ResultError::NoEpoch)?;
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

    /// Writes the result as pretty JSON to `path`.
    pub fn write(&self, path: &Path) -> Result<(), ResultError> {
        crate::comparison::write_json(self, path)
    }

    /// Reads a result written by [`TrainResult::write`], naming the file at fault.
    pub fn read(path: &Path) -> Result<TrainResult, ResultError> {
        let text = std::fs::read_to_string(path).map_err(|error| ResultError::Io {
            action: "read",
            path: path.into(),
            error,
        })?;
        let r: TrainResult = serde_json::from_str(&text).map_err(|e| ResultError::NotAResult {
            path: path.into(),
            reason: e.to_string(),
        })?;
        if r.schema != SCHEMA {
            return Err(ResultError::Schema {
                path: path.into(),
                found: r.schema,
            });
        }
        Ok(r)
    }
}
