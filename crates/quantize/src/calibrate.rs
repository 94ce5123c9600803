//! Activation ranges from calibration runs: each tensor to quantize is
//! observed on every calibration sample and reduced to one `[lo, hi]`.
//!
//! - `minmax`: the smallest and largest value seen (onnxruntime's
//!   `MinMax` calibrator).
//! - `percentile:P`: the (100 − P)-th and P-th percentiles of the values
//!   seen, read from a 2048-bin histogram over the min-max range.
//! - `entropy`: the clipping threshold on |x| whose 128-level quantized
//!   histogram is closest in Kullback-Leibler divergence to the observed
//!   one (the TensorRT method), `[0, t]` for a tensor with no negative
//!   value, else `[-t, t]`.
//!
//! Histogram methods look at the data twice: [`Collector::passes`] says how
//! many times the caller runs the samples; pass 0 finds each tensor's
//! min-max range, pass 1 fills its histogram over that range.

use std::fmt;
use std::str::FromStr;

/// Bins of the histograms.
pub const BINS: usize = 2048;
/// Quantization levels the entropy method compares against.
const LEVELS: usize = 128;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Method {
    MinMax,
    Percentile(f64),
    Entropy,
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Method::MinMax => f.write_str("minmax"),
            Method::Percentile(p) => write!(f, "percentile:{p}"),
            Method::Entropy => f.write_str("entropy"),
        }
    }
}

impl FromStr for Method {
    type Err = String;

    fn from_str(s: &str) -> Result<Method, String> {
        match s.trim() {
            "minmax" => Ok(Method::MinMax),
            "entropy" => Ok(Method::Entropy),
            other => {
                let p = other.strip_prefix("percentile:").ok_or_else(|| {
                    format!(
                        "unknown calibration method `{other}`: minmax, percentile:P (e.g. percentile:99.99) or entropy"
                    )
                })?;
                let v: f64 = p
                    .parse()
                    .map_err(|_| format!("percentile:{p}: `{p}` is not a number"))?;
                if !(50.0..=100.0).contains(&v) {
                    return Err(format!("percentile:{p}: the percentile must lie in [50, 100]"));
                }
                Ok(Method::Percentile(v))
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Stat {
    lo: f32,
    hi: f32,
    seen: u64,
    /// Over `[lo, hi]` (percentile) or `[0, max |x|]` (entropy).
    hist: Vec<u64>,
}

/// Per-tensor observations for one method.
#[derive(Clone, Debug)]
pub struct Collector {
    method: Method,
    stats: Vec<Stat>,
}

impl Collector {
    pub fn new(method: Method, tensors: usize) -> Collector {
        let stat = Stat {
            lo: f32::INFINITY,
            hi: f32::NEG_INFINITY,
            seen: 0,
            hist: Vec::new(),
        };
        Collector {
            method,
            stats: vec![stat; tensors],
        }
    }

    pub fn method(&self) -> Method {
        self.method
    }

    /// Times the samples must be run through [`Collector::observe`].
    pub fn passes(&self) -> usize {
        if self.method == Method::MinMax { 1 } else { 2 }
    }

    /// Values of tensor `tensor` on one sample, in pass `pass`.
    pub fn observe(&mut self, pass: usize, tensor: usize, values: &[f32]) {
        let s = &mut self.stats[tensor];
        if pass == 0 {
            for &v in values.iter().filter(|v| v.is_finite()) {
                s.lo = s.lo.min(v);
                s.hi = s.hi.max(v);
            }
            s.seen += values.len() as u64;
            return;
        }
        if s.hist.is_empty() {
            s.hist = vec![0; BINS];
        }
        let (start, width) = match self.method {
            Method::Entropy => (0.0, s.lo.abs().max(s.hi.abs()) / BINS as f32),
            _ => (s.lo, (s.hi - s.lo) / BINS as f32),
        };
        for &v in values.iter().filter(|v| v.is_finite()) {
            let x = if self.method == Method::Entropy { v.abs() } else { v };
            let b = if width > 0.0 { ((x - start) / width) as usize } else { 0 };
            s.hist[b.min(BINS - 1)] += 1;
        }
    }

    /// The number of values observed of each tensor (pass 0).
    pub fn seen(&self, tensor: usize) -> u64 {
        self.stats[tensor].seen
    }

    /// Each tensor's range; `None` for a tensor with no finite value seen.
    pub fn ranges(&self) -> Vec<Option<(f32, f32)>> {
        self.stats
            .iter()
            .map(|s| {
                if s.lo > s.hi {
                    return None;
                }
                Some(match self.method {
                    Method::MinMax => (s.lo, s.hi),
                    Method::Percentile(p) => percentile_range(s, p),
                    Method::Entropy => entropy_range(s),
                })
            })
            .collect()
    }
}

fn percentile_range(s: &Stat, p: f64) -> (f32, f32) {
    let total: u64 = s.hist.iter().sum();
    if total == 0 || s.hi <= s.lo {
        return (s.lo, s.hi);
    }
    let width = (s.hi - s.lo) / BINS as f32;
    let edge = |q: f64| -> f32 {
        let target = (q / 100.0 * total as f64).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (i, &c) in s.hist.iter().enumerate() {
            acc += c;
            if acc >= target {
                return s.lo + width * (i + 1) as f32;
            }
        }
        s.hi
    };
    let lo = (edge(100.0 - p) - width).max(s.lo);
    (lo.min(s.hi), edge(p).min(s.hi))
}

fn entropy_range(s: &Stat) -> (f32, f32) {
    let amax = s.lo.abs().max(s.hi.abs());
    if amax == 0.0 || s.hist.iter().sum::<u64>() == 0 {
        return (s.lo, s.hi);
    }
    let width = amax / BINS as f32;
    let mut best = (f64::INFINITY, BINS);
    for i in LEVELS..=BINS {
        let mut p: Vec<f64> = s.hist[..i].iter().map(|&c| c as f64).collect();
        p[i - 1] += s.hist[i..].iter().map(|&c| c as f64).sum::<f64>();
        let q = requantize(&s.hist[..i], LEVELS);
        let kl = divergence(&p, &q);
        if kl < best.0 {
            best = (kl, i);
        }
    }
    let t = width * best.1 as f32;
    if s.lo >= 0.0 { (0.0, t) } else { (-t, t) }
}

/// `hist` merged into `levels` groups and spread back over its non-empty
/// bins.
fn requantize(hist: &[u64], levels: usize) -> Vec<f64> {
    let n = hist.len();
    let mut q = vec![0.0; n];
    for l in 0..levels {
        let (a, b) = (l * n / levels, ((l + 1) * n / levels).max(l * n / levels + 1).min(n));
        let sum: f64 = hist[a..b].iter().map(|&c| c as f64).sum();
        let nonzero = hist[a..b].iter().filter(|&&c| c > 0).count();
        if nonzero > 0 {
            for (j, &c) in hist[a..b].iter().enumerate() {
                if c > 0 {
                    q[a + j] = sum / nonzero as f64;
                }
            }
        }
    }
    q
}

/// KL(p || q) of two histograms, each normalised; bins where p is empty
/// add nothing, bins where only q is empty are smoothed.
fn divergence(p: &[f64], q: &[f64]) -> f64 {
    let (sp, sq) = (p.iter().sum::<f64>(), q.iter().sum::<f64>());
    if sp == 0.0 || sq == 0.0 {
        return f64::INFINITY;
    }
    p.iter()
        .zip(q)
        .filter(|(a, _)| **a > 0.0)
        .map(|(a, b)| {
            let (a, b) = (a / sp, (b / sq).max(1e-12));
            a * (a / b).ln()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(method: Method, data: &[f32]) -> (f32, f32) {
        let mut c = Collector::new(method, 1);
        for pass in 0..c.passes() {
            for chunk in data.chunks(100) {
                c.observe(pass, 0, chunk);
            }
        }
        c.ranges()[0].unwrap()
    }

    fn ramp(n: usize) -> Vec<f32> {
        (0..n).map(|i| i as f32 / n as f32).collect()
    }

    #[test]
    fn minmax_is_the_extremes() {
        let mut d = ramp(1000);
        d.push(-3.0);
        d.push(f32::NAN);
        assert_eq!(run(Method::MinMax, &d), (-3.0, 0.999));
    }

    #[test]
    fn percentiles_clip_outliers() {
        let mut d = ramp(10_000);
        d.push(100.0);
        let (lo, hi) = run(Method::Percentile(99.0), &d);
        assert!(lo < 0.02 && (hi - 0.99).abs() < 0.06, "{lo} {hi}");
        let (_, all) = run(Method::Percentile(100.0), &d);
        assert_eq!(all, 100.0);
    }

    #[test]
    fn entropy_clips_a_long_tail_and_keeps_the_sign() {
        let mut d: Vec<f32> = (0..20_000).map(|i| ((i % 200) as f32 / 200.0).powi(3)).collect();
        d.push(50.0);
        let (lo, hi) = run(Method::Entropy, &d);
        assert_eq!(lo, 0.0);
        assert!(hi < 10.0, "threshold {hi}");
        let (lo, _) = run(Method::Entropy, &[-1.0, 0.5, 1.0]);
        assert!(lo < 0.0);
    }

    #[test]
    fn method_names() {
        assert_eq!("minmax".parse::<Method>().unwrap(), Method::MinMax);
        assert_eq!("percentile:99.9".parse::<Method>().unwrap(), Method::Percentile(99.9));
        assert!("percentile:x".parse::<Method>().unwrap_err().contains("not a number"));
        assert!(
            "kl".parse::<Method>()
                .unwrap_err()
                .contains("unknown calibration method `kl`")
        );
    }
}
