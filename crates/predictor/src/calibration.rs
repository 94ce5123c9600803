//! In-model calibration of a processor's kernel predictions.
//!
//! Kernels are profiled alone; inside a whole model they run with other
//! cache contents, after other kernels and with the engine's per-call work
//! between them, and the difference is systematic per kernel class (on this
//! project's host, sums of isolated kernels fell below every MobileNetV2- and
//! RegNet-style model). A [`Calibration`] scales each group's kernels by a
//! factor and adds a fixed cost per kernel, both fitted to whole models
//! measured on the processor ([`Calibration::fit`]): models that are not the
//! ones it is judged on. Groups are the kernel classes, with convolutions
//! split three ways ([`group`]): 1x1, grouped (neither dense nor
//! depthwise) and the rest, because an engine runs them with different
//! kernels.

use crate::kernels::OpClass;
use crate::model::{KernelPrediction, Prediction};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CalibrationError {
    #[error("{path}: cannot read: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("{path}: not a calibration file: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("{path}: class `{class}`: {reason}")]
    Value {
        path: PathBuf,
        class: String,
        reason: String,
    },
    #[error("cannot fit a calibration: {reason}")]
    Fit { reason: String },
}

/// Per-group factors and a per-kernel cost applied to a processor's
/// kernel predictions (schema `stretch.calibration/2`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub schema: String,
    /// Kernel group ([`group`]) to the factor its kernels' predictions are
    /// multiplied by; groups not listed keep theirs.
    pub factors: BTreeMap<String, f64>,
    /// Added to every kernel, in microseconds.
    pub per_kernel_us: f64,
    /// What it was fitted on (models, engine, processor, statistic).
    pub fitted_on: String,
    /// Relative errors of the fitted models before and after calibration.
    pub fit_rmspe_before: f64,
    pub fit_rmspe_after: f64,
}

/// One measured model for [`Calibration::fit`]: its prediction before
/// calibration and the measured latency.
#[derive(Clone, Debug)]
pub struct Observation {
    pub prediction: Prediction,
    pub measured_ms: f64,
}

/// A group gets a factor when it is at least this share of the predicted
/// time of [`MIN_MODELS`] fitted models (or of all, when fewer).
pub const MIN_SHARE: f64 = 0.05;
pub const MIN_MODELS: usize = 5;

/// The groups [`Calibration::speed_by_kind`] gives their own factor:
/// grouped and depthwise convolutions.
pub const GROUPED_KINDS: [&str; 2] = ["conv-grouped", "dwconv"];

/// The convolution groups [`group`] adds to the kernel classes.
const CONV_GROUPS: [&str; 2] = ["conv-1x1", "conv-grouped"];

/// The calibration group of a kernel: its class's name, except that a
/// convolution whose weights hold fewer than `cin * cout * k * k / 1.5`
/// values (a grouped one) is `conv-grouped` and a 1x1 convolution is
/// `conv-1x1`.
pub fn group(k: &KernelPrediction) -> &'static str {
    if k.class == OpClass::Conv {
        let f = |name: &str| crate::features::named(k.feature_names, &k.features, name);
        if let (Some(cin), Some(cout), Some(kk), Some(params)) = (f("cin"), f("cout"), f("k"), f("params")) {
            if params > 0.0 && cin * cout * kk * kk / params > 1.5 {
                return CONV_GROUPS[1];
            }
            if kk == 1.0 {
                return CONV_GROUPS[0];
            }
        }
    }
    k.class.name()
}

/// Factors outside this range are refused when loading: a calibration that
/// needs more is describing another machine.
const FACTOR_RANGE: (f64, f64) = (0.05, 20.0);

impl Calibration {
    pub const SCHEMA: &'static str = "stretch.calibration/2";

    pub fn load(path: &Path) -> Result<Calibration, CalibrationError> {
        let text = std::fs::read_to_string(path).map_err(|e| CalibrationError::Read {
            path: path.into(),
            reason: e.to_string(),
        })?;
        let c: Calibration = serde_json::from_str(&text).map_err(|e| CalibrationError::Parse {
            path: path.into(),
            reason: e.to_string(),
        })?;
        if c.schema != Self::SCHEMA {
            return Err(CalibrationError::Parse {
                path: path.into(),
                reason: format!("schema `{}`, expected `{}`", c.schema, Self::SCHEMA),
            });
        }
        let bad = |class: &str, reason: String| CalibrationError::Value {
            path: path.into(),
            class: class.into(),
            reason,
        };
        for (class, f) in &c.factors {
            if OpClass::from_name(class).is_none() && !CONV_GROUPS.contains(&class.as_str()) {
                return Err(bad(class, "not a kernel group".into()));
            }
            if !(FACTOR_RANGE.0..=FACTOR_RANGE.1).contains(f) {
                return Err(bad(
                    class,
                    format!("factor {f} outside [{}, {}]", FACTOR_RANGE.0, FACTOR_RANGE.1),
                ));
            }
        }
        if !c.per_kernel_us.is_finite() {
            return Err(bad("per_kernel_us", format!("{} is not a number", c.per_kernel_us)));
        }
        Ok(c)
    }

    /// Scales every kernel of `p` by its group's factor, adds the per-kernel
    /// cost and recomputes the total.
    pub fn apply(&self, p: &mut Prediction) {
        for k in &mut p.kernels {
            let f = self.factors.get(group(k)).copied().unwrap_or(1.0);
            k.ms = (k.ms * f + self.per_kernel_us / 1e3).max(0.0);
        }
        p.total_ms = p.subgraph_overhead_ms + p.kernels.iter().map(|k| k.ms).sum::<f64>();
    }

    /// Fits a factor per group and the per-kernel cost so that calibrated
    /// predictions of `models` match their measurements in relative terms
    /// (least squares on relative errors). Only groups that are at least
    /// [`MIN_SHARE`] of the predicted time of [`MIN_MODELS`] models get a
    /// factor (the rest keep theirs). A ridge of weight `ridge`, relative to
    /// each unknown's own sum of squares (so it does not depend on units),
    /// pulls each factor towards 1 and the cost towards 0.
    pub fn fit(models: &[Observation], ridge: f64, fitted_on: &str) -> Result<Calibration, CalibrationError> {
        let fail = |reason: String| CalibrationError::Fit { reason };
        if models.is_empty() {
            return Err(fail("no measured models".into()));
        }
        let mut seen: BTreeMap<&'static str, usize> = BTreeMap::new();
        for m in models {
            let mut share: BTreeMap<&'static str, f64> = BTreeMap::new();
            for k in &m.prediction.kernels {
                *share.entry(group(k)).or_default() += k.ms;
            }
            let total = m.prediction.total_ms.max(f64::MIN_POSITIVE);
            for (g, ms) in share {
                if ms / total >= MIN_SHARE {
                    *seen.entry(g).or_default() += 1;
                }
            }
        }
        let needed = MIN_MODELS.min(models.len());
        let classes: Vec<&'static str> = seen.into_iter().filter(|(_, n)| *n >= needed).map(|(g, _)| g).collect();
        let n = classes.len() + 1;
        let mut ata = vec![vec![0.0; n]; n];
        let mut atb = vec![0.0; n];
        for m in models {
            let y = m.measured_ms;
            if !(y > 0.0 && y.is_finite()) {
                return Err(fail(format!("measured latency {y} ms is not positive")));
            }
            let mut row = vec![0.0; n];
            let mut fixed = m.prediction.subgraph_overhead_ms;
            for k in &m.prediction.kernels {
                match classes.binary_search(&group(k)) {
                    Ok(c) => row[c] += k.ms / y,
                    Err(_) => fixed += k.ms,
                }
            }
            row[n - 1] = m.prediction.kernels.len() as f64 / 1e3 / y;
            let b = 1.0 - fixed / y;
            add_row(&mut ata, &mut atb, &row, b);
        }
        for i in 0..n {
            let scale = ridge * ata[i][i];
            ata[i][i] += scale;
            if i < n - 1 {
                atb[i] += scale;
            }
        }
        let theta = solve(ata, atb).ok_or_else(|| fail("singular system".into()))?;
        let factors: BTreeMap<String, f64> = classes
            .iter()
            .zip(&theta)
            .map(|(c, f)| (c.to_string(), f.clamp(FACTOR_RANGE.0, FACTOR_RANGE.1)))
            .collect();
        Ok(Calibration::judged(factors, theta[n - 1], fitted_on, models))
    }

    /// One factor for every kernel group, no per-kernel cost: the median
    /// over `models` of measured / predicted. It carries the machine's
    /// speed at the time `models` were measured (a VM's host load, a
    /// phone's clocks) and nothing about kernel classes; the median keeps
    /// one odd model from moving it.
    pub fn speed(models: &[Observation], fitted_on: &str) -> Result<Calibration, CalibrationError> {
        let mut ratios = Vec::with_capacity(models.len());
        for m in models {
            let (y, p) = (m.measured_ms, m.prediction.total_ms);
            if !(y > 0.0 && y.is_finite() && p > 0.0 && p.is_finite()) {
                return Err(CalibrationError::Fit {
                    reason: format!("measured {y} ms against predicted {p} ms: both must be positive"),
                });
            }
            ratios.push(y / p);
        }
        let f = crate::profiler::timing::Timing::of(ratios)
            .ok_or_else(|| CalibrationError::Fit {
                reason: "no measured models".into(),
            })?
            .median_ms
            .clamp(FACTOR_RANGE.0, FACTOR_RANGE.1);
        let factors = OpClass::ALL
            .iter()
            .map(|c| c.name())
            .chain(CONV_GROUPS)
            .map(|g| (g.to_string(), f))
            .collect();
        Ok(Calibration::judged(factors, 0.0, fitted_on, models))
    }

    /// Two speed factors instead of [`Calibration::speed`]'s one: one for
    /// the groups in [`GROUPED_KINDS`] (grouped and depthwise convolutions,
    /// which a slower phase of the machine can slow unlike dense ones), one
    /// for every other group; no per-kernel cost. Fitted by least squares
    /// on relative errors over `models`, with a ridge of weight 0.1
    /// (relative to each unknown's sum of squares) towards the single
    /// factor, so that a probe with little of one kind keeps about the
    /// single factor for it.
    pub fn speed_by_kind(models: &[Observation], fitted_on: &str) -> Result<Calibration, CalibrationError> {
        let single = Calibration::speed(models, fitted_on)?;
        let f = single.factors.get("conv").copied().unwrap_or(1.0);
        let mut ata = vec![vec![0.0; 2]; 2];
        let mut atb = vec![0.0; 2];
        for m in models {
            let y = m.measured_ms;
            let mut row = [0.0; 2];
            for k in &m.prediction.kernels {
                row[usize::from(GROUPED_KINDS.contains(&group(k)))] += k.ms / y;
            }
            add_row(&mut ata, &mut atb, &row, 1.0 - m.prediction.subgraph_overhead_ms / y);
        }
        for i in 0..2 {
            let scale = if ata[i][i] > 0.0 { 0.1 * ata[i][i] } else { 1.0 };
            ata[i][i] += scale;
            atb[i] += scale * f;
        }
        let theta = solve(ata, atb).ok_or_else(|| CalibrationError::Fit {
            reason: "singular system".into(),
        })?;
        let [dense, grouped] = [theta[0], theta[1]].map(|x| x.clamp(FACTOR_RANGE.0, FACTOR_RANGE.1));
        let factors = OpClass::ALL
            .iter()
            .map(|c| c.name())
            .chain(CONV_GROUPS)
            .map(|g| (g.to_string(), if GROUPED_KINDS.contains(&g) { grouped } else { dense }))
            .collect();
        Ok(Calibration::judged(factors, 0.0, fitted_on, models))
    }

    /// A calibration of `factors` and `per_kernel_us`, with its relative
    /// errors on `models` before and after it.
    fn judged(
        factors: BTreeMap<String, f64>,
        per_kernel_us: f64,
        fitted_on: &str,
        models: &[Observation],
    ) -> Calibration {
        let mut c = Calibration {
            schema: Self::SCHEMA.into(),
            factors,
            per_kernel_us,
            fitted_on: fitted_on.into(),
            fit_rmspe_before: 0.0,
            fit_rmspe_after: 0.0,
        };
        c.fit_rmspe_before = rmspe(models.iter().map(|m| (m.prediction.total_ms, m.measured_ms)));
        c.fit_rmspe_after = rmspe(models.iter().map(|m| {
            let mut p = m.prediction.clone();
            c.apply(&mut p);
            (p.total_ms, m.measured_ms)
        }));
        c
    }
}

/// Root mean square of relative errors (predicted, measured).
fn rmspe(pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (sum, n) = pairs.fold((0.0, 0usize), |(s, n), (p, m)| (s + ((p - m) / m).powi(2), n + 1));
    if n == 0 { 0.0 } else { (sum / n as f64).sqrt() }
}

/// Adds one observation `row · x ≈ b` to the normal equations `ata x = atb`.
fn add_row(ata: &mut [Vec<f64>], atb: &mut [f64], row: &[f64], b: f64) {
    for (i, ri) in row.iter().enumerate() {
        atb[i] += ri * b;
        for (j, rj) in row.iter().enumerate() {
            ata[i][j] += ri * rj;
        }
    }
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (top, rest) = a.split_at_mut(col + 1);
        let pivot_row = &top[col];
        for (r, row) in rest.iter_mut().enumerate() {
            let f = row[col] / pivot_row[col];
            for (x, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= f * p;
            }
            b[col + 1 + r] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = (r + 1..n).map(|c| a[r][c] * x[c]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Source;

    fn kernel(class: OpClass, ms: f64) -> KernelPrediction {
        KernelPrediction {
            name: "k".into(),
            class,
            ops: vec![],
            feature_names: &[],
            features: vec![],
            ms,
            source: Source::Analytic,
            floor_ms: 0.0,
        }
    }

    fn prediction(kernels: Vec<KernelPrediction>) -> Prediction {
        Prediction {
            processor: "cpu0".into(),
            total_ms: kernels.iter().map(|k| k.ms).sum(),
            subgraph_overhead_ms: 0.0,
            kernels,
            calibration: None,
        }
    }

    #[test]
    fn the_speed_factor_is_the_median_ratio_and_scales_every_group() {
        let models: Vec<Observation> = [1.10, 1.20, 5.0, 1.15, 0.9]
            .iter()
            .map(|r| Observation {
                prediction: prediction(vec![kernel(OpClass::Conv, 2.0), kernel(OpClass::DwConv, 1.0)]),
                measured_ms: 3.0 * r,
            })
            .collect();
        let c = Calibration::speed(&models, "test").unwrap();
        assert!((c.factors["conv"] - 1.15).abs() < 1e-12, "{:?}", c.factors);
        assert!(c.factors.values().all(|f| *f == c.factors["conv"]));
        assert!(c.factors.contains_key("conv-1x1") && c.factors.contains_key("fc"));
        let mut p = prediction(vec![kernel(OpClass::Fc, 1.0), kernel(OpClass::Pool, 1.0)]);
        c.apply(&mut p);
        assert!((p.total_ms - 2.3).abs() < 1e-12, "{}", p.total_ms);
        let bad = [Observation {
            prediction: prediction(vec![kernel(OpClass::Conv, 1.0)]),
            measured_ms: 0.0,
        }];
        assert!(Calibration::speed(&bad, "test").is_err());
        assert!(Calibration::speed(&[], "test").is_err());
    }

    #[test]
    fn a_slowdown_of_depthwise_kernels_gets_its_own_speed_factor() {
        let models: Vec<Observation> = (0..10)
            .map(|i| {
                let (conv, dw) = (1.0 + i as f64, [0.2, 3.0][i % 2]);
                Observation {
                    prediction: prediction(vec![kernel(OpClass::Conv, conv), kernel(OpClass::DwConv, dw)]),
                    measured_ms: 1.05 * conv + 1.3 * dw,
                }
            })
            .collect();
        let two = Calibration::speed_by_kind(&models, "test").unwrap();
        let one = Calibration::speed(&models, "test").unwrap();
        assert!((two.factors["conv"] - 1.05).abs() < 0.03, "{:?}", two.factors);
        assert!((two.factors["dwconv"] - 1.3).abs() < 0.05, "{:?}", two.factors);
        assert_eq!(two.factors["conv-grouped"], two.factors["dwconv"]);
        assert_eq!(two.factors["fc"], two.factors["conv"]);
        assert!(two.fit_rmspe_after < 0.5 * one.fit_rmspe_after, "{two:?} {one:?}");
        let dense_only: Vec<Observation> = (0..5)
            .map(|i| Observation {
                prediction: prediction(vec![kernel(OpClass::Conv, 1.0 + i as f64)]),
                measured_ms: 1.1 * (1.0 + i as f64),
            })
            .collect();
        let c = Calibration::speed_by_kind(&dense_only, "test").unwrap();
        assert!(
            (c.factors["conv"] - 1.1).abs() < 1e-9 && (c.factors["dwconv"] - 1.1).abs() < 1e-9,
            "{c:?}"
        );
    }

    #[test]
    fn recovers_class_factors_and_the_per_kernel_cost() {
        let truth = |conv: f64, dw: f64, kernels: usize| 1.3 * conv + 0.7 * dw + kernels as f64 * 0.02;
        let models: Vec<Observation> = (0..12)
            .map(|i| {
                let conv = 1.0 + i as f64;
                let dw = 0.5 + (i % 4) as f64 * 1.5;
                let mut ks = vec![kernel(OpClass::Conv, conv / 2.0), kernel(OpClass::Conv, conv / 2.0)];
                ks.extend((0..1 + i % 3).map(|_| kernel(OpClass::DwConv, dw / (1 + i % 3) as f64)));
                let n = ks.len();
                Observation {
                    prediction: prediction(ks),
                    measured_ms: truth(conv, dw, n),
                }
            })
            .collect();
        let c = Calibration::fit(&models, 0.0, "test").unwrap();
        assert!((c.factors["conv"] - 1.3).abs() < 1e-4, "{c:?}");
        assert!((c.factors["dwconv"] - 0.7).abs() < 1e-4, "{c:?}");
        assert!((c.per_kernel_us - 20.0).abs() < 0.1, "{c:?}");
        assert!(c.fit_rmspe_after < 1e-4 && c.fit_rmspe_before > 0.05, "{c:?}");
        let mut p = models[3].prediction.clone();
        c.apply(&mut p);
        assert!((p.total_ms - models[3].measured_ms).abs() < 1e-4);
    }

    fn conv(cin: f64, cout: f64, k: f64, groups: f64, ms: f64) -> KernelPrediction {
        KernelPrediction {
            feature_names: crate::features::feature_names(OpClass::Conv),
            features: vec![8.0, cin, cout, k, 1.0, 0.0, cin * cout * k * k / groups + 5.0 * cout],
            ..kernel(OpClass::Conv, ms)
        }
    }

    #[test]
    fn convolutions_are_grouped_by_kind_and_small_groups_keep_their_figures() {
        assert_eq!(group(&conv(64.0, 64.0, 3.0, 1.0, 1.0)), "conv");
        assert_eq!(group(&conv(64.0, 64.0, 1.0, 1.0, 1.0)), "conv-1x1");
        assert_eq!(group(&conv(64.0, 64.0, 3.0, 8.0, 1.0)), "conv-grouped");
        assert_eq!(group(&kernel(OpClass::DwConv, 1.0)), "dwconv");
        let models: Vec<Observation> = (0..8)
            .map(|i| {
                let dense = 1.0 + i as f64;
                let grouped = 0.5 + (i % 3) as f64;
                Observation {
                    prediction: prediction(vec![
                        conv(32.0, 32.0, 3.0, 1.0, dense),
                        conv(32.0, 32.0, 3.0, 4.0, grouped),
                        kernel(OpClass::Add, 0.001),
                    ]),
                    measured_ms: 1.1 * dense + 2.0 * grouped + 0.001,
                }
            })
            .collect();
        let c = Calibration::fit(&models, 0.0, "test").unwrap();
        assert!((c.factors["conv"] - 1.1).abs() < 1e-3, "{c:?}");
        assert!((c.factors["conv-grouped"] - 2.0).abs() < 1e-3, "{c:?}");
        assert!(
            !c.factors.contains_key("add"),
            "a group under 5% keeps its figure: {c:?}"
        );
    }

    #[test]
    fn a_strong_ridge_keeps_the_profile_and_bad_files_are_named() {
        let models = vec![Observation {
            prediction: prediction(vec![kernel(OpClass::Conv, 1.0)]),
            measured_ms: 2.0,
        }];
        let c = Calibration::fit(&models, 1e6, "test").unwrap();
        assert!(
            (c.factors["conv"] - 1.0).abs() < 1e-3 && c.per_kernel_us.abs() < 1e-3,
            "{c:?}"
        );
        assert!(Calibration::fit(&[], 0.1, "x").is_err());
        let dir = std::env::temp_dir().join(format!("stretch-calibration-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.json");
        let mut bad = c.clone();
        bad.factors.insert("warp".into(), 1.0);
        std::fs::write(&f, serde_json::to_string(&bad).unwrap()).unwrap();
        let e = Calibration::load(&f).unwrap_err().to_string();
        assert!(e.contains("warp") && e.contains("c.json"), "{e}");
        bad.factors.remove("warp");
        bad.factors.insert("conv".into(), 100.0);
        std::fs::write(&f, serde_json::to_string(&bad).unwrap()).unwrap();
        assert!(Calibration::load(&f).unwrap_err().to_string().contains("factor 100"));
        std::fs::write(&f, serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(Calibration::load(&f).unwrap(), c);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
