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
    #[error("invalid forest parameter `{name}`: {reason}")]
    InvalidParam { name: &'static str, reason: String },
    #[error("{found} feature names given for a forest of {expected} features")]
    FeatureNames { found: usize, expected: usize },
    #[error("prediction input has {found} features, the forest expects {expected}")]
    WrongFeatureCount { found: usize, expected: usize },
    #[error("cannot {action} forest file {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("forest file {} is not valid forest JSON: {source}", path.display())]
    Json { path: PathBuf, source: serde_json::Error },
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
    /// `ceil(sqrt(n_features))`.
    Sqrt,
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

impl Default for ForestParams {
    fn default() -> Self {
        ForestParams {
            n_trees: 100,
            max_depth: 16,
            min_samples_leaf: 1,
            max_features: MaxFeatures::All,
            bootstrap: true,
            target: TargetTransform::Identity,
        }
    }
}

/// SplitMix64 (Steele, Lea & Flood 2014): a tiny, fast, well-mixed PRNG whose
/// whole state is one `u64`; the same seed always gives the same stream.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (multiply-shift; the bias is below `n / 2^64`). `n` must be > 0.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Shuffles `items` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

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

    /// Checks the invariants `predict` relies on: every index in bounds and
    /// every child after its parent (so traversal terminates).
    fn check(&self, n_features: usize) -> Result<(), String> {
        if self.nodes.is_empty() {
            return Err("a tree has no nodes".into());
        }
        let n = self.nodes.len();
        for (i, node) in self.nodes.iter().enumerate() {
            match *node {
                Node::Leaf(v) if !v.is_finite() => return Err(format!("node {i} has non-finite value {v}")),
                Node::Leaf(_) => {}
                Node::Split(f, t, r) => {
                    if f >= n_features {
                        return Err(format!("node {i} splits on feature {f} of {n_features}"));
                    }
                    if t.is_nan() {
                        return Err(format!("node {i} has a NaN threshold"));
                    }
                    if i + 1 >= n || r <= i + 1 || r >= n {
                        return Err(format!("node {i} has children {}, {r} outside {}..{n}", i + 1, i + 2));
                    }
                }
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
        MaxFeatures::Sqrt => (n_features as f64).sqrt().ceil() as usize,
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
    let positive = |name, v: usize| {
        if v == 0 {
            Err(ForestError::InvalidParam {
                name,
                reason: "must be at least 1".into(),
            })
        } else {
            Ok(())
        }
    };
    positive("n_trees", params.n_trees)?;
    positive("min_samples_leaf", params.min_samples_leaf)?;
    if let MaxFeatures::Count(k) = params.max_features {
        positive("max_features", k)?;
    }
    if x.len() != y.len() {
        return Err(ForestError::LengthMismatch {
            rows: x.len(),
            targets: y.len(),
        });
    }
    let n_features = x.first().ok_or(ForestError::Empty)?.len();
    if n_features == 0 {
        return Err(ForestError::NoFeatures);
    }
    for (row, r) in x.iter().enumerate() {
        if r.len() != n_features {
            return Err(ForestError::RaggedRow {
                row,
                found: r.len(),
                expected: n_features,
            });
        }
        if let Some((feature, &value)) = r.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(ForestError::NonFiniteFeature { row, feature, value });
        }
    }
    let log = params.target == TargetTransform::Log;
    if let Some((row, &value)) = y
        .iter()
        .enumerate()
        .find(|(_, v)| !v.is_finite() || (log && **v <= 0.0))
    {
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
            return Err(ForestError::WrongFeatureCount {
                found: x.len(),
                expected: self.feature_names.len(),
            });
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
            return Err(ForestError::FeatureNames {
                found: names.len(),
                expected: self.feature_names.len(),
            });
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

    /// The number of features each row must have.
    pub fn n_features(&self) -> usize {
        self.feature_names.len()
    }

    /// The feature names, in row order.
    pub fn feature_names(&self) -> &[String] {
        &self.feature_names
    }

    /// The parameters the forest was fitted with.
    pub fn params(&self) -> &ForestParams {
        &self.params
    }

    /// The seed the forest was fitted with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The number of nodes over all trees.
    pub fn n_nodes(&self) -> usize {
        self.trees.iter().map(|t| t.nodes.len()).sum()
    }

    /// Writes the forest as JSON to `path`.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), ForestError> {
        let path = path.as_ref();
        let json = serde_json::to_string(self).map_err(|source| ForestError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        std::fs::write(path, json + "\n").map_err(|source| ForestError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        })
    }

    /// Reads a forest written by [`Forest::save`], checking its format version
    /// and structure so that a corrupt file fails here, not in `predict`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ForestError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ForestError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&text, path)
    }

    /// Parses forest JSON; `path` names the source in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, ForestError> {
        #[derive(Deserialize)]
        struct Header {
            format: String,
        }
        let header: Header = serde_json::from_str(text).map_err(|source| ForestError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        if header.format != FORMAT {
            return Err(ForestError::Format {
                path: path.to_path_buf(),
                found: header.format,
            });
        }
        let forest: Forest = serde_json::from_str(text).map_err(|source| ForestError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        let corrupt = |reason: String| ForestError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        if forest.trees.is_empty() {
            return Err(corrupt("no trees".into()));
        }
        if forest.feature_names.is_empty() {
            return Err(corrupt("no features".into()));
        }
        for (i, tree) in forest.trees.iter().enumerate() {
            tree.check(forest.feature_names.len())
                .map_err(|e| corrupt(format!("tree {i}: {e}")))?;
        }
        Ok(forest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> (Vec<Vec<f64>>, Vec<f64>) {
        let mut x = Vec::new();
        let mut y = Vec::new();
        for a in 0..20 {
            for b in 0..20 {
                let (a, b) = (f64::from(a), f64::from(b));
                x.push(vec![a, b, 7.0]);
                y.push(1.0 + 2.0 * a + if b < 10.0 { 0.0 } else { 30.0 });
            }
        }
        (x, y)
    }

    fn params() -> ForestParams {
        ForestParams {
            n_trees: 20,
            max_depth: 12,
            ..ForestParams::default()
        }
    }

    #[test]
    fn fits_a_known_function() {
        let (x, y) = grid();
        for target in [TargetTransform::Identity, TargetTransform::Log] {
            let forest = fit(&x, &y, &ForestParams { target, ..params() }, 1).unwrap();
            for (probe, want) in [
                ([3.0, 2.0, 7.0], 7.0),
                ([15.0, 12.0, 7.0], 61.0),
                ([9.0, 19.0, 7.0], 49.0),
            ] {
                let got = forest.predict(&probe).unwrap();
                assert!(
                    (got - want).abs() / want < 0.08,
                    "{target:?}: f({probe:?}) = {got}, want {want}"
                );
            }
        }
    }

    #[test]
    fn single_tree_without_bootstrap_interpolates_exactly() {
        let (x, y) = grid();
        let p = ForestParams {
            n_trees: 1,
            max_depth: 64,
            bootstrap: false,
            ..params()
        };
        let forest = fit(&x, &y, &p, 0).unwrap();
        for (row, want) in x.iter().zip(&y) {
            assert_eq!(forest.predict(row).unwrap(), *want);
        }
    }

    #[test]
    fn deterministic_for_a_seed() {
        let (x, y) = grid();
        let p = ForestParams {
            max_features: MaxFeatures::Sqrt,
            ..params()
        };
        assert_eq!(fit(&x, &y, &p, 42).unwrap(), fit(&x, &y, &p, 42).unwrap());
        assert_ne!(fit(&x, &y, &p, 42).unwrap(), fit(&x, &y, &p, 43).unwrap());
    }

    #[test]
    fn save_then_load_predicts_bit_identically() {
        let (x, y) = grid();
        let p = ForestParams {
            target: TargetTransform::Log,
            max_features: MaxFeatures::Count(2),
            ..params()
        };
        let mut forest = fit(&x, &y, &p, 9).unwrap().with_feature_names(["a", "b", "c"]).unwrap();
        forest.set_metadata("data", serde_json::json!("grid"));
        let path = std::env::temp_dir().join(format!("stretch-forest-{}.json", std::process::id()));
        forest.save(&path).unwrap();
        let loaded = Forest::load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(loaded, forest);
        assert_eq!(loaded.feature_names(), ["a", "b", "c"]);
        for a in 0..40 {
            let row = [f64::from(a) * 0.37, f64::from(a % 13) * 1.7, 7.0];
            assert_eq!(
                loaded.predict(&row).unwrap().to_bits(),
                forest.predict(&row).unwrap().to_bits()
            );
        }
    }

    #[test]
    fn rejects_bad_input() {
        let p = params();
        assert!(matches!(fit(&[], &[], &p, 0), Err(ForestError::Empty)));
        let ragged = vec![vec![1.0, 2.0], vec![1.0]];
        assert!(matches!(
            fit(&ragged, &[1.0, 2.0], &p, 0),
            Err(ForestError::RaggedRow {
                row: 1,
                found: 1,
                expected: 2
            })
        ));
        assert!(matches!(
            fit(&[vec![1.0]], &[1.0, 2.0], &p, 0),
            Err(ForestError::LengthMismatch { .. })
        ));
        assert!(matches!(
            fit(&[vec![f64::NAN]], &[1.0], &p, 0),
            Err(ForestError::NonFiniteFeature { .. })
        ));
        let log = ForestParams {
            target: TargetTransform::Log,
            ..p
        };
        assert!(matches!(
            fit(&[vec![1.0]], &[0.0], &log, 0),
            Err(ForestError::BadTarget { row: 0, .. })
        ));
        let none = ForestParams { n_trees: 0, ..p };
        assert!(matches!(
            fit(&[vec![1.0]], &[1.0], &none, 0),
            Err(ForestError::InvalidParam { .. })
        ));
        let forest = fit(&[vec![1.0, 2.0]], &[3.0], &p, 0).unwrap();
        assert!(matches!(
            forest.predict(&[1.0]),
            Err(ForestError::WrongFeatureCount { found: 1, expected: 2 })
        ));
        assert!(forest.clone().with_feature_names(["only"]).is_err());
    }

    #[test]
    fn load_rejects_other_versions_and_corrupt_trees() {
        let forest = fit(
            &[vec![1.0], vec![2.0]],
            &[1.0, 2.0],
            &ForestParams {
                n_trees: 1,
                bootstrap: false,
                ..params()
            },
            0,
        )
        .unwrap();
        let json = serde_json::to_string(&forest).unwrap();
        let path = Path::new("model.json");
        let other = json.replace(FORMAT, "stretch.forest/99");
        assert!(matches!(
            Forest::from_json(&other, path),
            Err(ForestError::Format { .. })
        ));
        let looping = json.replace("[0,1.5,2]", "[0,1.5,0]");
        assert_ne!(looping, json, "fixture must contain the root split");
        let err = Forest::from_json(&looping, path).unwrap_err();
        assert!(matches!(err, ForestError::Corrupt { .. }));
        assert!(err.to_string().contains("model.json"), "{err}");
        let missing = Forest::load("/nonexistent/forest.json").unwrap_err();
        assert!(missing.to_string().contains("/nonexistent/forest.json"), "{missing}");
    }

    #[test]
    fn splitmix_is_reproducible_and_in_range() {
        let mut a = SplitMix64::new(5);
        let mut b = SplitMix64::new(5);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
            assert!(a.below(7) < 7);
            b.below(7);
        }
        let mut v: Vec<u32> = (0..50).collect();
        SplitMix64::new(1).shuffle(&mut v);
        let mut sorted = v.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_ne!(v, sorted);
    }
}
