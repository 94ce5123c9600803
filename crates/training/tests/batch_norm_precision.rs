//! BatchNorm's training-mode gradients on a batch of 8 28x28 feature maps
//! against the exact ones (float64, from the closed form). The upstream
//! gradient has a common part per channel, as after a global average pool,
//! so the input and scale gradients are differences of large sums: one
//! float32 reduction over all 6272 values per channel misses the tolerances
//! below; reductions per axis meet them.

use burn::tensor::{Device, Tensor, TensorData};
use graph_ir::rng::SplitMix64;
use training::batch_norm::batch_norm_train;

const N: usize = 8;
const C: usize = 4;
const HW: usize = 28 * 28;

fn worst_relative(got: &[f32], want: &[f64]) -> f64 {
    let peak = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let diff = got
        .iter()
        .zip(want)
        .fold(0.0f64, |m, (g, w)| m.max((f64::from(*g) - w).abs()));
    diff / peak
}

#[test]
fn training_mode_gradients_are_close_to_float64() {
    let mut rng = SplitMix64::new(3);
    let x: Vec<f32> = (0..N * C * HW).map(|_| 0.5 + rng.next_f32()).collect();
    let dy: Vec<f32> = (0..N * C * HW).map(|_| 1.0 + rng.next_f32()).collect();
    let gamma: Vec<f32> = (0..C).map(|_| 0.5 + rng.next_f32()).collect();
    let beta: Vec<f32> = (0..C).map(|_| rng.next_f32() - 0.5).collect();
    let eps = 1e-5;

    let device = Device::flex().autodiff();
    let xt = Tensor::<4>::from_data(TensorData::new(x.clone(), [N, C, 28, 28]), &device).require_grad();
    let gt = Tensor::<1>::from_data(TensorData::new(gamma.clone(), [C]), &device).require_grad();
    let bt = Tensor::<1>::from_data(TensorData::new(beta.clone(), [C]), &device).require_grad();
    let r = Tensor::<4>::from_data(TensorData::new(dy.clone(), [N, C, 28, 28]), &device);
    let out = batch_norm_train(xt.clone(), gt.clone(), bt.clone(), eps);
    let grads = (out.output * r).sum().backward();
    let host = |t: Tensor<1>| t.into_data().try_to_vec::<f32>().expect("f32");
    let gx = host(xt.grad(&grads).expect("x grad").reshape([N * C * HW]));
    let gg = host(gt.grad(&grads).expect("gamma grad"));
    let gb = host(bt.grad(&grads).expect("beta grad"));

    let at = |n: usize, c: usize, i: usize| (n * C + c) * HW + i;
    let count = (N * HW) as f64;
    let (mut want_x, mut want_g, mut want_b) = (vec![0.0f64; x.len()], vec![0.0f64; C], vec![0.0f64; C]);
    for c in 0..C {
        let all = || (0..N).flat_map(move |n| (0..HW).map(move |i| at(n, c, i)));
        let mean = all().map(|k| f64::from(x[k])).sum::<f64>() / count;
        let var = all().map(|k| (f64::from(x[k]) - mean).powi(2)).sum::<f64>() / count;
        let inv = 1.0 / (var + eps).sqrt();
        let xhat = |k: usize| (f64::from(x[k]) - mean) * inv;
        want_b[c] = all().map(|k| f64::from(dy[k])).sum();
        want_g[c] = all().map(|k| f64::from(dy[k]) * xhat(k)).sum();
        let scale = f64::from(gamma[c]) * inv;
        for k in all() {
            want_x[k] = scale * (f64::from(dy[k]) - want_b[c] / count - xhat(k) * want_g[c] / count);
        }
    }
    let checks = [
        ("x", &gx, &want_x, 1e-5),
        ("gamma", &gg, &want_g, 1e-3),
        ("beta", &gb, &want_b, 1e-5),
    ];
    for (what, got, want, tolerance) in checks {
        let rel = worst_relative(got, want);
        assert!(
            rel <= tolerance,
            "gradient of {what}: {rel:.2e} from float64 (tolerance {tolerance:e})"
        );
    }
}
