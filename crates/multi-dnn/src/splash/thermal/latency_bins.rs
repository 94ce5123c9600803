//! Splash's latency model for processor workers (§4.3): the latency of each
//! (model, candidate, worker) per 1 °C bin of the worker's temperature, an
//! EMA (α = 0.1) of what it took when started in that bin, so that a hot,
//! throttled processor is predicted as slow before the estimator's single
//! average has caught up.

use std::collections::HashMap;

/// EMA of latencies per temperature bin.
#[derive(Clone, Debug)]
pub struct LatencyBins {
    alpha: f64,
    bin_c: f64,
    ema: HashMap<(usize, usize, usize, i64), f64>,
}

impl Default for LatencyBins {
    fn default() -> Self {
        LatencyBins::new(0.1, 1.0)
    }
}

impl LatencyBins {
    /// `alpha` weighs the newest run; bins are `bin_c` °C wide.
    pub fn new(alpha: f64, bin_c: f64) -> LatencyBins {
        LatencyBins {
            alpha,
            bin_c,
            ema: HashMap::new(),
        }
    }

    fn bin(&self, temp_c: f64) -> i64 {
        (temp_c / self.bin_c).floor() as i64
    }

    /// A run of `ms` that started at `temp_c`.
    pub fn observe(&mut self, model: usize, candidate: usize, worker: usize, temp_c: f64, ms: f64) {
        let key = (model, candidate, worker, self.bin(temp_c));
        let a = self.alpha;
        self.ema
            .entry(key)
            .and_modify(|e| *e = (1.0 - a) * *e + a * ms)
            .or_insert(ms);
    }

    /// The EMA of the bin of `temp_c`; `None` when that bin has seen no run.
    pub fn predict(&self, model: usize, candidate: usize, worker: usize, temp_c: f64) -> Option<f64> {
        self.ema.get(&(model, candidate, worker, self.bin(temp_c))).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_keep_their_own_average() {
        let mut b = LatencyBins::default();
        b.observe(0, 0, 1, 40.2, 10.0);
        b.observe(0, 0, 1, 40.9, 20.0);
        b.observe(0, 0, 1, 49.5, 30.0);
        assert!((b.predict(0, 0, 1, 40.0).unwrap() - 11.0).abs() < 1e-12);
        assert_eq!(b.predict(0, 0, 1, 49.0), Some(30.0));
        assert_eq!(b.predict(0, 0, 1, 45.0), None);
        assert_eq!(b.predict(0, 0, 0, 40.0), None);
    }
}
