//! Latency estimates of every (model, candidate, processor) (Band §4.3.2).
//!
//! A model is registered by timing its largest candidate once on each
//! processor; any other candidate is estimated by scaling that time by its
//! work `FLOPs + β · bytes` (bytes read and written; β per processor: 1,000
//! for accelerators, 10 for CPUs), and every measurement then updates the
//! estimate of what ran by an exponential moving average with weight α.
//! Estimates can also start from a predictor. One estimator object serves
//! the runtime and the simulator.

use crate::core::units::ModelUnits;
use serde::{Deserialize, Serialize};

/// β and α of Band §4.3.2.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EstimatorParams {
    /// Weight of the newest measurement (Band: 0.1).
    pub alpha: f64,
    /// FLOP-equivalents per byte moved on an accelerator (Band: 1,000).
    pub beta_accelerator: f64,
    /// FLOP-equivalents per byte moved on a CPU (Band: 10).
    pub beta_cpu: f64,
}

impl Default for EstimatorParams {
    fn default() -> Self {
        EstimatorParams {
            alpha: 0.1,
            beta_accelerator: 1000.0,
            beta_cpu: 10.0,
        }
    }
}

/// Per (model, candidate, processor) estimates in ms.
#[derive(Clone, Debug)]
pub struct Estimator {
    pub params: EstimatorParams,
    /// β of each processor.
    beta: Vec<f64>,
    /// `work[model][candidate]` per processor (depends on β).
    work: Vec<Vec<Vec<f64>>>,
    /// `base[model][processor]`: (work, ms) of the candidate timed at registration.
    base: Vec<Vec<Option<(f64, f64)>>>,
    /// `table[model][candidate][processor]`: predicted or updated estimates.
    table: Vec<Vec<Vec<Option<f64>>>>,
    /// How many measurements updated each entry.
    samples: Vec<Vec<Vec<u32>>>,
}

/// An estimator's state as saved by `serve` and read by `simulate`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SavedEstimates {
    /// `base[model][processor]`: (work, ms).
    pub base: Vec<Vec<Option<(f64, f64)>>>,
    /// `table[model][candidate][processor]`.
    pub table: Vec<Vec<Vec<Option<f64>>>>,
}

impl Estimator {
    /// An estimator with no measurements; `accelerator[p]` picks β per processor.
    pub fn new(params: EstimatorParams, accelerator: &[bool], models: &[ModelUnits]) -> Estimator {
        let beta: Vec<f64> = accelerator
            .iter()
            .map(|a| if *a { params.beta_accelerator } else { params.beta_cpu })
            .collect();
        let work = models
            .iter()
            .map(|m| {
                m.candidates
                    .iter()
                    .map(|c| beta.iter().map(|b| c.flops as f64 + b * c.io_bytes as f64).collect())
                    .collect()
            })
            .collect();
        let p = accelerator.len();
        Estimator {
            params,
            work,
            base: models.iter().map(|_| vec![None; p]).collect(),
            table: models.iter().map(|m| vec![vec![None; p]; m.candidates.len()]).collect(),
            samples: models.iter().map(|m| vec![vec![0; p]; m.candidates.len()]).collect(),
            beta,
        }
    }

    pub fn processors(&self) -> usize {
        self.beta.len()
    }

    /// Records the registration time of `candidate` on `processor`: the
    /// base every unmeasured candidate of `model` is scaled from.
    pub fn set_base(&mut self, model: usize, candidate: usize, processor: usize, ms: f64) {
        self.base[model][processor] = Some((self.work[model][candidate][processor], ms));
        self.table[model][candidate][processor] = Some(ms);
    }

    /// Sets an estimate directly (a prediction, or a measured table).
    pub fn set(&mut self, model: usize, candidate: usize, processor: usize, ms: f64) {
        self.table[model][candidate][processor] = Some(ms);
    }

    /// Expected ms of `candidate` on `processor`; infinite when nothing is known.
    pub fn estimate(&self, model: usize, candidate: usize, processor: usize) -> f64 {
        if let Some(ms) = self.table[model][candidate][processor] {
            return ms;
        }
        match self.base[model][processor] {
            Some((w, ms)) if w > 0.0 => ms * self.work[model][candidate][processor] / w,
            _ => f64::INFINITY,
        }
    }

    /// Folds a measurement into the estimate (EMA with weight α).
    pub fn observe(&mut self, model: usize, candidate: usize, processor: usize, ms: f64) {
        let old = self.estimate(model, candidate, processor);
        let a = self.params.alpha;
        let new = if old.is_finite() { a * ms + (1.0 - a) * old } else { ms };
        self.table[model][candidate][processor] = Some(new);
        self.samples[model][candidate][processor] += 1;
    }

    /// Measurements folded into an entry so far.
    pub fn samples(&self, model: usize, candidate: usize, processor: usize) -> u32 {
        self.samples[model][candidate][processor]
    }

    pub fn save(&self) -> SavedEstimates {
        SavedEstimates {
            base: self.base.clone(),
            table: self.table.clone(),
        }
    }

    /// Loads a saved state; `false` when its shape does not match these models.
    pub fn load(&mut self, saved: &SavedEstimates) -> bool {
        let fits = saved.base.len() == self.base.len()
            && saved.table.len() == self.table.len()
            && saved
                .table
                .iter()
                .zip(&self.table)
                .all(|(a, b)| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.len() == y.len()))
            && saved.base.iter().zip(&self.base).all(|(a, b)| a.len() == b.len());
        if fits {
            self.base = saved.base.clone();
            self.table = saved.table.clone();
        }
        fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{OpSupport, analyze};

    fn one_model() -> Vec<ModelUnits> {
        let g = scheduler_rt::testing::two_branch(8, 1).unwrap();
        let names = vec!["cpu".to_string(), "npu".to_string()];
        vec![analyze(&g, &names, &[OpSupport::All, OpSupport::All]).unwrap()]
    }

    /// With α = 0.1, a step from 20 ms to 10 ms is tracked within 10% of the
    /// new value after 22 measurements (0.9^22 = 0.098) and not after 21 (0.109).
    #[test]
    fn ema_tracks_a_step_within_ten_percent_after_22_samples_not_before() {
        let models = one_model();
        let mut e = Estimator::new(EstimatorParams::default(), &[false, true], &models);
        e.set(0, 0, 0, 20.0);
        for n in 1..=22 {
            e.observe(0, 0, 0, 10.0);
            let err = (e.estimate(0, 0, 0) - 10.0).abs() / 10.0;
            if n < 22 {
                assert!(err > 0.10, "within 10% already after {n} samples ({err})");
            } else {
                assert!(err <= 0.10, "not within 10% after 22 samples ({err})");
            }
        }
        assert_eq!(e.samples(0, 0, 0), 22);
    }

    #[test]
    fn unmeasured_candidates_scale_by_flops_plus_beta_bytes() {
        let models = one_model();
        let mut e = Estimator::new(EstimatorParams::default(), &[false, true], &models);
        let big = models[0].largest_on(1).unwrap();
        e.set_base(0, big, 1, 8.0);
        let other = (0..models[0].candidates.len()).find(|c| *c != big).unwrap();
        let c = &models[0].candidates[other];
        let b = &models[0].candidates[big];
        let want = 8.0 * (c.flops as f64 + 1000.0 * c.io_bytes as f64) / (b.flops as f64 + 1000.0 * b.io_bytes as f64);
        assert!((e.estimate(0, other, 1) - want).abs() < 1e-9);
        assert!(e.estimate(0, other, 0).is_infinite());
    }
}
