//! The one definition of a percentile. Every p50, p90, p99 and median that
//! stretch prints (bench, serve, simulate, analyze, the profiler, the
//! reports) is [`quantile`]: linear interpolation between the two closest
//! ranks of the sorted sample, position `q · (n − 1)` (Hyndman and Fan's
//! type 7, numpy's and R's default). An empty sample has no quantile.

/// The `q`-quantile (`q` in 0..=1, clamped) of `xs`; `None` when empty.
/// NaNs sort last ([`f64::total_cmp`]).
pub fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    Some(quantile_sorted(&v, q))
}

/// [`quantile`] of a sample already sorted ascending and not empty.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// The median ([`quantile`] at 0.5); `None` when empty.
pub fn median(xs: &[f64]) -> Option<f64> {
    quantile(xs, 0.5)
}

/// [`quantile`], NaN for an empty sample (for figures printed as `NaN`
/// rather than omitted).
pub fn quantile_nan(xs: &[f64], q: f64) -> f64 {
    quantile(xs, q).unwrap_or(f64::NAN)
}

/// [`median`], NaN for an empty sample.
pub fn median_nan(xs: &[f64]) -> f64 {
    quantile_nan(xs, 0.5)
}

/// The sample at `n` evenly spaced quantiles, the midpoints of `n` equal
/// shares (`(k + 0.5) / n`), for replaying a measured distribution; empty
/// for an empty sample.
pub fn quantile_grid(xs: &[f64], n: usize) -> Vec<f64> {
    if xs.is_empty() || n == 0 {
        return Vec::new();
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    (0..n)
        .map(|k| quantile_sorted(&v, (k as f64 + 0.5) / n as f64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-computed on {15, 20, 35, 40, 50}: the position is q · 4.
    /// p50 = 35 (rank 2 exactly); p90: 3.6 → 40 + 0.6 · 10 = 46;
    /// p99: 3.96 → 40 + 0.96 · 10 = 49.6; p10: 0.4 → 15 + 0.4 · 5 = 17.
    /// A nearest-rank rule would give 50 for p99 and 15 for p10.
    #[test]
    fn pinned_on_a_hand_computed_sample() {
        let xs = [50.0, 15.0, 40.0, 20.0, 35.0];
        assert_eq!(median(&xs), Some(35.0));
        assert!((quantile(&xs, 0.9).unwrap() - 46.0).abs() < 1e-12);
        assert!((quantile(&xs, 0.99).unwrap() - 49.6).abs() < 1e-12);
        assert!((quantile(&xs, 0.1).unwrap() - 17.0).abs() < 1e-12);
        assert_eq!(quantile(&xs, 0.0), Some(15.0));
        assert_eq!(quantile(&xs, 1.0), Some(50.0));
        assert_eq!(median(&[1.0, 2.0]), Some(1.5));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[7.0], 0.99), Some(7.0));
    }

    #[test]
    fn the_grid_takes_share_midpoints() {
        let xs: Vec<f64> = (0..11).map(f64::from).collect();
        assert_eq!(quantile_grid(&xs, 2), vec![2.5, 7.5]);
        assert!(quantile_grid(&[], 4).is_empty());
    }
}
