//! Numeric precision as a property of a processor: what it runs its
//! subgraphs at, what its throughput figures were rated at, and its
//! compute throughput at the other precisions it runs.
//!
//! ```toml
//! [processors.cpu]
//! precision = "int8"          # what it runs; absent: rated_precision
//! rated_precision = "fp32"    # what peak_gflops & co. describe; absent: fp32
//! speedup.int8 = { value = 3.0, source = "..." }   # relative to rated
//! ```
//!
//! A processor runs its rated precision and every precision it has a
//! `speedup` for. At precision `p` the analytic model divides compute time
//! by `speedup.p` and scales memory traffic by the element size of `p`
//! against that of the rated precision ([`ProcessorProfile::compute_rate`],
//! [`ProcessorProfile::bytes_ratio`]); at the rated precision predictions
//! are what the figures alone give.

use crate::profile::{DeviceProfile, ProcessorProfile, ProfileError};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The numeric type a processor computes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Fp16,
    Int8,
}

impl Precision {
    pub const ALL: [Precision; 3] = [Precision::Fp32, Precision::Fp16, Precision::Int8];

    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Int8 => "int8",
        }
    }

    /// Bytes of one element (weights and activations) at this precision.
    pub fn bytes(self) -> u64 {
        match self {
            Precision::Fp32 => 4,
            Precision::Fp16 => 2,
            Precision::Int8 => 1,
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Precision, String> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name() == s.trim())
            .ok_or_else(|| format!("unknown precision `{s}`: the precisions are fp32, fp16 and int8"))
    }
}

impl ProcessorProfile {
    /// The precision the throughput figures describe (default fp32).
    pub fn rated(&self) -> Precision {
        self.rated_precision.unwrap_or(Precision::Fp32)
    }

    /// The precision the processor runs its subgraphs at (default: rated).
    pub fn precision(&self) -> Precision {
        self.precision.unwrap_or_else(|| self.rated())
    }

    /// The precisions this processor can run: its rated one and those it
    /// has a speedup for.
    pub fn precisions(&self) -> Vec<Precision> {
        let mut out: Vec<Precision> = std::iter::once(self.rated())
            .chain(self.speedup.keys().copied())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Compute throughput at `p` relative to the rated figures, `None`
    /// where the processor does not run `p`.
    pub fn rate_at(&self, p: Precision) -> Option<f64> {
        if p == self.rated() {
            Some(1.0)
        } else {
            self.speedup.get(&p).map(|f| f.value)
        }
    }

    /// Compute throughput at the running precision relative to the rated figures.
    pub fn compute_rate(&self) -> f64 {
        self.rate_at(self.precision()).unwrap_or(1.0)
    }

    /// Memory traffic at the running precision relative to the rated one.
    pub fn bytes_ratio(&self) -> f64 {
        self.precision().bytes() as f64 / self.rated().bytes() as f64
    }

    /// Why the precision settings of processor `name` are inconsistent, if
    /// they are.
    pub fn precision_problem(&self, name: &str) -> Option<String> {
        if self.speedup.contains_key(&self.rated()) {
            return Some(format!(
                "processors.{name}.speedup.{r}: {r} is the rated precision (speedup 1 by definition); remove it",
                r = self.rated()
            ));
        }
        if let Some((p, f)) = self
            .speedup
            .iter()
            .find(|(_, f)| !(f.value.is_finite() && f.value > 0.0))
        {
            return Some(format!(
                "processors.{name}.speedup.{p} must be a positive factor, got {}",
                f.value
            ));
        }
        if let Some(p) = self.regressors_at.keys().find(|p| self.rate_at(**p).is_none()) {
            return Some(format!(
                "processors.{name}.regressors_at.{p}: the processor has no rate at {p}; add speedup.{p} (the analytic figure for kernels its regressors do not cover)"
            ));
        }
        if let Some(p) = self.regressors_at.keys().find(|p| **p == self.rated()) {
            return Some(format!(
                "processors.{name}.regressors_at.{p}: {p} is the rated precision; name that file as `regressors`"
            ));
        }
        let p = self.precision();
        if self.rate_at(p).is_none() {
            return Some(format!(
                "processors.{name}.precision = \"{p}\": the processor has no rate at {p}; it runs {} (rated_precision and speedup.*); add speedup.{p} = {{ value = ..., source = \"...\" }} or choose one of those",
                self.precisions()
                    .iter()
                    .map(|x| x.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        None
    }
}

impl DeviceProfile {
    /// Runs `processor` at `precision` from now on; refused, naming what
    /// it runs, where the profile gives it no rate at `precision`.
    pub fn set_precision(&mut self, processor: &str, precision: Precision) -> Result<(), ProfileError> {
        self.processor(processor)?;
        let label = format!("device profile `{}`", self.name);
        let p = self.processors.get_mut(processor).expect("checked above");
        let old = p.precision.replace(precision);
        match p.precision_problem(processor) {
            Some(reason) => {
                p.precision = old;
                Err(ProfileError::Invalid { path: label, reason })
            }
            None => Ok(()),
        }
    }

    /// `processor=precision,...` pairs, as command lines give them.
    pub fn parse_precisions(text: &str) -> Result<Vec<(String, Precision)>, String> {
        text.split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|pair| {
                let (name, p) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("`{pair}`: expected PROCESSOR=PRECISION, e.g. cpu=int8"))?;
                Ok((name.trim().to_string(), p.parse()?))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_named() {
        for p in Precision::ALL {
            assert_eq!(p.name().parse::<Precision>().unwrap(), p);
        }
        let e = "int4".parse::<Precision>().unwrap_err();
        assert!(e.contains("`int4`") && e.contains("fp32, fp16 and int8"), "{e}");
    }

    #[test]
    fn element_sizes() {
        assert_eq!(Precision::ALL.map(Precision::bytes), [4, 2, 1], "fp32, fp16, int8");
    }
}
