//! Block-level latency predictors from real phone measurements.
//!
//! The tables in the repository's [`TABLES_DIR`] (from nn-Meter, see its
//! README) map keys to the latency in milliseconds of one block measured with
//! TFLite on a phone CPU. This module reads the MBConv keys,
//! `conv_{hw}_{cin}_{cout}_{expand}_{stride}_{act}_{kernel}_{se|nose}`, into
//! [`BlockSample`]s, describes each block by nn-Meter-style features
//! ([`FEATURE_NAMES`]), splits the samples 80/20 with a fixed seed and fits a
//! [`Forest`] to the block's *cost per MAC*, `latency_ms / macs`, in log space.
//!
//! Why per MAC: the tables sample a coarse grid (expand 1..6, a few channel
//! counts and sizes), so a held-out block's nearest measured neighbours are 20
//! to 40% slower or faster than it. Leaves are piecewise constant and cannot
//! interpolate that; fitted to latency directly (as nn-Meter's kernel
//! predictors are) the forest gets only ~85% of held-out blocks within ±10%.
//! Cost per MAC varies slowly over the grid, so the forest learns the
//! efficiency and the MAC count carries the scale: ~99% within ±10%. Log space
//! makes splits minimise relative error, the measure the target is stated in.
//!
//! The block is the one the README defines, with input `hw`×`hw`×`cin` and
//! `mid = cin * expand` channels inside:
//! 1. a 1×1 expand conv `cin → mid`, present only when `expand > 1`;
//! 2. a k×k depthwise conv on `mid` channels with the stride, "same" padding,
//!    so the output side is `ceil(hw / stride)`;
//! 3. with `se`, a squeeze-excite: global pool, 1×1 conv `mid → r`, 1×1 conv
//!    `r → mid`, channel scale, where `r = make_divisible(mid / 4, 8)` as in
//!    MobileNetV3 (round to the nearest multiple of 8, at least 8, and never
//!    more than 10% below `mid / 4`);
//! 4. a 1×1 project conv `mid → cout`, plus a residual add when `stride == 1`
//!    and `cin == cout`.
//!
//! MACs count the multiply-accumulates of the convolutions (the SE convs act
//! on a 1×1 map); element-wise work (activations, SE scale, residual add) is
//! left out. Parameters are counted as TFLite runs the block: every conv has
//! its weights and a bias (batch norm folded in).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::forest::{self, Forest, ForestError, ForestParams, MaxFeatures, SplitMix64, TargetTransform};

/// Feature names, in the order of [`MbConvBlock::features`].
pub const FEATURE_NAMES: [&str; 13] = [
    "hw", "cin", "cout", "expand", "stride", "kernel", "se", "residual", "mid", "hw_out", "se_mid", "macs", "params",
];

/// The folder of the phone latency tables, relative to the repository root.
pub const TABLES_DIR: &str = "data/phone-latency";

/// The phones with a committed block predictor and their tables in
/// [`TABLES_DIR`]: `(phone, table file)`.
pub const PHONE_TABLES: [(&str, &str); 2] = [
    ("pixel4", "pixel4_cpu_blocks.json"),
    ("xiaomi11", "xiaomi11_cpu_blocks.json"),
];

/// Seed of the train/test split used for every reported accuracy.
pub const SPLIT_SEED: u64 = 20_240_601;
/// Seed of the forest fit used for every reported accuracy.
pub const FIT_SEED: u64 = 7;
/// Fraction of the blocks held out for testing.
pub const TEST_FRACTION: f64 = 0.2;

/// What a block forest predicts, recorded in its metadata under `target`.
pub const TARGET: &str = "latency_ms_per_mac";

/// Forest parameters of the committed block predictors: small enough that a
/// saved forest stays under 200 KB and fits in well under a second.
pub fn block_forest_params() -> ForestParams {
    ForestParams {
        n_trees: 20,
        max_depth: 14,
        min_samples_leaf: 4,
        max_features: MaxFeatures::Count(8),
        bootstrap: true,
        target: TargetTransform::Log,
    }
}

/// Errors from reading phone tables or fitting and checking block predictors.
#[derive(Debug, thiserror::Error)]
pub enum PhoneError {
    #[error("cannot read phone latency table {}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
    #[error("phone latency table {} is not valid JSON: {error}", path.display())]
    Json { path: PathBuf, error: serde_json::Error },
    #[error("phone latency table {} is not a JSON object of key → latency", path.display())]
    NotAnObject { path: PathBuf },
    #[error("malformed block key `{key}` in {}: {reason}", path.display())]
    MalformedKey { path: PathBuf, key: String, reason: String },
    #[error("block `{key}` in {} has latency {value}; expected a positive number of milliseconds", path.display())]
    BadLatency { path: PathBuf, key: String, value: String },
    #[error("test fraction {fraction} leaves no training or no test blocks out of {n}")]
    BadSplit { fraction: f64, n: usize },
    #[error("forest features {found:?} are not the block features {expected:?}")]
    FeatureMismatch { found: Vec<String>, expected: Vec<String> },
    #[error("forest predicts target {found}, block predictors predict `{TARGET}`")]
    TargetMismatch { found: String },
    #[error(transparent)]
    Forest(#[from] ForestError),
}

/// One MBConv block as named by a table key. Sizes are at least 1 (as
/// [`MbConvBlock::parse_key`] ensures); counts derived from them saturate at
/// `u64::MAX` rather than overflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MbConvBlock {
    /// Input height and width.
    pub hw: u64,
    pub cin: u64,
    pub cout: u64,
    /// Expansion ratio: `cin * expand` channels inside the block.
    pub expand: u64,
    pub stride: u64,
    pub activation: String,
    /// Depthwise kernel size.
    pub kernel: u64,
    /// Whether the block has a squeeze-excite.
    pub se: bool,
}

/// The product of `factors`, saturating at `u64::MAX`.
fn mul<const N: usize>(factors: [u64; N]) -> u64 {
    factors.into_iter().fold(1, u64::saturating_mul)
}

/// The sum of `terms`, saturating at `u64::MAX`.
fn add<const N: usize>(terms: [u64; N]) -> u64 {
    terms.into_iter().fold(0, u64::saturating_add)
}

/// `make_divisible(v, 8)` of the MobileNet family: `v` rounded to the nearest
/// multiple of 8, at least 8, bumped up one step if that lost more than 10%.
fn make_divisible_8(v: f64) -> u64 {
    let rounded = (((v + 4.0) as u64) / 8 * 8).max(8);
    if (rounded as f64) < 0.9 * v {
        rounded.saturating_add(8)
    } else {
        rounded
    }
}

impl MbConvBlock {
    /// Parses a `conv_…` key; `Ok(None)` for keys of other kinds, `Err` with a
    /// reason for a `conv_` key that does not follow the scheme.
    pub fn parse_key(key: &str) -> Result<Option<Self>, String> {
        let Some(rest) = key.strip_prefix("conv_") else {
            return Ok(None);
        };
        let parts: Vec<&str> = rest.split('_').collect();
        if parts.len() < 8 {
            return Err(format!(
                "expected conv_{{hw}}_{{cin}}_{{cout}}_{{expand}}_{{stride}}_{{act}}_{{kernel}}_{{se|nose}}, \
                 found {} fields after `conv`",
                parts.len()
            ));
        }
        let number = |i: usize, name: &str| -> Result<u64, String> {
            match parts[i].parse::<u64>() {
                Ok(v) if v > 0 => Ok(v),
                _ => Err(format!("{name} `{}` is not a positive integer", parts[i])),
            }
        };
        let n = parts.len();
        let se = match parts[n - 1] {
            "se" => true,
            "nose" => false,
            other => return Err(format!("last field `{other}` is neither `se` nor `nose`")),
        };
        Ok(Some(MbConvBlock {
            hw: number(0, "hw")?,
            cin: number(1, "cin")?,
            cout: number(2, "cout")?,
            expand: number(3, "expand")?,
            stride: number(4, "stride")?,
            activation: parts[5..n - 2].join("_"),
            kernel: number(n - 2, "kernel")?,
            se,
        }))
    }

    /// Channels inside the block, `cin * expand`.
    pub fn mid(&self) -> u64 {
        mul([self.cin, self.expand])
    }

    /// Output side, `ceil(hw / stride)`.
    pub fn hw_out(&self) -> u64 {
        self.hw.div_ceil(self.stride.max(1))
    }

    /// Squeeze-excite reduced channels (0 without SE).
    pub fn se_mid(&self) -> u64 {
        if self.se {
            make_divisible_8(self.mid() as f64 / 4.0)
        } else {
            0
        }
    }

    /// Whether the block ends in a residual add.
    pub fn residual(&self) -> bool {
        self.stride == 1 && self.cin == self.cout
    }

    /// Multiply-accumulates of the block's convolutions.
    pub fn macs(&self) -> u64 {
        let (mid, out_px) = (self.mid(), mul([self.hw_out(), self.hw_out()]));
        let expand = if self.expand > 1 {
            mul([self.hw, self.hw, self.cin, mid])
        } else {
            0
        };
        let depthwise = mul([out_px, mid, self.kernel, self.kernel]);
        let se = mul([2, mid, self.se_mid()]);
        let project = mul([out_px, mid, self.cout]);
        add([expand, depthwise, se, project])
    }

    /// Weights and biases of the block's convolutions.
    pub fn params(&self) -> u64 {
        let (mid, r) = (self.mid(), self.se_mid());
        let expand = if self.expand > 1 {
            add([mul([self.cin, mid]), mid])
        } else {
            0
        };
        let depthwise = add([mul([mid, self.kernel, self.kernel]), mid]);
        let se = if self.se { add([mul([2, mid, r]), r, mid]) } else { 0 };
        let project = add([mul([mid, self.cout]), self.cout]);
        add([expand, depthwise, se, project])
    }

    /// The feature row, in the order of [`FEATURE_NAMES`].
    pub fn features(&self) -> Vec<f64> {
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        [self.hw, self.cin, self.cout, self.expand, self.stride, self.kernel]
            .iter()
            .map(|&v| v as f64)
            .chain([flag(self.se), flag(self.residual())])
            .chain([self.mid(), self.hw_out(), self.se_mid(), self.macs(), self.params()].map(|v| v as f64))
            .collect()
    }
}

/// One measured block.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockSample {
    pub key: String,
    pub block: MbConvBlock,
    pub latency_ms: f64,
}

/// The MBConv blocks of one phone table, sorted by key.
#[derive(Debug, Clone)]
pub struct PhoneBlocks {
    /// The file the table was read from.
    pub source: PathBuf,
    pub samples: Vec<BlockSample>,
    /// Keys of other kinds (`firstconv`, `mbpool`, `transds`, ...), counted by
    /// the part before the first `_`.
    pub other_keys: BTreeMap<String, usize>,
}

/// Reads a phone table (JSON object of key → latency in ms).
pub fn load_blocks(path: impl AsRef<Path>) -> Result<PhoneBlocks, PhoneError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|error| PhoneError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    parse_blocks(&text, path)
}

/// Parses a phone table; `source` names the file in errors. Every `conv_` key
/// must parse and carry a positive finite latency; other keys are only counted.
pub fn parse_blocks(text: &str, source: &Path) -> Result<PhoneBlocks, PhoneError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| PhoneError::Json {
        path: source.to_path_buf(),
        error: e,
    })?;
    let serde_json::Value::Object(map) = value else {
        return Err(PhoneError::NotAnObject {
            path: source.to_path_buf(),
        });
    };
    let mut entries: Vec<(String, serde_json::Value)> = map.into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut samples = Vec::new();
    let mut other_keys = BTreeMap::new();
    for (key, value) in entries {
        let block = match MbConvBlock::parse_key(&key) {
            Ok(Some(block)) => block,
            Ok(None) => {
                let kind = key.split('_').next().unwrap_or_default().to_string();
                *other_keys.entry(kind).or_insert(0) += 1;
                continue;
            }
            Err(reason) => {
                return Err(PhoneError::MalformedKey {
                    path: source.to_path_buf(),
                    key,
                    reason,
                });
            }
        };
        let latency_ms = match value.as_f64() {
            Some(v) if v.is_finite() && v > 0.0 => v,
            _ => {
                return Err(PhoneError::BadLatency {
                    path: source.to_path_buf(),
                    key,
                    value: value.to_string(),
                });
            }
        };
        samples.push(BlockSample { key, block, latency_ms });
    }
    Ok(PhoneBlocks {
        source: source.to_path_buf(),
        samples,
        other_keys,
    })
}

/// Splits `samples` into (train, test): a SplitMix64 shuffle seeded by `seed`,
/// then the first `round(n * test_fraction)` go to test. Deterministic for a
/// given sample order and seed; both parts must be non-empty.
pub fn split_train_test(
    samples: &[BlockSample],
    test_fraction: f64,
    seed: u64,
) -> Result<(Vec<&BlockSample>, Vec<&BlockSample>), PhoneError> {
    let n = samples.len();
    let n_test = (n as f64 * test_fraction).round();
    if !(1.0..n as f64).contains(&n_test) {
        return Err(PhoneError::BadSplit {
            fraction: test_fraction,
            n,
        });
    }
    let mut order: Vec<usize> = (0..n).collect();
    SplitMix64::new(seed).shuffle(&mut order);
    let (test, train) = order.split_at(n_test as usize);
    Ok((
        train.iter().map(|&i| &samples[i]).collect(),
        test.iter().map(|&i| &samples[i]).collect(),
    ))
}

/// Fits a block predictor on `train`: features named [`FEATURE_NAMES`],
/// target `latency_ms / macs` (see the module doc), metadata `target` = [`TARGET`].
pub fn fit_blocks(train: &[&BlockSample], params: &ForestParams, seed: u64) -> Result<Forest, PhoneError> {
    let x: Vec<Vec<f64>> = train.iter().map(|s| s.block.features()).collect();
    let y: Vec<f64> = train.iter().map(|s| s.latency_ms / s.block.macs() as f64).collect();
    let mut forest = forest::fit(&x, &y, params, seed)?.with_feature_names(FEATURE_NAMES)?;
    forest.set_metadata("target", TARGET.into());
    Ok(forest)
}

/// Checks that `forest` is a block predictor of this version: it takes
/// [`FEATURE_NAMES`] and predicts [`TARGET`].
pub fn check_block_forest(forest: &Forest) -> Result<(), PhoneError> {
    if !forest.feature_names().iter().map(String::as_str).eq(FEATURE_NAMES) {
        return Err(PhoneError::FeatureMismatch {
            found: forest.feature_names().to_vec(),
            expected: FEATURE_NAMES.map(String::from).to_vec(),
        });
    }
    match forest.metadata().get("target") {
        Some(serde_json::Value::String(t)) if t == TARGET => Ok(()),
        other => Err(PhoneError::TargetMismatch {
            found: other.map_or_else(|| "(none)".to_string(), |v| v.to_string()),
        }),
    }
}

/// Predicted latency of `block` in milliseconds from a forest made by
/// [`fit_blocks`] (checked with [`check_block_forest`] by the caller).
pub fn predict_block(forest: &Forest, block: &MbConvBlock) -> Result<f64, PhoneError> {
    Ok(forest.predict(&block.features())? * block.macs() as f64)
}

/// Accuracy of a predictor on held-out blocks. `within_*` are fractions of the
/// test blocks whose relative error `|pred - true| / true` is at most 5/10/15%.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccuracyReport {
    pub n_train: usize,
    pub n_test: usize,
    pub within_5: f64,
    pub within_10: f64,
    pub within_15: f64,
    /// Root mean squared error, ms.
    pub rmse_ms: f64,
    /// Root mean squared relative error, percent.
    pub rmspe_pct: f64,
}

impl fmt::Display for AccuracyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "train {} / test {}: ±5% {:.1}%, ±10% {:.1}%, ±15% {:.1}%, RMSE {:.4} ms, RMSPE {:.2}%",
            self.n_train,
            self.n_test,
            100.0 * self.within_5,
            100.0 * self.within_10,
            100.0 * self.within_15,
            self.rmse_ms,
            self.rmspe_pct
        )
    }
}

/// Scores `forest` on `test` (`n_train` is recorded, not used). `test` must be non-empty.
pub fn evaluate(forest: &Forest, test: &[&BlockSample], n_train: usize) -> Result<AccuracyReport, PhoneError> {
    check_block_forest(forest)?;
    if test.is_empty() {
        return Err(PhoneError::BadSplit {
            fraction: 0.0,
            n: n_train,
        });
    }
    let (mut within, mut sq, mut rel_sq) = ([0usize; 3], 0.0, 0.0);
    for sample in test {
        let predicted = predict_block(forest, &sample.block)?;
        let rel = (predicted - sample.latency_ms) / sample.latency_ms;
        for (count, bound) in within.iter_mut().zip([0.05, 0.10, 0.15]) {
            *count += usize::from(rel.abs() <= bound);
        }
        sq += (predicted - sample.latency_ms).powi(2);
        rel_sq += rel * rel;
    }
    let n = test.len() as f64;
    Ok(AccuracyReport {
        n_train,
        n_test: test.len(),
        within_5: within[0] as f64 / n,
        within_10: within[1] as f64 / n,
        within_15: within[2] as f64 / n,
        rmse_ms: (sq / n).sqrt(),
        rmspe_pct: 100.0 * (rel_sq / n).sqrt(),
    })
}

/// Splits `blocks` with `split_seed`, fits on the training part with
/// `fit_seed` and scores on the held-out part.
pub fn train_and_evaluate(
    blocks: &PhoneBlocks,
    params: &ForestParams,
    split_seed: u64,
    fit_seed: u64,
) -> Result<(Forest, AccuracyReport), PhoneError> {
    let (train, test) = split_train_test(&blocks.samples, TEST_FRACTION, split_seed)?;
    let forest = fit_blocks(&train, params, fit_seed)?;
    let report = evaluate(&forest, &test, train.len())?;
    Ok((forest, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keys_with_underscored_activations() {
        let b = MbConvBlock::parse_key("conv_56_24_32_4_2_hard_swish_5_se")
            .unwrap()
            .unwrap();
        assert_eq!(
            b,
            MbConvBlock {
                hw: 56,
                cin: 24,
                cout: 32,
                expand: 4,
                stride: 2,
                activation: "hard_swish".into(),
                kernel: 5,
                se: true
            }
        );
        assert_eq!(MbConvBlock::parse_key("firstconv_224_3_16_2_3").unwrap(), None);
        assert!(MbConvBlock::parse_key("conv_56_24_32_4_2_relu_5_maybe").is_err());
        assert!(
            MbConvBlock::parse_key("conv_56_x_32_4_2_relu_5_se")
                .unwrap_err()
                .contains("cin")
        );
        assert!(MbConvBlock::parse_key("conv_56_24_32_0_2_relu_5_se").is_err());
        assert!(MbConvBlock::parse_key("conv_56_24_se").is_err());
    }

    #[test]
    fn counts_macs_and_params_by_hand() {
        // 8x8x16, expand 2 (mid 32), stride 2 (4x4 out), 3x3, SE r = make_divisible(8) = 8, cout 24.
        let b = MbConvBlock::parse_key("conv_8_16_24_2_2_hard_swish_3_se")
            .unwrap()
            .unwrap();
        assert_eq!((b.mid(), b.hw_out(), b.se_mid(), b.residual()), (32, 4, 8, false));
        let macs = 64 * 16 * 32 + 16 * 32 * 9 + 2 * 32 * 8 + 16 * 32 * 24;
        assert_eq!(b.macs(), macs);
        let params = (16 * 32 + 32) + (32 * 9 + 32) + (32 * 8 + 8 + 8 * 32 + 32) + (32 * 24 + 24);
        assert_eq!(b.params(), params);
        // expand 1: no expand conv; stride 1 and cin == cout: residual; odd hw rounds up.
        let b = MbConvBlock::parse_key("conv_7_16_16_1_1_hard_swish_5_nose")
            .unwrap()
            .unwrap();
        assert_eq!((b.hw_out(), b.se_mid(), b.residual()), (7, 0, true));
        assert_eq!(b.macs(), 49 * 16 * 25 + 49 * 16 * 16);
        assert_eq!(b.features().len(), FEATURE_NAMES.len());
        assert_eq!(make_divisible_8(36.0), 40);
        assert_eq!(make_divisible_8(3.0), 8);
        assert_eq!(make_divisible_8(60.0), 64);
        let huge = MbConvBlock::parse_key("conv_4294967296_4294967296_9_6_1_relu_3_se")
            .unwrap()
            .unwrap();
        assert_eq!((huge.macs(), huge.params()), (u64::MAX, u64::MAX));
    }

    const TABLE: &str = r#"{"conv_8_16_16_1_1_hard_swish_3_nose": 0.5, "conv_8_16_24_2_2_hard_swish_3_se": 0.7,
        "firstconv_224_3_16_2_3": 1.0, "transds_1_2": 3.0, "transds_3_4": 3.0}"#;

    #[test]
    fn parses_a_table_and_counts_other_keys() {
        let blocks = parse_blocks(TABLE, Path::new("phone.json")).unwrap();
        assert_eq!(blocks.samples.len(), 2);
        assert_eq!(blocks.samples[1].latency_ms, 0.7);
        assert_eq!(
            blocks.other_keys,
            BTreeMap::from([("firstconv".into(), 1), ("transds".into(), 2)])
        );
    }

    #[test]
    fn errors_name_the_key_and_the_file() {
        let bad = r#"{"conv_8_16_16_1_1_hard_swish_3_nose": "fast"}"#;
        let err = parse_blocks(bad, Path::new("phone.json")).unwrap_err();
        assert!(matches!(err, PhoneError::BadLatency { .. }));
        let msg = err.to_string();
        assert!(
            msg.contains("conv_8_16_16_1_1_hard_swish_3_nose") && msg.contains("phone.json"),
            "{msg}"
        );
        let bad = r#"{"conv_8_16_16_1_1_hard_swish_3_sometimes": 1.0}"#;
        let msg = parse_blocks(bad, Path::new("phone.json")).unwrap_err().to_string();
        assert!(
            msg.contains("conv_8_16_16_1_1_hard_swish_3_sometimes") && msg.contains("phone.json"),
            "{msg}"
        );
        assert!(matches!(
            parse_blocks("[1]", Path::new("p")),
            Err(PhoneError::NotAnObject { .. })
        ));
        assert!(matches!(load_blocks("/nonexistent/p.json"), Err(PhoneError::Io { .. })));
    }

    fn synthetic(n: u64) -> Vec<BlockSample> {
        (0..n)
            .map(|i| {
                let key = format!("conv_{}_16_24_{}_1_hard_swish_3_nose", 8 + i % 40, 1 + i % 6);
                let block = MbConvBlock::parse_key(&key).unwrap().unwrap();
                let latency_ms =
                    1e-6 * block.macs() as f64 * (1.0 + 0.05 * block.expand as f64) + 0.002 * block.hw as f64;
                BlockSample { key, block, latency_ms }
            })
            .collect()
    }

    #[test]
    fn split_is_deterministic_disjoint_and_sized() {
        let samples = synthetic(101);
        let (train, test) = split_train_test(&samples, 0.2, 3).unwrap();
        assert_eq!((train.len(), test.len()), (81, 20));
        let (train2, test2) = split_train_test(&samples, 0.2, 3).unwrap();
        assert_eq!((train, test.clone()), (train2, test2));
        let (_, other) = split_train_test(&samples, 0.2, 4).unwrap();
        assert_ne!(test, other);
        assert!(split_train_test(&samples[..2], 0.2, 3).is_err());
    }

    #[test]
    fn evaluate_scores_a_forest() {
        let samples = synthetic(240);
        let (train, test) = split_train_test(&samples, 0.2, 1).unwrap();
        let forest = fit_blocks(&train, &block_forest_params(), 1).unwrap();
        let report = evaluate(&forest, &test, train.len()).unwrap();
        assert_eq!((report.n_train, report.n_test), (192, 48));
        assert!(report.within_5 <= report.within_10 && report.within_10 <= report.within_15);
        assert!(report.within_10 > 0.9, "{report}");
        let unnamed = forest::fit(&[vec![1.0]], &[1.0], &block_forest_params(), 0).unwrap();
        assert!(matches!(
            evaluate(&unnamed, &test, 0),
            Err(PhoneError::FeatureMismatch { .. })
        ));
        let x: Vec<Vec<f64>> = train.iter().map(|s| s.block.features()).collect();
        let y: Vec<f64> = train.iter().map(|s| s.latency_ms).collect();
        let direct = forest::fit(&x, &y, &block_forest_params(), 1)
            .unwrap()
            .with_feature_names(FEATURE_NAMES);
        assert!(matches!(
            evaluate(&direct.unwrap(), &test, 0),
            Err(PhoneError::TargetMismatch { .. })
        ));
    }
}
