//! Random-forest regression: bagged CART regression trees with
//! variance-reduction splits and random feature subsets.
//!
//! The regressor is our own rather than smartcore's or linfa's because the
//! predictor needs only a small part of a machine-learning library, and needs it
//! in a particular shape:
//! - a few hundred lines with no dependency beyond serde, where smartcore and
//!   linfa bring ndarray/nalgebra trees and their own feature flags;
//! - a serialised form we own and version (`format: "stretch.forest/1"`), with
//!   the feature names in it, so a saved predictor states what it expects and
//!   fails loudly when read by an incompatible version;
//! - fits that are a pure function of the data, the parameters and one `u64`
//!   seed (a SplitMix64 stream, no global RNG, no threads), so a committed
//!   forest can be regenerated bit for bit and checked in CI.
//!
//! Targets can be fitted in log space ([`TargetTransform::Log`]): squared error
//! on `ln y` is, to first order, squared *relative* error, which is what latency
//! accuracy is judged by (nn-Meter's ±10% accuracy), and leaf values become
//! geometric means, so one slow outlier does not drag a whole leaf.
//!
//! Files are JSON. Floats are written in shortest round-trip form and parsed
//! with serde_json's `float_roundtrip`, so `save` then `load` gives a forest
//! whose predictions are bit-identical to the original's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The `format` field of every forest this version writes and the only one it reads.
pub const FORMAT: &str = "stretch.forest/1";

/// Errors from fitting, predicting with, saving or loading a [`Forest`].
#[derive(Debug, thiserror::Error)]
pub enum ForestError {
    #[error("cannot fit a forest on an empty training set")]
    Empty,
    #[error("training rows have no features")]
    NoFeatures,
    #[error("{rows} feature rows but {targets} targets")]
    LengthMismatch { rows: usize, targets: usize },
    #[error("row {row} has {found} features, expected {expected} (as row 0)")]
    RaggedRow { row: usize, found: usize, expected: usize },
    #[error("row {row}, feature {feature} is {value}; features must be finite")]
    NonFiniteFeature { row: usize, feature: usize, value: f64 },
    #[error("target {row} is {value}; targets must be finite{}", if *.log { " and > 0 for a log-space fit" } else { "" })]
    BadTarget { row: usize, value: f64, log: bool },
    #[error("forest parameter `{name}` must be at least 1")]
    ZeroParam { name: &'static str },
    #[error("{found} feature names given for a forest of {expected} features")]
    FeatureNames { found: usize, expected: usize },
    #[error("prediction input has {found} features, the forest expects {expected}")]
    WrongFeatureCount { found: usize, expected: usize },
    #[error("cannot {action} forest file {}: {error}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("forest file {} is not valid forest JSON: {error}", path.display())]
    Json { path: PathBuf, error: serde_json::Error },
    #[error("forest file {} has format `{found}`, this build reads `{FORMAT}`", path.display())]
    Format { path: PathBuf, found: String },
    #[error("forest file {} is inconsistent: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
}

/// How many features each split considers, drawn at random per node.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxFeatures {
    /// Every feature at every node (bagged trees).
    All,
    /// `min(k, n_features)`; `k` must be at least 1.
    Count(usize),
}

/// The space the trees are fitted in; predictions are always in target units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetTransform {
    /// Fit `y` directly (minimises squared error).
    Identity,
    /// Fit `ln y` and predict `exp` of the tree mean (minimises squared log
    /// error, i.e. relative error); every target must be > 0.
    Log,
}

/// Hyper-parameters of a forest fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ForestParams {
    /// Number of trees, at least 1.
    pub n_trees: usize,
    /// Maximum depth of a tree (the root is depth 0).
    pub max_depth: usize,
    /// Minimum number of (bootstrap) samples in a leaf, at least 1.
    pub min_samples_leaf: usize,
    /// Features considered per split.
    pub max_features: MaxFeatures,
    /// Fit each tree on a bootstrap resample (true) or on the whole set.
    pub bootstrap: bool,
    /// Space the trees are fitted in.
    pub target: TargetTransform,
}

pub use graph_ir::rng::SplitMix64;

/// One tree node. Trees are stored in pre-order: a split's left child is the
/// next node, `right` is the index of its right child. Serialised compactly as
/// a bare number (leaf) or `[feature, threshold, right]` (split).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
enum Node {
    Leaf(f64),
    /// `x[feature] <= threshold` goes left.
    Split(usize, f64, usize),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    fn predict(&self, x: &[f64]) -> f64 {
        let mut i = 0;
        loop {
            match self.nodes[i] {
                Node::Leaf(value) => return value,
                Node::Split(feature, threshold, right) => i = if x[feature] <= threshold { i + 1 } else { right },
            }
        }
    }

    /// Checks the invariants `predict` relies on: finite leaves, known
    /// features, and children after their parent and in bounds (so traversal
    /// terminates).
    fn check(&self, n_features: usize) -> Result<(), String> {
        let n = self.nodes.len();
        if n == 0 {
            return Err("a tree has no nodes".into());
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let ok = match *node {
                Node::Leaf(v) => v.is_finite(),
                Node::Split(f, t, r) => f < n_features && !t.is_nan() && i + 1 < r && r < n,
            };
            if !ok {
                return Err(format!("node {i} is malformed: {node:?}"));
            }
        }
        Ok(())
    }
}

/// A fitted random forest. Predictions are the mean of the trees' leaf values,
/// mapped back through the target transform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forest {
    format: String,
    feature_names: Vec<String>,
    params: ForestParams,
    seed: u64,
    /// Free-form provenance (data file, split, measured accuracy) kept with the model.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    metadata: BTreeMap<String, serde_json::Value>,
    trees: Vec<Tree>,
}

/// Fits a forest to rows `x` (all the same length) and targets `y`.
///
/// Deterministic: the same inputs, parameters and `seed` give the same forest.
/// Features are named `x0, x1, ...` until [`Forest::with_feature_names`].
pub fn fit(x: &[Vec<f64>], y: &[f64], params: &ForestParams, seed: u64) -> Result<Forest, ForestError> {
    let n_features = validate_input(x, y, params)?;
    let targets: Vec<f64> = match params.target {
        TargetTransform::Identity => y.to_vec(),
        TargetTransform::Log => y.iter().map(|v| v.ln()).collect(),
    };
    let k = match params.max_features {
        MaxFeatures::All => n_features,
        MaxFeatures::Count(k) => k.min(n_features),
    };
    let mut seeds = SplitMix64::new(seed);
    let trees = (0..params.n_trees)
        .map(|_| {
            let mut rng = SplitMix64::new(seeds.next_u64());
            let samples: Vec<usize> = if params.bootstrap {
                (0..x.len()).map(|_| rng.below(x.len())).collect()
            } else {
                (0..x.len()).collect()
            };
            let mut builder = TreeBuilder {
                x,
                y: &targets,
                params,
                k,
                rng,
                nodes: Vec::new(),
            };
            builder.grow(samples, 0);
            Tree { nodes: builder.nodes }
        })
        .collect();
    Ok(Forest {
        format: FORMAT.to_string(),
        feature_names: (0..n_features).map(|i| format!("x{i}")).collect(),
        params: *params,
        seed,
        metadata: BTreeMap::new(),
        trees,
    })
}

fn validate_input(x: &[Vec<f64>], y: &[f64], params: &ForestParams) -> Result<usize, ForestError> {
    let max_features = match params.max_features {
        MaxFeatures::Count(k) => k,
        MaxFeatures::All => 1,
    };
    for (name, v) in [
        ("n_trees", params.n_trees),
        ("min_samples_leaf", params.min_samples_leaf),
        ("max_features", max_features),
    ] {
        if v == 0 {
            return Err(ForestError::ZeroParam { name });
        }
    }
    if x.len() != y.len() {
        let (rows, targets) = (x.len(), y.len());
        return Err(ForestError::LengthMismatch { rows, targets });
    }
    let n_features = x.first().ok_or(ForestError::Empty)?.len();
    if n_features == 0 {
        return Err(ForestError::NoFeatures);
    }
    for (row, r) in x.iter().enumerate() {
        if r.len() != n_features {
            let (found, expected) = (r.len(), n_features);
            return Err(ForestError::RaggedRow { row, found, expected });
        }
        if let Some((feature, &value)) = r.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(ForestError::NonFiniteFeature { row, feature, value });
        }
    }
    let log = params.target == TargetTransform::Log;
    let bad = |v: f64| !v.is_finite() || (log && v <= 0.0);
    if let Some((row, &value)) = y.iter().enumerate().find(|(_, v)| bad(**v)) {
        return Err(ForestError::BadTarget { row, value, log });
    }
    Ok(n_features)
}

struct TreeBuilder<'a> {
    x: &'a [Vec<f64>],
    y: &'a [f64],
    params: &'a ForestParams,
    k: usize,
    rng: SplitMix64,
    nodes: Vec<Node>,
}

/// The best split found at a node and the summed squared error it leaves.
struct Best {
    feature: usize,
    threshold: f64,
    sse: f64,
}

impl TreeBuilder<'_> {
    /// Appends the subtree for `samples` in pre-order.
    fn grow(&mut self, samples: Vec<usize>, depth: usize) {
        let mean = samples.iter().map(|&i| self.y[i]).sum::<f64>() / samples.len() as f64;
        let leaf_min = self.params.min_samples_leaf;
        if depth >= self.params.max_depth || samples.len() < 2 * leaf_min {
            self.nodes.push(Node::Leaf(mean));
            return;
        }
        let Some(best) = self.best_split(&samples) else {
            self.nodes.push(Node::Leaf(mean));
            return;
        };
        let (left, right): (Vec<usize>, Vec<usize>) = samples
            .into_iter()
            .partition(|&i| self.x[i][best.feature] <= best.threshold);
        let at = self.nodes.len();
        self.nodes.push(Node::Split(best.feature, best.threshold, 0));
        self.grow(left, depth + 1);
        let right_index = self.nodes.len();
        self.nodes[at] = Node::Split(best.feature, best.threshold, right_index);
        self.grow(right, depth + 1);
    }

    /// The split among `k` random features that most reduces the sum of squared
    /// errors, with at least `min_samples_leaf` samples each side; `None` when
    /// no such split reduces it.
    fn best_split(&mut self, samples: &[usize]) -> Option<Best> {
        let n_features = self.x[0].len();
        let mut features: Vec<usize> = (0..n_features).collect();
        for i in 0..self.k {
            let j = i + self.rng.below(n_features - i);
            features.swap(i, j);
        }
        let n = samples.len();
        let total: f64 = samples.iter().map(|&i| self.y[i]).sum();
        let total_sq: f64 = samples.iter().map(|&i| self.y[i] * self.y[i]).sum();
        let parent_sse = total_sq - total * total / n as f64;
        let leaf_min = self.params.min_samples_leaf;
        let mut best: Option<Best> = None;
        let mut pairs: Vec<(f64, f64)> = Vec::with_capacity(n);
        for &feature in &features[..self.k] {
            pairs.clear();
            pairs.extend(samples.iter().map(|&i| (self.x[i][feature], self.y[i])));
            pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (mut sum, mut sq) = (0.0, 0.0);
            for split in 1..n {
                let (v, t) = pairs[split - 1];
                sum += t;
                sq += t * t;
                let next = pairs[split].0;
                if split < leaf_min || n - split < leaf_min || v == next {
                    continue;
                }
                let (nl, nr) = (split as f64, (n - split) as f64);
                let sse = (sq - sum * sum / nl) + ((total_sq - sq) - (total - sum) * (total - sum) / nr);
                if best.as_ref().is_none_or(|b| sse < b.sse) {
                    let mid = v + (next - v) / 2.0;
                    let threshold = if mid < next { mid } else { v };
                    best = Some(Best {
                        feature,
                        threshold,
                        sse,
                    });
                }
            }
        }
        best.filter(|b| b.sse < parent_sse - 1e-12 * parent_sse.abs())
    }
}

impl Forest {
    /// Predicts the target for one row of `n_features()` values.
    pub fn predict(&self, x: &[f64]) -> Result<f64, ForestError> {
        if x.len() != self.feature_names.len() {
            let (found, expected) = (x.len(), self.feature_names.len());
            return Err(ForestError::WrongFeatureCount { found, expected });
        }
        let mean = self.trees.iter().map(|t| t.predict(x)).sum::<f64>() / self.trees.len() as f64;
        Ok(match self.params.target {
            TargetTransform::Identity => mean,
            TargetTransform::Log => mean.exp(),
        })
    }

    /// Names the features; `names` must have one entry per feature.
    pub fn with_feature_names<S: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Result<Self, ForestError> {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        if names.len() != self.feature_names.len() {
            let (found, expected) = (names.len(), self.feature_names.len());
            return Err(ForestError::FeatureNames { found, expected });
        }
        self.feature_names = names;
        Ok(self)
    }

    /// Attaches a provenance entry (saved with the forest; replaces an existing `key`).
    pub fn set_metadata(&mut self, key: impl Into<String>, value: serde_json::Value) {
        self.metadata.insert(key.into(), value);
    }

    /// Provenance entries attached with [`Forest::set_metadata`].
    pub fn metadata(&self) -> &BTreeMap<String, serde_json::Value> {
        &self.metadata
    }

    /// The feature names, in row order; every row has one value per name.
    pub fn feature_names(&self) -> &[String] {
        &self.feature_names
    }

    /// The parameters the forest was fitted with.
    pub fn params(&self) -> &ForestParams {
        &self.params
    }

    /// The number of nodes over all trees.
    pub fn n_nodes(&self) -> usize {
        self.trees.iter().map(|t| t.nodes.len()).sum()
    }

    /// Writes the forest as JSON to `path`.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), ForestError> {
        let path = path.as_ref();
        let json = serde_json::to_string(self).map_err(json_error(path))?;
        std::fs::write(path, json + "\n").map_err(io_error("write", path))
    }

    /// Reads a forest written by [`Forest::save`], checking its format version
    /// and structure so that a corrupt file fails here, not in `predict`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ForestError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(io_error("read", path))?;
        Self::from_json(&text, path)
    }

    /// Parses forest JSON; `path` names the source in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, ForestError> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(json_error(path))?;
        let found = value.get("format").and_then(|f| f.as_str()).unwrap_or("(none)");
        if found != FORMAT {
            let (path, found) = (path.to_path_buf(), found.to_string());
            return Err(ForestError::Format { path, found });
        }
        let forest: Forest = serde_json::from_value(value).map_err(json_error(path))?;
        forest.validate(path)?;
        Ok(forest)
    }

    /// Checks a deserialized forest's format version and structure, so that a
    /// corrupt one fails here, not in `predict`; `path` names its source.
    pub fn validate(&self, path: &Path) -> Result<(), ForestError> {
        if self.format != FORMAT {
            let (path, found) = (path.to_path_buf(), self.format.clone());
            return Err(ForestError::Format { path, found });
        }
        let corrupt = |reason: String| ForestError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        if self.trees.is_empty() || self.feature_names.is_empty() {
            return Err(corrupt("no trees or no features".into()));
        }
        for (i, tree) in self.trees.iter().enumerate() {
            tree.check(self.feature_names.len())
                .map_err(|e| corrupt(format!("tree {i}: {e}")))?;
        }
        Ok(())
    }
}

fn io_error<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> ForestError + 'a {
    move |error| ForestError::Io {
        action,
        path: path.to_path_buf(),
        error,
    }
}

fn json_error(path: &Path) -> impl FnOnce(serde_json::Error) -> ForestError + '_ {
    move |error| ForestError::Json {
        path: path.to_path_buf(),
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `y = 1 + 2a + (b >= 10 ? 30 : 0)` on a 20×20 grid, plus a constant feature.
    fn grid() -> (Vec<Vec<f64>>, Vec<f64>) {
        let f = |a: f64, b: f64| 1.0 + 2.0 * a + if b < 10.0 { 0.0 } else { 30.0 };
        let x: Vec<Vec<f64>> = (0..400)
            .map(|i| vec![f64::from(i / 20), f64::from(i % 20), 7.0])
            .collect();
        let y = x.iter().map(|r| f(r[0], r[1])).collect();
        (x, y)
    }

    /// Test parameters: depth 12, leaves of 1.
    fn params(n_trees: usize, bootstrap: bool, max_features: MaxFeatures, target: TargetTransform) -> ForestParams {
        let (max_depth, min_samples_leaf) = (12, 1);
        ForestParams {
            n_trees,
            max_depth,
            min_samples_leaf,
            max_features,
            bootstrap,
            target,
        }
    }

    use MaxFeatures::{All, Count};
    use TargetTransform::{Identity, Log};

    #[test]
    fn fits_a_known_function() {
        let (x, y) = grid();
        let probes = [([3.0, 2.0, 7.0], 7.0), ([15.0, 12.0, 7.0], 61.0)];
        for target in [Identity, Log] {
            let forest = fit(&x, &y, &params(20, true, All, target), 1).unwrap();
            for (probe, want) in probes {
                let got = forest.predict(&probe).unwrap();
                assert!((got - want).abs() / want < 0.08, "{target:?}: {got} for {want}");
            }
        }
    }

    #[test]
    fn single_tree_without_bootstrap_interpolates_exactly() {
        let (x, y) = grid();
        let forest = fit(&x, &y, &params(1, false, All, Identity), 0).unwrap();
        for (row, want) in x.iter().zip(&y) {
            assert_eq!(forest.predict(row).unwrap(), *want);
        }
    }

    #[test]
    fn deterministic_for_a_seed() {
        let (x, y) = grid();
        let p = params(20, true, Count(1), Identity);
        assert_eq!(fit(&x, &y, &p, 42).unwrap(), fit(&x, &y, &p, 42).unwrap());
        assert_ne!(fit(&x, &y, &p, 42).unwrap(), fit(&x, &y, &p, 43).unwrap());
    }

    #[test]
    fn save_then_load_predicts_bit_identically() {
        let (x, y) = grid();
        let forest = fit(&x, &y, &params(20, true, Count(2), Log), 9).unwrap();
        let mut forest = forest.with_feature_names(["a", "b", "c"]).unwrap();
        forest.set_metadata("data", serde_json::json!("grid"));
        let path = std::env::temp_dir().join(format!("stretch-forest-{}.json", std::process::id()));
        forest.save(&path).unwrap();
        let loaded = Forest::load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(loaded, forest);
        assert_eq!(loaded.feature_names(), ["a", "b", "c"]);
        for a in 0..40 {
            let row = [f64::from(a) * 0.37, f64::from(a % 13) * 1.7, 7.0];
            let (got, want) = (loaded.predict(&row).unwrap(), forest.predict(&row).unwrap());
            assert_eq!(got.to_bits(), want.to_bits(), "row {row:?}");
        }
    }

    #[test]
    fn rejects_bad_input() {
        let p = params(2, true, All, Identity);
        let fails = |x: &[Vec<f64>], y: &[f64], p: &ForestParams| fit(x, y, p, 0).unwrap_err();
        assert!(matches!(fails(&[], &[], &p), ForestError::Empty));
        let e = fails(&[vec![1.0, 2.0], vec![1.0]], &[1.0, 2.0], &p);
        assert_eq!(e.to_string(), "row 1 has 1 features, expected 2 (as row 0)");
        assert!(matches!(fails(&[vec![]], &[1.0], &p), ForestError::NoFeatures));
        let e = fails(&[vec![1.0]], &[1.0, 2.0], &p);
        assert!(matches!(e, ForestError::LengthMismatch { rows: 1, targets: 2 }));
        let e = fails(&[vec![f64::NAN]], &[1.0], &p);
        assert!(matches!(e, ForestError::NonFiniteFeature { row: 0, .. }));
        let e = fails(&[vec![1.0]], &[0.0], &params(2, true, All, Log));
        assert!(matches!(e, ForestError::BadTarget { row: 0, .. }));
        let e = fails(&[vec![1.0]], &[1.0], &params(0, true, All, Identity));
        assert!(matches!(e, ForestError::ZeroParam { name: "n_trees" }));
        let forest = fit(&[vec![1.0, 2.0]], &[3.0], &p, 0).unwrap();
        let e = forest.predict(&[1.0]).unwrap_err();
        assert!(matches!(e, ForestError::WrongFeatureCount { found: 1, .. }));
        assert!(forest.clone().with_feature_names(["only"]).is_err());
    }

    #[test]
    fn load_rejects_other_versions_and_corrupt_trees() {
        let p = params(1, false, All, Identity);
        let forest = fit(&[vec![1.0], vec![2.0]], &[1.0, 2.0], &p, 0).unwrap();
        let json = serde_json::to_string(&forest).unwrap();
        let path = Path::new("model.json");
        let other = json.replace(FORMAT, "stretch.forest/99");
        let e = Forest::from_json(&other, path).unwrap_err();
        assert!(matches!(e, ForestError::Format { .. }));
        let looping = json.replace("[0,1.5,2]", "[0,1.5,0]");
        assert_ne!(looping, json, "fixture must contain the root split");
        let err = Forest::from_json(&looping, path).unwrap_err();
        assert!(matches!(err, ForestError::Corrupt { .. }));
        assert!(err.to_string().contains("model.json"), "{err}");
        let missing = Forest::load("/nonexistent/forest.json").unwrap_err();
        assert!(missing.to_string().contains("/nonexistent/forest.json"), "{missing}");
    }

    #[test]
    fn splitmix_matches_the_reference_stream() {
        let mut rng = SplitMix64::new(0);
        let first = [rng.next_u64(), rng.next_u64()];
        assert_eq!(first, [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4]);
        assert!((0..1000).all(|_| rng.below(7) < 7));
    }
}
