//! Per-kernel-class random forests fitted from a profiler CSV (nn-Meter's
//! per-kernel regressors), saved as one versioned JSON file next to the data.
//!
//! A forest predicts a kernel's milliseconds from the nn-Meter features of
//! its leading op class ([`crate::features::feature_names`]), fitted in log
//! space so that errors are relative. The file also keeps, per class, the
//! out-of-fold accuracy measured when it was fitted.

use crate::forest::{self, Forest, ForestError, ForestParams, MaxFeatures, TargetTransform};
use crate::kernels::OpClass;
use crate::profiler::adaptive::out_of_fold_errors_with;
use crate::profiler::csv::Row;
use crate::profiler::space::Origin;
use crate::profiler::timing::Statistic;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The file format this build reads and writes.
pub const FORMAT: &str = "stretch.kernel-regressors/1";

/// Classes with fewer measured rows than this get no forest (the analytic
/// model stays their predictor).
pub const MIN_ROWS: usize = 8;

#[derive(Debug, Error)]
pub enum RegressorError {
    #[error("cannot {action} {}: {error}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: not a kernel-regressors file: {error}", path.display())]
    Json { path: PathBuf, error: serde_json::Error },
    #[error("{}: format `{found}`, this build reads `{FORMAT}`", path.display())]
    Format { path: PathBuf, found: String },
    #[error(
        "{source_csv} line {line}: {what} is `{found}` but earlier rows have `{expected}`; fit one engine setting per file"
    )]
    Mixed {
        source_csv: String,
        line: usize,
        what: &'static str,
        found: String,
        expected: String,
    },
    #[error("{source_csv}: no kernel class has the {MIN_ROWS} rows a forest needs")]
    TooFewRows { source_csv: String },
    #[error("{}: class `{class}`: the forest reads feature `{feature}`, which this build does not compute (it computes {known})", path.display())]
    UnknownFeature {
        path: PathBuf,
        class: String,
        feature: String,
        known: String,
    },
    #[error("{}: fitted on kernels run at {found} (engine `{engine}`), named for {want}", path.display())]
    Precision {
        path: PathBuf,
        engine: String,
        found: crate::Precision,
        want: crate::Precision,
    },
    #[error("{}: class `{class}`: {error}", path.display())]
    Forest {
        path: PathBuf,
        class: String,
        error: ForestError,
    },
}

/// How well a class's forest predicts rows it was not fitted on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassReport {
    pub rows: usize,
    /// Out-of-fold shares of rows within ±5%, ±10%, ±15%.
    pub within_5: f64,
    pub within_10: f64,
    pub within_15: f64,
    /// Root mean squared percentage error, out of fold.
    pub rmspe: f64,
    /// The largest value of each feature among the rows fitted (in
    /// [`crate::features::model_feature_names`] order): a forest cannot
    /// extrapolate past them. Empty in files written before it was kept.
    #[serde(default)]
    pub feature_max: Vec<f64>,
}

/// The time an in-model kernel is fitted at when the engine ran it inside
/// another kernel (no plan node of its own took any time): a fused residual
/// add costs next to nothing, which a log-space forest must still see.
pub const IN_MODEL_FLOOR_MS: f64 = 0.001;

/// A feature more than this factor above its fitted maximum is beyond the
/// forest's range.
pub const RANGE_SLACK: f64 = 1.1;

/// Forests per op class, fitted from one engine setting's measurements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelRegressors {
    format: String,
    /// The CSV the forests were fitted from.
    pub source_csv: String,
    pub engine: String,
    pub threads: usize,
    pub cores: String,
    pub seed: u64,
    /// The summary of each row's runs the forests were fitted to (files
    /// from before the choice existed fitted the median).
    #[serde(default)]
    pub statistic: Statistic,
    pub forests: BTreeMap<String, Forest>,
    pub report: BTreeMap<String, ClassReport>,
    /// Classes whose forests predict milliseconds per GFLOP (the kernel's
    /// time is that times its `flops` / 1e9): a tree's leaves are then
    /// efficiencies, which a split on a shape feature such as `cout_tail`
    /// carries to sizes no row had. Empty in files from before (they
    /// predict milliseconds).
    #[serde(default)]
    pub per_gflop: Vec<String>,
}

/// Classes fitted per GFLOP ([`KernelRegressors::per_gflop`]): those whose
/// time follows their arithmetic, and whose efficiency depends on tiling.
const PER_GFLOP: [OpClass; 2] = [OpClass::Conv, OpClass::DwConv];

/// A kernel's GFLOPs from its measured features, where its class counts them.
fn gflops(class: OpClass, features: &[f64]) -> Option<f64> {
    crate::features::named(crate::features::feature_names(class), features, "flops")
        .map(|f| f / 1e9)
        .filter(|g| *g > 0.0)
}

/// Forests fit log times (relative errors), except for residual adds timed
/// inside models: an engine runs some of them inside the product before
/// them for next to nothing and others on their own, and a mean in log
/// space of such a mix would predict far less than the time they add up to.
fn params(class: &str, in_model: bool) -> ForestParams {
    let target = if in_model && class == OpClass::Add.name() {
        TargetTransform::Identity
    } else {
        TargetTransform::Log
    };
    ForestParams {
        n_trees: 32,
        max_depth: 20,
        min_samples_leaf: 2,
        max_features: MaxFeatures::All,
        bootstrap: true,
        target,
    }
}

/// A class's feature rows, their times, and whether any was timed in a model.
type ClassRows = (Vec<Vec<f64>>, Vec<f64>, bool);

/// The engine, thread count and core set every row shares; refuses an
/// empty list and a row measured otherwise than the first.
fn one_setting(rows: &[(usize, Row)], source_csv: &str) -> Result<(String, usize, String), RegressorError> {
    let first = rows.first().ok_or_else(|| RegressorError::TooFewRows {
        source_csv: source_csv.into(),
    })?;
    let (engine, threads, cores) = (&first.1.engine, first.1.threads, first.1.cores.to_string());
    for (line, r) in rows {
        let mixed = |what, found: String, expected: String| RegressorError::Mixed {
            source_csv: source_csv.into(),
            line: *line,
            what,
            found,
            expected,
        };
        if &r.engine != engine {
            return Err(mixed("engine", r.engine.clone(), engine.clone()));
        }
        if r.threads != threads {
            return Err(mixed("threads", r.threads.to_string(), threads.to_string()));
        }
        if r.cores.to_string() != cores {
            return Err(mixed("cores", r.cores.to_string(), cores.clone()));
        }
    }
    Ok((engine.clone(), threads, cores))
}

/// Each op class's feature rows and targets (milliseconds, or per GFLOP
/// for [`PER_GFLOP`] classes); rows without a positive time are left out.
fn class_rows(rows: &[(usize, Row)], statistic: Statistic) -> BTreeMap<&'static str, ClassRows> {
    let mut by_class: BTreeMap<&'static str, ClassRows> = BTreeMap::new();
    for (_, r) in rows {
        let ms = match r.origin {
            Origin::InModel => r.ms(statistic).max(IN_MODEL_FLOOR_MS),
            _ => r.ms(statistic),
        };
        let class = r.kind.op_class();
        let target = if PER_GFLOP.contains(&class) {
            gflops(class, &r.features).map(|g| ms / g)
        } else {
            Some(ms)
        };
        if let (true, Some(target)) = (ms > 0.0, target) {
            let entry = by_class.entry(class.name()).or_default();
            entry.0.push(crate::features::model_features(class, &r.features));
            entry.1.push(target);
            entry.2 |= r.origin == Origin::InModel;
        }
    }
    by_class
}

/// One class's forest and its out-of-fold accuracy.
fn fit_class(
    class: &'static str,
    x: &[Vec<f64>],
    y: &[f64],
    in_model: bool,
    seed: u64,
    label: &Path,
) -> Result<(Forest, ClassReport), RegressorError> {
    let wrap = |error| RegressorError::Forest {
        path: label.to_path_buf(),
        class: class.into(),
        error,
    };
    let params = params(class, in_model);
    let errors = out_of_fold_errors_with(x, y, seed, &params).map_err(wrap)?;
    let rmspe = (errors.iter().map(|e| e * e).sum::<f64>() / errors.len() as f64).sqrt();
    let names = crate::features::model_feature_names(class_of(class).unwrap_or(OpClass::Act));
    let mut f = forest::fit(x, y, &params, seed)
        .and_then(|f| f.with_feature_names(names))
        .map_err(wrap)?;
    f.set_metadata("class", class.into());
    f.set_metadata("rows", x.len().into());
    let report = ClassReport {
        rows: x.len(),
        within_5: share(&errors, 0.05),
        within_10: share(&errors, 0.10),
        within_15: share(&errors, 0.15),
        rmspe,
        feature_max: (0..x[0].len())
            .map(|i| x.iter().map(|r| r[i]).fold(f64::NEG_INFINITY, f64::max))
            .collect(),
    };
    Ok((f, report))
}

fn share(errors: &[f64], within: f64) -> f64 {
    errors.iter().filter(|e| **e <= within).count() as f64 / errors.len().max(1) as f64
}

impl KernelRegressors {
    /// Fits one forest per op class with at least [`MIN_ROWS`] rows in
    /// `rows` (each with its CSV line number), and measures its out-of-fold
    /// accuracy, each row's time taken as `statistic` of its runs. All rows
    /// must come from one engine, thread count and core set.
    pub fn fit(
        rows: &[(usize, Row)],
        source_csv: &str,
        seed: u64,
        statistic: Statistic,
    ) -> Result<KernelRegressors, RegressorError> {
        let (engine, threads, cores) = one_setting(rows, source_csv)?;
        let label = PathBuf::from(source_csv);
        let mut forests = BTreeMap::new();
        let mut report = BTreeMap::new();
        for (class, (x, y, in_model)) in class_rows(rows, statistic) {
            if x.len() < MIN_ROWS {
                continue;
            }
            let (f, r) = fit_class(class, &x, &y, in_model, seed, &label)?;
            forests.insert(class.to_string(), f);
            report.insert(class.to_string(), r);
        }
        if forests.is_empty() {
            return Err(RegressorError::TooFewRows {
                source_csv: source_csv.into(),
            });
        }
        Ok(KernelRegressors {
            format: FORMAT.into(),
            source_csv: source_csv.into(),
            engine,
            threads,
            cores,
            seed,
            statistic,
            per_gflop: PER_GFLOP
                .iter()
                .filter(|c| forests.contains_key(c.name()))
                .map(|c| c.name().to_string())
                .collect(),
            forests,
            report,
        })
    }

    /// Predicted milliseconds of a kernel of `class` with measured
    /// `features` (its class's [`crate::features::feature_names`]), or
    /// `None` when no forest covers the class. The forest gets the
    /// [`crate::features::model_features`] it names, so files fitted
    /// before a derived feature existed predict as they did.
    pub fn predict(&self, class: OpClass, features: &[f64]) -> Option<Result<f64, ForestError>> {
        let forest = self.forests.get(class.name())?;
        let names = crate::features::model_feature_names(class);
        let all = crate::features::model_features(class, features);
        let picked: Vec<f64> = forest
            .feature_names()
            .iter()
            .map(|n| crate::features::named(&names, &all, n).unwrap_or(f64::NAN))
            .collect();
        let scale = if self.per_gflop.iter().any(|c| c == class.name()) {
            match gflops(class, features) {
                Some(g) => g,
                None => return Some(Ok(0.0)),
            }
        } else {
            1.0
        };
        Some(forest.predict(&picked).map(|v| v * scale))
    }

    /// The name of the first feature of a `class` kernel that lies more than
    /// [`RANGE_SLACK`] times above every row the class's forest was fitted
    /// on, or `None` when all lie within (or the file keeps no range).
    pub fn beyond_range(&self, class: OpClass, features: &[f64]) -> Option<&'static str> {
        let max = &self.report.get(class.name())?.feature_max;
        let names = crate::features::feature_names(class);
        features
            .iter()
            .zip(max)
            .zip(names)
            .find(|((v, m), _)| **v > **m * RANGE_SLACK)
            .map(|(_, n)| *n)
    }

    pub fn save(&self, path: &Path) -> Result<(), RegressorError> {
        let json = serde_json::to_string(self).map_err(|error| RegressorError::Json {
            path: path.to_path_buf(),
            error,
        })?;
        std::fs::write(path, json + "\n").map_err(|error| RegressorError::Io {
            action: "write",
            path: path.to_path_buf(),
            error,
        })
    }

    /// Reads a file written by [`KernelRegressors::save`], checking its
    /// format version and every forest.
    /// The precision the kernels ran at: the suffix `stretch profile
    /// --precision` gives the engine (`tract/int8`), fp32 without one.
    pub fn precision(&self) -> crate::Precision {
        self.engine
            .rsplit_once('/')
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or(crate::Precision::Fp32)
    }

    /// [`KernelRegressors::load`], refused unless fitted on kernels run at `want`.
    pub fn load_at(path: &Path, want: crate::Precision) -> Result<KernelRegressors, RegressorError> {
        let regs = KernelRegressors::load(path)?;
        let found = regs.precision();
        if found != want {
            return Err(RegressorError::Precision {
                path: path.to_path_buf(),
                engine: regs.engine,
                found,
                want,
            });
        }
        Ok(regs)
    }

    pub fn load(path: &Path) -> Result<KernelRegressors, RegressorError> {
        let text = std::fs::read_to_string(path).map_err(|error| RegressorError::Io {
            action: "read",
            path: path.to_path_buf(),
            error,
        })?;
        let json = |error| RegressorError::Json {
            path: path.to_path_buf(),
            error,
        };
        let value: serde_json::Value = serde_json::from_str(&text).map_err(json)?;
        let found = value.get("format").and_then(|f| f.as_str()).unwrap_or("(none)");
        if found != FORMAT {
            return Err(RegressorError::Format {
                path: path.to_path_buf(),
                found: found.into(),
            });
        }
        let regs: KernelRegressors = serde_json::from_value(value).map_err(json)?;
        for (class, f) in &regs.forests {
            f.validate(path).map_err(|error| RegressorError::Forest {
                path: path.to_path_buf(),
                class: class.clone(),
                error,
            })?;
            let known = class_of(class)
                .map(crate::features::model_feature_names)
                .unwrap_or_default();
            if let Some(feature) = f.feature_names().iter().find(|n| !known.contains(&n.as_str())) {
                return Err(RegressorError::UnknownFeature {
                    path: path.to_path_buf(),
                    class: class.clone(),
                    feature: feature.clone(),
                    known: known.join(", "),
                });
            }
        }
        Ok(regs)
    }
}

fn class_of(name: &str) -> Option<OpClass> {
    OpClass::ALL.into_iter().find(|c| c.name() == name)
}
