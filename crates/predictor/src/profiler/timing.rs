//! Timing a compiled model: its inputs bound once ([`Bound`]), warm-up
//! runs, then repeated timed runs summarised by their median and 10th/90th
//! percentiles.

use engine::{Compiled, Engine, EngineError, Value};
use graph_ir::stats::quantile_sorted;
use std::time::Instant;
use tract_core::prelude::TVec;

/// A compiled model with its inputs bound, so that a timed run holds
/// neither model loading nor input conversion.
pub struct Bound {
    engine: &'static str,
    compiled: Box<dyn Compiled>,
    inputs: TVec<Value>,
}

impl Bound {
    /// `onnx` compiled on `engine`, `inputs` (in graph-input order)
    /// converted to its values.
    pub fn new(engine: &dyn Engine, onnx: &[u8], inputs: &[graph_ir::Tensor]) -> Result<Bound, EngineError> {
        let compiled = engine.compile(onnx)?;
        Ok(Bound {
            engine: engine.name(),
            compiled,
            inputs: engine::values(engine.name(), inputs)?,
        })
    }

    /// Runs the model once on the bound inputs and discards its outputs.
    pub fn run(&self) -> Result<(), EngineError> {
        self.compiled.run(self.inputs.clone()).map(drop).map_err(|e| match e {
            EngineError::Run { .. } => e,
            other => EngineError::Run {
                engine: self.engine,
                reason: other.reason(),
            },
        })
    }
}

/// Summary of repeated timings, in milliseconds (all zero for no runs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timing {
    pub median_ms: f64,
    pub p10_ms: f64,
    pub p90_ms: f64,
    pub reps: usize,
}

impl Timing {
    /// `(p90 - p10) / median`: the relative spread of the runs.
    pub fn spread(&self) -> f64 {
        if self.median_ms > 0.0 {
            (self.p90_ms - self.p10_ms) / self.median_ms
        } else {
            0.0
        }
    }

    /// Summarises run times in milliseconds; `None` for no runs.
    pub fn of(mut samples: Vec<f64>) -> Option<Timing> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_by(f64::total_cmp);
        Some(Timing {
            median_ms: quantile_sorted(&samples, 0.5),
            p10_ms: quantile_sorted(&samples, 0.1),
            p90_ms: quantile_sorted(&samples, 0.9),
            reps: samples.len(),
        })
    }
}

/// Which summary of repeated runs a fit targets and a judgement compares
/// with: the median, or the 10th percentile (a statistic that noise from
/// the rest of the machine, which only adds time, disturbs less).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Statistic {
    #[default]
    Median,
    P10,
}

impl Statistic {
    /// The name used in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Statistic::Median => "median",
            Statistic::P10 => "p10",
        }
    }

    /// This statistic of a summary given as its median and 10th percentile.
    pub fn pick(self, median: f64, p10: f64) -> f64 {
        match self {
            Statistic::Median => median,
            Statistic::P10 => p10,
        }
    }

    /// The statistic a report gives beside this one.
    pub fn other(self) -> Statistic {
        match self {
            Statistic::Median => Statistic::P10,
            Statistic::P10 => Statistic::Median,
        }
    }
}

impl std::str::FromStr for Statistic {
    type Err = String;
    fn from_str(s: &str) -> Result<Statistic, String> {
        match s {
            "median" => Ok(Statistic::Median),
            "p10" => Ok(Statistic::P10),
            other => Err(format!("unknown statistic `{other}` (expected median or p10)")),
        }
    }
}

/// Calls `run` `warmup` times untimed, then `reps` (at least 1) times, each timed alone.
pub fn measure(
    mut run: impl FnMut() -> Result<(), EngineError>,
    warmup: usize,
    reps: usize,
) -> Result<Timing, EngineError> {
    for _ in 0..warmup {
        run()?;
    }
    let mut samples = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        run()?;
        samples.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(Timing::of(samples).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_percentiles() {
        let t = Timing::of(vec![5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((t.median_ms, t.reps), (3.0, 5));
        assert!((t.p10_ms - 1.4).abs() < 1e-12 && (t.p90_ms - 4.6).abs() < 1e-12);
        assert!((t.spread() - 3.2 / 3.0).abs() < 1e-12);
        assert_eq!(Timing::of(vec![2.0, 4.0]).unwrap().median_ms, 3.0);
        assert!(Timing::of(vec![]).is_none());
    }

    #[test]
    fn warmup_runs_are_not_timed() {
        let mut runs = 0;
        let t = measure(
            || {
                runs += 1;
                Ok(())
            },
            3,
            7,
        )
        .unwrap();
        assert_eq!((runs, t.reps), (10, 7));
    }
}
