//! Fresh initialisation of new layers: Kaiming normal convolution and
//! fully-connected weights (fan-in, gain √2), zero biases, BatchNorm weight 1,
//! bias 0, running mean 0 and variance 1. Deterministic in a seed and the
//! layer's name, so the same plan and seed give the same weights.

use graph_ir::Tensor;

use predictor::forest::SplitMix64;

/// SplitMix64 stream seeded by `seed` and `name`.
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64, name: &str) -> Rng {
        let mut h = seed ^ 0x9e37_79b9_7f4a_7c15;
        for b in name.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        Rng(SplitMix64::new(h))
    }

    fn uniform(&mut self) -> f64 {
        ((self.0.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A standard normal sample (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// Kaiming-normal weights of `shape` whose fan-in is the product of all but
/// the first dimension.
pub fn kaiming(shape: Vec<usize>, seed: u64, name: &str) -> Tensor {
    let fan_in: usize = shape.iter().skip(1).product::<usize>().max(1);
    let std = (2.0 / fan_in as f64).sqrt();
    let mut rng = Rng::new(seed, name);
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|_| (rng.normal() * std) as f32).collect();
    Tensor::from_f32(shape, &values)
}

/// A tensor of `n` copies of `value`.
pub fn filled(n: usize, value: f32) -> Tensor {
    Tensor::from_f32(vec![n], &vec![value; n])
}

/// BatchNorm parameters for `c` channels: weight, bias, mean, variance.
pub fn batch_norm(c: usize) -> [Tensor; 4] {
    [filled(c, 1.0), filled(c, 0.0), filled(c, 0.0), filled(c, 1.0)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kaiming_has_the_fan_in_variance_and_is_deterministic() {
        let t = kaiming(vec![64, 32, 3, 3], 1, "w");
        let v = t.to_f32_vec().unwrap();
        let var = v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>() / v.len() as f64;
        assert!((var / (2.0 / 288.0) - 1.0).abs() < 0.1, "{var}");
        assert_eq!(v, kaiming(vec![64, 32, 3, 3], 1, "w").to_f32_vec().unwrap());
        assert_ne!(v, kaiming(vec![64, 32, 3, 3], 1, "w2").to_f32_vec().unwrap());
    }
}
