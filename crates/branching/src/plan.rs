//! Plans: per stage, the branches (processor, depth, width) or why the stage
//! stays whole, with every figure the search predicted. Versioned JSON
//! (`stretch.plan/1`).

use crate::error::BranchError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub const SCHEMA: &str = "stretch.plan/1";

/// How branch outputs meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Merge {
    /// Each branch ends in a 1x1 conv + BatchNorm to its share of the
    /// stage's output channels; the shares are concatenated, so later stages
    /// are unchanged.
    Project,
    /// Branch outputs are concatenated as they are; the next layer's input widens.
    Concat,
}

/// Search settings (paper Eq. 4-6 and the capacity bounds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Eq. 4: communication at most `alpha` x the segment's latency.
    pub alpha: f64,
    /// Eq. 5: each branch at most `beta` x the original segment's latency on its fastest processor.
    pub beta: f64,
    /// Lower bound on depth_i / depth, in (0, 1].
    pub min_depth: f64,
    /// Lower bound on width_i / width, in (0, 1].
    pub min_width: f64,
    /// Total branch MACs within `[lo, hi]` x the original stage's MACs.
    /// The default `[1.0, 1.2]` keeps at least the original's work in every
    /// branched stage.
    pub capacity: [f64; 2],
    pub merge: Merge,
    /// Branch channel counts are multiples of this (the engines' kernels
    /// work in tiles of 8-32 output channels); 8 unless a plan says
    /// otherwise. A branch as wide as its stage keeps the stage's channels.
    #[serde(default = "default_width_multiple")]
    pub width_multiple: usize,
    /// Branch widths tried per stage: every 1/width_steps of the stage's
    /// width within [`Settings::min_width`], then rounded to
    /// `width_multiple`; plans written before this setting searched 16.
    #[serde(default = "default_width_steps")]
    pub width_steps: usize,
    /// Split the stem's leading convolution and its channel-wise layers
    /// across the processors by output channels where that is predicted
    /// faster ([`crate::stem_split`]); plans written before this setting
    /// existed have no split.
    #[serde(default = "yes")]
    pub split_stem: bool,
}

fn yes() -> bool {
    true
}

/// [`Settings::width_multiple`] unless a plan or option says otherwise.
pub const DEFAULT_WIDTH_MULTIPLE: usize = 8;

fn default_width_multiple() -> usize {
    DEFAULT_WIDTH_MULTIPLE
}

/// [`Settings::width_steps`] unless a plan or option says otherwise.
pub const DEFAULT_WIDTH_STEPS: usize = 16;

fn default_width_steps() -> usize {
    DEFAULT_WIDTH_STEPS
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            alpha: 0.1,
            beta: 1.1,
            min_depth: 0.5,
            min_width: 0.5,
            capacity: [1.0, 1.2],
            merge: Merge::Project,
            width_multiple: default_width_multiple(),
            width_steps: default_width_steps(),
            split_stem: true,
        }
    }
}

impl Settings {
    /// Checks the bounds; errors name the option.
    pub fn validate(&self) -> Result<(), BranchError> {
        for (name, v) in [("min-depth", self.min_depth), ("min-width", self.min_width)] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(BranchError::Bound { name, value: v });
            }
        }
        if !(self.alpha > 0.0 && self.alpha.is_finite()) {
            return Err(BranchError::Option {
                name: "alpha",
                reason: format!("{} must be a positive number", self.alpha),
            });
        }
        if !(self.beta > 0.0 && self.beta.is_finite()) {
            return Err(BranchError::Option {
                name: "beta",
                reason: format!("{} must be a positive number", self.beta),
            });
        }
        if !(1..=256).contains(&self.width_multiple) {
            return Err(BranchError::Option {
                name: "width-multiple",
                reason: format!("{} must be between 1 and 256 channels", self.width_multiple),
            });
        }
        if !(1..=256).contains(&self.width_steps) {
            return Err(BranchError::Option {
                name: "width-steps",
                reason: format!("{} must be between 1 and 256", self.width_steps),
            });
        }
        let [lo, hi] = self.capacity;
        if !(lo > 0.0 && lo <= hi && hi.is_finite()) {
            return Err(BranchError::Option {
                name: "capacity",
                reason: format!("[{lo}, {hi}] must satisfy 0 < lo <= hi"),
            });
        }
        Ok(())
    }
}

/// One branch of a branched stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BranchPlan {
    pub processor: String,
    pub depth: usize,
    pub width: usize,
    /// Channels of the branch's projection (`project` merge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_to: Option<usize>,
    pub macs: u64,
    pub params: u64,
    /// Predicted latency of the branch on its processor, communication included.
    pub predicted_ms: f64,
}

/// Candidates the search looked at for one stage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub considered: u64,
    pub kept: u64,
}

/// One stage of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StagePlan {
    pub index: usize,
    pub blocks: usize,
    pub channels: usize,
    pub input_shape: Vec<usize>,
    pub output_shape: Vec<usize>,
    pub macs: u64,
    /// Predicted latency of the original stage on each processor.
    pub original_ms: BTreeMap<String, f64>,
    /// Empty when the stage stays whole.
    pub branches: Vec<BranchPlan>,
    /// Where a whole stage runs.
    pub processor: String,
    /// Why the stage stays whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Predicted latency of the stage in this plan (slowest branch).
    pub predicted_ms: f64,
    pub candidates: Counts,
    /// MACs a whole stage's first layers gain (negative: save) by reading the
    /// previous stage's `concat` merge, wider or narrower than the original
    /// stage boundary; counted in `predicted_ms`. A branch's `macs` already
    /// count its own first layers at the merge's width.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub widened_macs: i64,
    /// MACs of the stage in this plan (its branches and merge, or the
    /// whole stage with `widened_macs`) over the original stage's.
    #[serde(default = "one")]
    pub work_ratio: f64,
}

impl StagePlan {
    /// MACs of the stage in this plan: its branches' (merges included), or
    /// the whole stage's with `widened_macs`.
    pub fn planned_macs(&self) -> i64 {
        if self.branches.is_empty() {
            self.macs as i64 + self.widened_macs
        } else {
            self.branches.iter().map(|b| b.macs as i64).sum()
        }
    }

    /// [`Self::planned_macs`] over the original stage's MACs.
    pub fn planned_work_ratio(&self) -> f64 {
        self.planned_macs() as f64 / self.macs.max(1) as f64
    }
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

fn one() -> f64 {
    1.0
}

/// Stem or head: run whole on one processor, or (the stem) split by
/// output channels across processors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Part {
    pub processor: String,
    /// The whole part on `processor`, or with a split its slowest piece
    /// (hand-offs included) plus the Concat on `processor`.
    pub predicted_ms: f64,
    /// MACs the part gains by reading a `concat` merge (see
    /// [`StagePlan::widened_macs`]); counted in `predicted_ms`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub widened_macs: i64,
    /// The stem's split, in channel order; empty: whole on `processor`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub split: Vec<StemShare>,
}

/// One processor's slice of a split stem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StemShare {
    pub processor: String,
    /// Output channels of the slice (contiguous, after the previous share's).
    pub channels: usize,
    /// The slice alone on `processor`.
    pub predicted_ms: f64,
}

/// Predicted end-to-end figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// The original model on each single processor.
    pub original_ms: BTreeMap<String, f64>,
    pub fastest_single: String,
    pub plan_ms: f64,
    /// The plan's own work perfectly balanced over all processors on every
    /// stage (a branched stage: its branches' predicted times weighted by
    /// their processors' speeds, over the sum of all speeds; a whole stage:
    /// its time on all processors in parallel); stem and head serial. No
    /// plan's prediction is below it.
    pub ideal_ms: f64,
    pub speedup: f64,
    pub ideal_speedup: f64,
    /// MACs of the original model.
    #[serde(default)]
    pub original_macs: u64,
    /// MACs of the branched model this plan describes.
    #[serde(default)]
    pub plan_macs: u64,
    /// `plan_macs / original_macs`: the work the speedup is bought with.
    #[serde(default = "one")]
    pub work_ratio: f64,
}

/// A branching plan for one model on a device's processors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub schema: String,
    /// Every latency in the plan is predicted by this model, not measured.
    pub predicted_by: String,
    /// The model file the plan was made for (a label; the fingerprint is
    /// what is checked).
    pub model: String,
    /// [`Graph::fingerprint`](graph_ir::Graph::fingerprint) of that model:
    /// `branch` refuses a model with another. Plans written before it was
    /// recorded have none and are checked by their stages only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_fingerprint: Option<String>,
    pub device: String,
    pub processors: Vec<String>,
    /// The precision each processor ran at in the search's latencies
    /// (absent in plans written before precisions were recorded: fp32).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub precisions: BTreeMap<String, predictor::Precision>,
    /// Runs the stem, the head, unbranched stages and every merge.
    pub primary: String,
    pub settings: Settings,
    pub stem: Part,
    pub stages: Vec<StagePlan>,
    pub head: Part,
    pub totals: Totals,
}

impl Plan {
    pub fn save(&self, path: &Path) -> Result<(), BranchError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| BranchError::PlanFile {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        std::fs::write(path, text + "\n").map_err(|e| BranchError::PlanFile {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    }

    /// Reads a plan, checking its schema, its settings, that every processor
    /// it names is one of its `processors`, and that no stage puts two
    /// branches on one processor.
    pub fn load(path: &Path) -> Result<Plan, BranchError> {
        let err = |reason: String| BranchError::PlanFile {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| err(format!("not JSON: {e}")))?;
        let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("(none)");
        if schema != SCHEMA {
            return Err(err(format!("schema `{schema}`, this build reads `{SCHEMA}`")));
        }
        let plan: Plan = serde_json::from_value(value).map_err(|e| err(e.to_string()))?;
        plan.settings.validate()?;
        let known = |key: String, p: &str| -> Result<(), BranchError> {
            if plan.processors.iter().any(|q| q == p) {
                return Ok(());
            }
            Err(err(format!(
                "{key}: processor `{p}` is not one of the plan's processors ({})",
                plan.processors.join(", ")
            )))
        };
        known("primary".into(), &plan.primary)?;
        known("stem.processor".into(), &plan.stem.processor)?;
        known("head.processor".into(), &plan.head.processor)?;
        for (i, s) in plan.stages.iter().enumerate() {
            known(format!("stages[{i}].processor"), &s.processor)?;
            for (j, b) in s.branches.iter().enumerate() {
                known(format!("stages[{i}].branches[{j}].processor"), &b.processor)?;
            }
        }
        for s in &plan.stages {
            for (i, b) in s.branches.iter().enumerate() {
                if s.branches[..i].iter().any(|o| o.processor == b.processor) {
                    return Err(err(format!(
                        "stage {}: processor `{}` takes more than one branch",
                        s.index, b.processor
                    )));
                }
            }
        }
        Ok(plan)
    }

    /// The change of the model's MACs the plan makes: per branched stage its
    /// branches' MACs minus the stage's, plus what `concat` merges add to
    /// whole stages and the head after them.
    pub fn macs_delta(&self) -> i64 {
        let stages: i64 = self
            .stages
            .iter()
            .map(|s| {
                if s.branches.is_empty() {
                    s.widened_macs
                } else {
                    s.branches.iter().map(|b| b.macs as i64).sum::<i64>() - s.macs as i64
                }
            })
            .sum();
        stages + self.stem.widened_macs + self.head.widened_macs
    }

    /// Number of stages that are branched.
    pub fn branched_stages(&self) -> usize {
        self.stages.iter().filter(|s| !s.branches.is_empty()).count()
    }
}
