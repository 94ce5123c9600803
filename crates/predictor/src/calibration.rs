//! In-model calibration of a processor's kernel predictions.
//!
//! Kernels are profiled alone; inside a whole model they run with other
//! cache contents, after other kernels and with the engine's per-call work
//! between them, and the difference is systematic per kernel class (on this
//! project's host, sums of isolated kernels fell below every MobileNetV2- and
//! RegNet-style model). A [`Calibration`] scales each class's kernels by a
//! factor and adds a fixed cost per kernel, both fitted to whole models
//! measured on the processor ([`Calibration::fit`]): models that are not the
//! ones it is judged on.

use crate::kernels::OpClass;
use crate::model::Prediction;
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

/// Per-class factors and a per-kernel cost applied to a processor's
/// kernel predictions (schema `stretch.calibration/1`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub schema: String,
    /// Kernel class name ([`OpClass::name`]) to the factor its kernels'
    /// predictions are multiplied by; classes not listed keep theirs.
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

/// Factors outside this range are refused when loading: a calibration that
/// needs more is describing another machine.
const FACTOR_RANGE: (f64, f64) = (0.05, 20.0);

impl Calibration {
    pub const SCHEMA: &'static str = "stretch.calibration/1";

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
            if OpClass::from_name(class).is_none() {
                return Err(bad(class, "not a kernel class".into()));
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

    /// Scales every kernel of `p` by its class's factor, adds the per-kernel
    /// cost and recomputes the total.
    pub fn apply(&self, p: &mut Prediction) {
        for k in &mut p.kernels {
            let f = self.factors.get(k.class.name()).copied().unwrap_or(1.0);
            k.ms = (k.ms * f + self.per_kernel_us / 1e3).max(0.0);
        }
        p.total_ms = p.subgraph_overhead_ms + p.kernels.iter().map(|k| k.ms).sum::<f64>();
    }

    /// Fits factors per class and the per-kernel cost so that calibrated
    /// predictions of `models` match their measurements in relative terms
    /// (least squares on relative errors), with a ridge of weight `ridge`
    /// pulling each factor towards 1 and the cost towards 0, so a class
    /// seen in few models keeps its uncalibrated figure.
    pub fn fit(models: &[Observation], ridge: f64, fitted_on: &str) -> Result<Calibration, CalibrationError> {
        let fail = |reason: String| CalibrationError::Fit { reason };
        if models.is_empty() {
            return Err(fail("no measured models".into()));
        }
        let mut classes: Vec<&'static str> = models
            .iter()
            .flat_map(|m| m.prediction.kernels.iter().map(|k| k.class.name()))
            .collect();
        classes.sort_unstable();
        classes.dedup();
        let n = classes.len() + 1;
        let mut ata = vec![vec![0.0; n]; n];
        let mut atb = vec![0.0; n];
        for m in models {
            let y = m.measured_ms;
            if !(y > 0.0 && y.is_finite()) {
                return Err(fail(format!("measured latency {y} ms is not positive")));
            }
            let mut row = vec![0.0; n];
            for k in &m.prediction.kernels {
                let c = classes.binary_search(&k.class.name()).expect("listed");
                row[c] += k.ms / y;
            }
            row[n - 1] = m.prediction.kernels.len() as f64 / 1e3 / y;
            let b = 1.0 - m.prediction.subgraph_overhead_ms / y;
            for i in 0..n {
                atb[i] += row[i] * b;
                for j in 0..n {
                    ata[i][j] += row[i] * row[j];
                }
            }
        }
        let scale = ridge * models.len() as f64;
        for (i, r) in ata.iter_mut().enumerate() {
            r[i] += scale;
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
        let mut c = Calibration {
            schema: Self::SCHEMA.into(),
            factors,
            per_kernel_us: theta[n - 1],
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
        Ok(c)
    }
}

/// Root mean square of relative errors (predicted, measured).
fn rmspe(pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (sum, n) = pairs.fold((0.0, 0usize), |(s, n), (p, m)| (s + ((p - m) / m).powi(2), n + 1));
    if n == 0 { 0.0 } else { (sum / n as f64).sqrt() }
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
    use crate::model::{KernelPrediction, Source};

    fn kernel(class: OpClass, ms: f64) -> KernelPrediction {
        KernelPrediction {
            name: "k".into(),
            class,
            ops: vec![],
            feature_names: &[],
            features: vec![],
            ms,
            source: Source::Analytic,
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
