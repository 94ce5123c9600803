//! Gradients at an activation's kink follow PyTorch. A 1x1 convolution
//! with a zero bias gives exactly 0 wherever its input is 0. Clip passes no
//! gradient where its input equals a bound: below 6 everywhere, `Clip(0, 6)`
//! is the same function as `Relu` (zero gradient at 0 too), so every
//! gradient must be the same. LeakyRelu's gradient at 0 is its slope: on an
//! all-zero input the bias gradient with slope 0.25 is a quarter of the one
//! with slope 1 (the identity). HardSigmoid with its lower bound at 0 passes
//! none there.

use graph_ir::ops::{Conv, Flatten, Gemm, GlobalAveragePool, Op, Unary, UnaryOp};
use graph_ir::rng::SplitMix64;
use graph_ir::{Fact, Graph, Tensor as IrTensor};
use training::{Backend, batch_gradients};

fn graph(activation: UnaryOp) -> Graph {
    let mut rng = SplitMix64::new(11);
    let mut g = Graph::new("clip");
    let x = g.add_input("x", Fact::f32([4, 2, 6, 6])).expect("input");
    let mut konst = |g: &mut Graph, name: &str, shape: Vec<usize>, lo: f32, hi: f32| {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|_| lo + (hi - lo) * rng.next_f32()).collect();
        g.add_const(name, IrTensor::from_f32(shape, &v)).expect("const")
    };
    let w = konst(&mut g, "c.w", vec![3, 2, 1, 1], 0.1, 0.9);
    let b = konst(&mut g, "c.b", vec![3], 0.0, 0.0);
    let conv = Op::Conv(Conv {
        strides: [1, 1],
        pads: [0, 0, 0, 0],
        dilations: [1, 1],
        group: 1,
    });
    let c = g.add_node("c", conv, &[x, w, b]).expect("conv").out(0);
    let a = g
        .add_node("act", Op::Unary(Unary { op: activation }), &[c])
        .expect("act")
        .out(0);
    let pool = g
        .add_node("pool", Op::GlobalAveragePool(GlobalAveragePool), &[a])
        .expect("pool")
        .out(0);
    let flat = g
        .add_node("flat", Op::Flatten(Flatten { axis: 1 }), &[pool])
        .expect("flat")
        .out(0);
    let wf = konst(&mut g, "fc.w", vec![5, 3], -0.5, 0.5);
    let bf = konst(&mut g, "fc.b", vec![5], -0.1, 0.1);
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
fn clip_at_its_bound_passes_no_gradient() {
    let mut rng = SplitMix64::new(5);
    let images: Vec<f32> = (0..4 * 2 * 36)
        .map(|i| {
            if (i % 36) % 3 == 0 {
                0.0
            } else {
                0.3 + 0.7 * rng.next_f32()
            }
        })
        .collect();
    let labels = [0i64, 3, 1, 4];
    let relu = batch_gradients(&graph(UnaryOp::Relu), images.clone(), &labels, Backend::Flex).expect("relu");
    let clip = UnaryOp::Clip {
        min: Some(0.0),
        max: Some(6.0),
    };
    let clip = batch_gradients(&graph(clip), images, &labels, Backend::Flex).expect("clip");
    assert_eq!(relu.loss, clip.loss);
    for ((name, _, want), (_, _, got)) in relu.grads.iter().zip(&clip.grads) {
        assert_eq!(want, got, "gradient of {name}");
    }
}

/// The gradient of the convolution's bias on an all-zero batch.
fn bias_gradient_at_zero(activation: UnaryOp) -> Vec<f32> {
    let images = vec![0.0f32; 4 * 2 * 36];
    let labels = [1i64, 0, 4, 2];
    let g = batch_gradients(&graph(activation), images, &labels, Backend::Flex).expect("gradients");
    g.grads.into_iter().find(|(n, _, _)| n == "c.b").expect("c.b").2
}

#[test]
fn hard_sigmoid_at_its_lower_bound_passes_no_gradient() {
    let whole = bias_gradient_at_zero(UnaryOp::LeakyRelu { alpha: 1.0 });
    assert!(
        whole.iter().any(|v| v.abs() > 1e-4),
        "no gradient reaches the bias: {whole:?}"
    );
    let got = bias_gradient_at_zero(UnaryOp::HardSigmoid { alpha: 1.0, beta: 0.0 });
    assert_eq!(got, vec![0.0; got.len()]);
}

#[test]
fn leaky_relu_at_zero_passes_its_slope() {
    let got = bias_gradient_at_zero(UnaryOp::LeakyRelu { alpha: 0.25 });
    let whole = bias_gradient_at_zero(UnaryOp::LeakyRelu { alpha: 1.0 });
    assert!(
        whole.iter().any(|v| v.abs() > 1e-4),
        "no gradient reaches the bias: {whole:?}"
    );
    for (g, w) in got.iter().zip(&whole) {
        assert!(
            (g - 0.25 * w).abs() <= 1e-6 * w.abs().max(1.0),
            "slope 0.25 gives {got:?}, slope 1 {whole:?}"
        );
    }
}
