//! Gradients of the lowering (burn autodiff) against central finite
//! differences on a tiny graph with a conv, a grouped conv, Concat,
//! BatchNorm (training mode) and a fully connected layer.

use burn::tensor::{Tensor, TensorData, loss::cross_entropy_with_logits};
use graph_ir::ops::{BatchNorm, Concat, Conv, Flatten, Gemm, GlobalAveragePool, Op};
use graph_ir::rng::SplitMix64;
use graph_ir::{Fact, Graph, Tensor as IrTensor};
use training::{Backend, ConvGrad, Params, Role, host_vec, lower};

fn random(rng: &mut SplitMix64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| lo + (hi - lo) * rng.next_f32()).collect()
}

fn tiny_graph() -> Graph {
    let mut rng = SplitMix64::new(7);
    let mut g = Graph::new("tiny");
    let x = g.add_input("x", Fact::f32([2, 4, 5, 5])).expect("input");
    let mut konst = |g: &mut Graph, name: &str, shape: Vec<usize>, lo: f32, hi: f32| {
        let n = shape.iter().product();
        g.add_const(name, IrTensor::from_f32(shape, &random(&mut rng, n, lo, hi)))
            .expect("const")
    };
    let conv = |group| {
        Op::Conv(Conv {
            strides: [1, 1],
            pads: [1, 1, 1, 1],
            dilations: [1, 1],
            group,
        })
    };
    let wa = konst(&mut g, "a.w", vec![3, 4, 3, 3], -0.4, 0.4);
    let ba = konst(&mut g, "a.b", vec![3], -0.1, 0.1);
    let a = g.add_node("a", conv(1), &[x, wa, ba]).expect("a").out(0);
    let wb = konst(&mut g, "b.w", vec![4, 2, 3, 3], -0.4, 0.4);
    let b = g.add_node("b", conv(2), &[x, wb]).expect("b").out(0);
    let cat = g
        .add_node("cat", Op::Concat(Concat { axis: 1 }), &[a, b])
        .expect("cat")
        .out(0);
    let gamma = konst(&mut g, "bn.gamma", vec![7], 0.5, 1.5);
    let beta = konst(&mut g, "bn.beta", vec![7], -0.2, 0.2);
    let mean = konst(&mut g, "bn.mean", vec![7], 0.0, 0.0);
    let var = konst(&mut g, "bn.var", vec![7], 1.0, 1.0);
    let bn = g
        .add_node(
            "bn",
            Op::BatchNorm(BatchNorm::default()),
            &[cat, gamma, beta, mean, var],
        )
        .expect("bn")
        .out(0);
    let pool = g
        .add_node("pool", Op::GlobalAveragePool(GlobalAveragePool), &[bn])
        .expect("pool")
        .out(0);
    let flat = g
        .add_node("flat", Op::Flatten(Flatten { axis: 1 }), &[pool])
        .expect("flat")
        .out(0);
    let wf = konst(&mut g, "fc.w", vec![3, 7], -0.5, 0.5);
    let bf = konst(&mut g, "fc.b", vec![3], -0.1, 0.1);
    let gemm = Op::Gemm(Gemm {
        trans_b: true,
        ..Gemm::default()
    });
    let y = g.add_node("fc", gemm, &[flat, wf, bf]).expect("fc").out(0);
    g.set_outputs(vec![("y".into(), y)]).expect("outputs");
    g.check().expect("valid");
    g
}

#[test]
fn autodiff_gradients_match_finite_differences() {
    let g = tiny_graph();
    let program = lower(&g).expect("lower");
    let inference = Backend::Flex.device();
    let train = inference.clone().autodiff();
    let mut rng = SplitMix64::new(11);
    let x = random(&mut rng, 2 * 4 * 5 * 5, -1.0, 1.0);
    let target = vec![1.0f32, 0.0, 0.0, 0.0, 0.0, 1.0];
    let loss_of = |params: &Params, device: &training::Device| -> Tensor<1> {
        let input = Tensor::<4>::from_data(TensorData::new(x.clone(), [2, 4, 5, 5]), device);
        let logits = program.forward(&params.values, input, true).logits;
        let t = Tensor::<2>::from_data(TensorData::new(target.clone(), [2, 3]), device);
        cross_entropy_with_logits(logits, t)
    };
    let params = Params::from_graph(&program, &g, &train).expect("params");
    let host = params.to_host();
    let grads = loss_of(&params, &train).backward();
    let (mut checked, mut nonzero) = (0, 0);
    for (i, spec) in program.params().iter().enumerate() {
        if spec.role != Role::Learnable {
            continue;
        }
        let analytic = host_vec(&params.values[i].grad(&grads).expect("gradient"));
        for k in (0..analytic.len()).step_by((analytic.len() / 8).max(1)) {
            let eps = 1e-2f32;
            let at = |delta: f32| {
                let mut h = host.clone();
                h[i][k] += delta;
                host_vec(&loss_of(&Params::from_host(&program, h, &inference), &inference))[0] as f64
            };
            let numeric = (at(eps) - at(-eps)) / (2.0 * eps as f64);
            let a = analytic[k] as f64;
            assert!(
                (a - numeric).abs() <= 2e-3 + 2e-2 * numeric.abs(),
                "{}[{k}]: autodiff {a:.6}, finite difference {numeric:.6}",
                spec.name
            );
            checked += 1;
            if numeric.abs() > 1e-4 {
                nonzero += 1;
            }
        }
    }
    assert!(
        nonzero >= 30,
        "only {nonzero} of {checked} checked entries have a gradient that is not zero"
    );
}

/// With `ConvGrad::Im2col` the forward pass taps both convolutions (one
/// grouped), and the weight gradients taken from the taps, with every other
/// parameter's autodiff gradient, equal the all-autodiff gradients.
#[test]
fn im2col_conv_gradients_match_autodiff_in_the_lowered_graph() {
    let g = tiny_graph();
    let program = lower(&g).expect("lower");
    let train = Backend::Flex.device().autodiff();
    let mut rng = SplitMix64::new(13);
    let x = random(&mut rng, 2 * 4 * 5 * 5, -1.0, 1.0);
    let target = vec![0.0f32, 1.0, 0.0, 0.0, 0.0, 1.0];
    let params = Params::from_graph(&program, &g, &train).expect("params");
    let run = |conv_grad: ConvGrad| -> Vec<Option<Vec<f32>>> {
        let input = Tensor::<4>::from_data(TensorData::new(x.clone(), [2, 4, 5, 5]), &train);
        let fwd = program.forward_with(&params.values, input, true, conv_grad);
        let t = Tensor::<2>::from_data(TensorData::new(target.clone(), [2, 3]), &train);
        let grads = cross_entropy_with_logits(fwd.logits, t).backward();
        let mut out: Vec<Option<Vec<f32>>> = params
            .values
            .iter()
            .map(|p| p.grad(&grads).map(|g| host_vec(&g)))
            .collect();
        for tap in &fwd.taps {
            assert!(out[tap.weight].is_none(), "a tapped weight has no autodiff gradient");
            out[tap.weight] = tap.weight_grad(&grads).map(|g| host_vec(&g));
        }
        assert_eq!(fwd.taps.len(), if conv_grad == ConvGrad::Im2col { 2 } else { 0 });
        out
    };
    let (want, got) = (run(ConvGrad::Autodiff), run(ConvGrad::Im2col));
    for (i, spec) in program.params().iter().enumerate() {
        if spec.role != Role::Learnable {
            continue;
        }
        let (w, g) = (want[i].as_ref().expect("gradient"), got[i].as_ref().expect("gradient"));
        assert_eq!(w.len(), g.len(), "{}", spec.name);
        for (k, (a, b)) in w.iter().zip(g).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 + 1e-4 * a.abs(),
                "{}[{k}]: autodiff {a}, im2col {b}",
                spec.name
            );
        }
    }
}
