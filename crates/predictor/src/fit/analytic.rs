//! Fits a processor's roofline figures (effective throughput, bandwidth,
//! kernel overhead, depthwise efficiency) to measured latencies by grid
//! search on squared log error, then coordinate refinement.

use crate::features::Work;

/// One measured item (a kernel or a block): the works of its kernels, each
/// flagged when it is a depthwise convolution, and its latency.
#[derive(Clone, Debug)]
pub struct Sample {
    pub works: Vec<(Work, bool)>,
    pub ms: f64,
}

/// Fitted figures. The fit cannot separate peak from efficiency, so
/// `gflops` is the effective throughput.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figures {
    pub gflops: f64,
    pub bandwidth_gbs: f64,
    pub overhead_us: f64,
    pub depthwise_efficiency: f64,
}

impl Figures {
    /// Predicted milliseconds of one sample under these figures.
    pub fn predict(&self, works: &[(Work, bool)]) -> f64 {
        works
            .iter()
            .map(|(w, is_dw)| {
                let g = if *is_dw {
                    self.gflops * self.depthwise_efficiency
                } else {
                    self.gflops
                };
                self.overhead_us / 1e3
                    + 1e3 * (w.flops as f64 / (g * 1e9)).max(w.bytes as f64 / (self.bandwidth_gbs * 1e9))
            })
            .sum()
    }
}

fn log_error(samples: &[Sample], f: &Figures) -> f64 {
    samples
        .iter()
        .map(|s| (f.predict(&s.works) / s.ms).ln().powi(2))
        .sum::<f64>()
        / samples.len().max(1) as f64
}

/// Share of `samples` predicted within `within` (0.10 = ±10%).
pub fn accuracy(samples: &[Sample], f: &Figures, within: f64) -> f64 {
    let ok = samples
        .iter()
        .filter(|s| ((f.predict(&s.works) - s.ms) / s.ms).abs() <= within)
        .count();
    ok as f64 / samples.len().max(1) as f64
}

fn grid(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    (0..n).map(|i| lo * (hi / lo).powf(i as f64 / (n - 1) as f64)).collect()
}

/// Figures minimising the mean squared log error over `train` (samples with
/// `ms > 0`). Deterministic.
pub fn fit(train: &[Sample]) -> Figures {
    let mut best = (
        Figures {
            gflops: 1.0,
            bandwidth_gbs: 1.0,
            overhead_us: 0.0,
            depthwise_efficiency: 1.0,
        },
        f64::INFINITY,
    );
    for &gflops in &grid(1.0, 2000.0, 36) {
        for &bandwidth_gbs in &grid(0.5, 200.0, 20) {
            for &overhead_us in &[0.0, 2.0, 5.0, 20.0, 80.0] {
                for &depthwise_efficiency in &grid(0.02, 1.0, 12) {
                    let f = Figures {
                        gflops,
                        bandwidth_gbs,
                        overhead_us,
                        depthwise_efficiency,
                    };
                    let e = log_error(train, &f);
                    if e < best.1 {
                        best = (f, e);
                    }
                }
            }
        }
    }
    let (mut f, mut e) = best;
    for _ in 0..300 {
        let mut improved = false;
        for (i, m) in [
            (0, 1.02),
            (0, 0.98),
            (1, 1.02),
            (1, 0.98),
            (2, 1.05),
            (2, 0.95),
            (3, 1.02),
            (3, 0.98),
        ] {
            let mut q = f;
            match i {
                0 => q.gflops *= m,
                1 => q.bandwidth_gbs *= m,
                2 => q.overhead_us = (q.overhead_us * m).max(0.0) + if m > 1.0 { 0.1 } else { 0.0 },
                _ => q.depthwise_efficiency = (q.depthwise_efficiency * m).min(1.0),
            }
            let eq = log_error(train, &q);
            if eq < e {
                (f, e) = (q, eq);
                improved = true;
            }
        }
        if !improved {
            break;
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(flops: u64, bytes: u64) -> Work {
        Work {
            flops,
            params: 0,
            bytes,
            out_channels: 64,
        }
    }

    #[test]
    fn recovers_the_figures_that_made_the_data() {
        let truth = Figures {
            gflops: 40.0,
            bandwidth_gbs: 8.0,
            overhead_us: 5.0,
            depthwise_efficiency: 0.25,
        };
        let samples: Vec<Sample> = (1..60u64)
            .map(|i| {
                let works = vec![
                    (work(i * 3_000_000, (60 - i) * 40_000), false),
                    (work((i % 7 + 1) * 300_000, 10_000), i % 3 == 0),
                    (work(1_000, (i % 5 + 1) * 400_000), false),
                ];
                Sample {
                    ms: truth.predict(&works),
                    works,
                }
            })
            .collect();
        let f = fit(&samples);
        assert!(accuracy(&samples, &f, 0.02) > 0.95, "{f:?}");
        assert!((f.gflops / truth.gflops - 1.0).abs() < 0.1, "{f:?}");
    }
}
