//! The simulator's random draws: values of a measured spread, draws that
//! correlate from one run to the next, and standard normals.

use graph_ir::rng::SplitMix64;

/// One of the non-empty `values`, uniformly at random.
pub(crate) fn pick(rng: &mut SplitMix64, values: &[f64]) -> f64 {
    pick_at(rng.next_f64(), values)
}

/// The value of non-empty `values` (evenly spaced quantiles) at uniform draw `u`.
pub(crate) fn pick_at(u: f64, values: &[f64]) -> f64 {
    values[((u * values.len() as f64) as usize).min(values.len() - 1)]
}

/// The lag-1 correlation of a series (`None` under 3 values or with no spread).
pub fn lag1_correlation(v: &[f64]) -> Option<f64> {
    if v.len() < 3 {
        return None;
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let var: f64 = v.iter().map(|x| (x - m).powi(2)).sum();
    let cov: f64 = v.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum();
    (var > 0.0).then(|| cov / var)
}

/// The next uniform draw of a worker whose draws correlate: its state `z`
/// (a standard normal; drawn afresh when `None`) steps as
/// `z' = rho z + sqrt(1 - rho²) e` and the draw is `Φ(z')`, so every draw is
/// uniform and consecutive ones correlate about as `rho`.
pub fn correlated_uniform(z: &mut Option<f64>, rho: f64, rng: &mut SplitMix64) -> f64 {
    let rho = rho.clamp(0.0, 0.999);
    let next = match *z {
        Some(prev) => rho * prev + (1.0 - rho * rho).sqrt() * normal(rng),
        None => normal(rng),
    };
    *z = Some(next);
    0.5 * (1.0 + erf(next / std::f64::consts::SQRT_2))
}

/// The error function (Abramowitz and Stegun 7.1.26, |error| < 1.5e-7).
fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let y = 1.0 - poly * (-x * x).exp();
    if x < 0.0 { -y } else { y }
}

/// A standard normal draw (Box-Muller).
pub(crate) fn normal(rng: &mut SplitMix64) -> f64 {
    let u = |r: &mut SplitMix64| ((r.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let (a, b) = (u(rng), u(rng));
    (-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(rho: f64, n: usize) -> Vec<f64> {
        let mut rng = SplitMix64::new(11);
        let mut z = None;
        (0..n).map(|_| correlated_uniform(&mut z, rho, &mut rng)).collect()
    }

    #[test]
    fn correlated_draws_stay_uniform_and_follow_their_correlation() {
        for rho in [0.0, 0.5, 0.9] {
            let u = draws(rho, 200_000);
            let mean = u.iter().sum::<f64>() / u.len() as f64;
            let low = u.iter().filter(|x| **x < 0.1).count() as f64 / u.len() as f64;
            assert!((mean - 0.5).abs() < 0.02, "rho {rho}: mean {mean}");
            assert!((low - 0.1).abs() < 0.02, "rho {rho}: share below 0.1 {low}");
            let r = lag1_correlation(&u).unwrap();
            assert!((r - rho).abs() < 0.06, "rho {rho}: lag-1 correlation {r}");
        }
        assert!((erf(0.5) - 0.520_499_877_8).abs() < 1e-6 && (erf(-1.0) + 0.842_700_792_9).abs() < 1e-6);
    }
}
