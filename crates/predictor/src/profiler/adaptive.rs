//! Adaptive sampling (nn-Meter): fit a quick predictor per kernel class,
//! find the measured configurations it predicts worst, and sample around them.
//!
//! Errors are out-of-fold: each row is predicted by a random forest fitted
//! without it (k-fold, k = min(rows, 10)), so a configuration counts as badly
//! predicted when its neighbours do not explain it.

use crate::forest::{self, ForestError, ForestParams, MaxFeatures, SplitMix64, TargetTransform};

/// Fewer rows than this are not fitted: every prediction would be a guess.
pub const MIN_ROWS: usize = 4;

const FOLDS: usize = 10;

fn params() -> ForestParams {
    ForestParams {
        n_trees: 32,
        max_depth: 16,
        min_samples_leaf: 1,
        max_features: MaxFeatures::All,
        bootstrap: true,
        target: TargetTransform::Log,
    }
}

/// `|predicted - measured| / measured` of each row, each predicted by a forest
/// fitted on the folds without it. Targets must be > 0. Deterministic in `seed`.
pub fn out_of_fold_errors(x: &[Vec<f64>], y: &[f64], seed: u64) -> Result<Vec<f64>, ForestError> {
    out_of_fold_errors_with(x, y, seed, &params())
}

/// [`out_of_fold_errors`] with forests of `params`.
pub fn out_of_fold_errors_with(
    x: &[Vec<f64>],
    y: &[f64],
    seed: u64,
    params: &ForestParams,
) -> Result<Vec<f64>, ForestError> {
    let n = x.len();
    if n != y.len() {
        return Err(ForestError::LengthMismatch {
            rows: n,
            targets: y.len(),
        });
    }
    let folds = n.min(FOLDS);
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = SplitMix64::new(seed);
    rng.shuffle(&mut order);
    let mut errors = vec![0.0; n];
    for fold in 0..folds {
        let held: Vec<usize> = order.iter().copied().skip(fold).step_by(folds).collect();
        let (tx, ty): (Vec<Vec<f64>>, Vec<f64>) = order
            .iter()
            .enumerate()
            .filter(|(pos, _)| pos % folds != fold)
            .map(|(_, &i)| (x[i].clone(), y[i]))
            .unzip();
        let f = forest::fit(&tx, &ty, params, seed.wrapping_add(fold as u64))?;
        for i in held {
            let p = f.predict(&x[i])?;
            errors[i] = (p - y[i]).abs() / y[i];
        }
    }
    Ok(errors)
}

/// Indices of the rows whose error exceeds `threshold`, worst first.
pub fn worst(errors: &[f64], threshold: f64) -> Vec<usize> {
    let mut bad: Vec<usize> = (0..errors.len()).filter(|&i| errors[i] > threshold).collect();
    bad.sort_by(|&a, &b| errors[b].total_cmp(&errors[a]).then(a.cmp(&b)));
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smooth_targets_are_predicted_and_an_outlier_is_found() {
        let x: Vec<Vec<f64>> = (1..=40).map(|i| vec![i as f64]).collect();
        let mut y: Vec<f64> = (1..=40).map(|i| 1.0 + i as f64 * 0.01).collect();
        y[20] *= 5.0;
        let e = out_of_fold_errors(&x, &y, 1).unwrap();
        let bad = worst(&e, 0.10);
        assert!(
            bad.contains(&20) && bad.iter().all(|i| (17..=23).contains(i)),
            "{bad:?} {e:?}"
        );
        assert!(e.iter().filter(|v| **v <= 0.10).count() >= 35, "{e:?}");
        assert_eq!(e, out_of_fold_errors(&x, &y, 1).unwrap());
    }

    #[test]
    fn worst_orders_by_error() {
        assert_eq!(worst(&[0.05, 0.5, 0.2, 0.11], 0.1), vec![1, 2, 3]);
    }
}
