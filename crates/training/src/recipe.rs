//! What a training run is asked to do ([`Recipe`], with [`Distill`]) and
//! what each epoch measured ([`EpochMetrics`]): the data a checkpoint keeps.

use serde::{Deserialize, Serialize};

use crate::data::Augment;
use crate::error::TrainError;
use crate::optim::{Optimizer, Schedule};

/// Soft-label distillation from a teacher model.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Distill {
    /// Weight of the teacher's soft labels; `1 - alpha` goes to the true labels.
    pub alpha: f64,
    /// Softmax temperature for both teacher and student (the soft term is scaled by T²).
    pub temperature: f64,
}

/// A training recipe. Two runs with equal recipes, data and model produce the
/// same weights on one CPU thread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recipe {
    pub epochs: usize,
    pub batch_size: usize,
    pub lr: f64,
    pub optimizer: Optimizer,
    pub weight_decay: f64,
    pub schedule: Schedule,
    pub seed: u64,
    /// Share of the dataset held out for validation when it has no test
    /// split of its own (see [`crate::data::Dataset::test_start`]).
    pub val_fraction: f64,
    /// Train on the first `limit` images only (of the training part when
    /// the dataset has a test split); `None`: all.
    #[serde(default)]
    pub limit: Option<usize>,
    pub augment: Augment,
    pub distill: Option<Distill>,
}

impl Default for Recipe {
    fn default() -> Recipe {
        Recipe {
            epochs: 30,
            batch_size: 64,
            lr: 0.05,
            optimizer: Optimizer::Sgd { momentum: 0.9 },
            weight_decay: 5e-4,
            schedule: Schedule::Cosine,
            seed: 0,
            val_fraction: 0.2,
            limit: None,
            augment: Augment::default(),
            distill: None,
        }
    }
}

/// What one epoch measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochMetrics {
    /// 1-based.
    pub epoch: usize,
    /// Learning rate at the epoch's first batch.
    pub lr: f64,
    pub train_loss: f64,
    pub train_top1: f64,
    pub val_loss: f64,
    pub val_top1: f64,
    pub val_top5: f64,
    /// Wall-clock seconds of the epoch's training batches (validation excluded).
    pub seconds: f64,
    pub images_per_second: f64,
    /// With a teacher: the mean distillation term of the training loss
    /// (α·T²·cross-entropy against the teacher's softened labels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kd_loss: Option<f64>,
}

/// Refuses a recipe whose figures cannot train.
pub(crate) fn check_recipe(r: &Recipe) -> Result<(), TrainError> {
    let bad = |key, reason: String| Err(TrainError::Option { key, reason });
    if r.epochs == 0 {
        return bad("epochs", "must be at least 1".into());
    }
    if r.batch_size == 0 {
        return bad("batch-size", "must be at least 1".into());
    }
    if !(r.lr > 0.0 && r.lr.is_finite()) {
        return bad("lr", format!("{} is not a positive number", r.lr));
    }
    if r.limit.is_some_and(|n| n < 2) {
        return bad("limit", format!("{} images: need at least 2", r.limit.unwrap_or(0)));
    }
    if !(0.0..1.0).contains(&r.val_fraction) || r.val_fraction == 0.0 {
        return bad("val-fraction", format!("{} is not in (0, 1)", r.val_fraction));
    }
    if let Some(d) = r.distill {
        if !(0.0..=1.0).contains(&d.alpha) {
            return bad("kd-alpha", format!("{} is not in [0, 1]", d.alpha));
        }
        if d.temperature.is_nan() || d.temperature <= 0.0 {
            return bad("kd-temperature", format!("{} is not positive", d.temperature));
        }
    }
    Ok(())
}

/// The fields two recipes differ in, as a checkpoint mismatch names them.
pub(crate) fn recipe_difference(a: &Recipe, b: &Recipe) -> String {
    let ja = serde_json::to_value(a).expect("serialisable");
    let jb = serde_json::to_value(b).expect("serialisable");
    let (Some(ma), Some(mb)) = (ja.as_object(), jb.as_object()) else {
        return "recipes differ".into();
    };
    ma.iter()
        .filter(|(k, v)| mb.get(*k) != Some(v))
        .map(|(k, v)| {
            format!(
                "{k} {v} in the checkpoint, {} now",
                mb.get(k).cloned().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
