//! Biases and scales a graph applies with Add or Mul after a MatMul are
//! learned like Gemm's; a scalar operand (the 2 of `y * 2`) stays fixed.

use graph_ir::ops::{Binary, BinaryOp, Flatten, MatMul, Op};
use graph_ir::rng::SplitMix64;
use graph_ir::{Fact, Graph, Tensor};
use training::data::ImageSet;
use training::{Backend, Recipe, Role, Session, lower, reinitialise};

fn binary(op: BinaryOp) -> Op {
    Op::Binary(Binary { op })
}

/// `((flatten(x) @ w + b) * s) * 2`: w `[4, 3]`, bias b `[3]`, scale s
/// `[1, 3]`, on `[N, 1, 2, 2]` images.
fn matmul_bias() -> Graph {
    let mut g = Graph::new("linear");
    let x = g.add_input("x", Fact::f32([1, 1, 2, 2])).expect("input");
    let flat = g
        .add_node("flat", Op::Flatten(Flatten { axis: 1 }), &[x])
        .expect("flat")
        .out(0);
    let w: Vec<f32> = (0..12).map(|i| (i as f32 - 6.0) / 10.0).collect();
    let w = g.add_const("w", Tensor::from_f32([4, 3], &w)).expect("w");
    let b = g.add_const("b", Tensor::from_f32([3], &[0.1, -0.2, 0.3])).expect("b");
    let s = g.add_const("s", Tensor::from_f32([1, 3], &[1.0, 0.5, 2.0])).expect("s");
    let two = g.add_const("two", Tensor::from_f32([1], &[2.0])).expect("two");
    let y = g.add_node("mm", Op::MatMul(MatMul), &[flat, w]).expect("mm").out(0);
    let y = g.add_node("bias", binary(BinaryOp::Add), &[y, b]).expect("add").out(0);
    let y = g.add_node("scale", binary(BinaryOp::Mul), &[s, y]).expect("mul").out(0);
    let y = g
        .add_node("double", binary(BinaryOp::Mul), &[y, two])
        .expect("mul")
        .out(0);
    g.set_outputs(vec![("y".into(), y)]).expect("outputs");
    g.check().expect("valid");
    g
}

fn values(g: &Graph, name: &str) -> Vec<f32> {
    let id = g.find(name).expect("constant");
    match &g.node(id).op {
        Op::Const(t) => t.to_f32_vec().expect("data"),
        other => panic!("{name} is {}", other.name()),
    }
}

#[test]
fn a_bias_added_after_matmul_is_trained() {
    let mut g = matmul_bias();
    let program = lower(&g).expect("lower");
    let role = |name: &str| {
        program
            .params()
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.role)
            .expect("parameter")
    };
    assert_eq!(role("w"), Role::Learnable);
    assert_eq!(role("b"), Role::Learnable, "the bias after the MatMul is frozen");
    assert_eq!(role("s"), Role::Learnable, "the scale is frozen");
    assert_eq!(role("two"), Role::Fixed);
    let mut rng = SplitMix64::new(5);
    let n = 40;
    let set = ImageSet {
        description: "random".into(),
        shape: [1, 2, 2],
        classes: 3,
        pixels: (0..n * 4).map(|_| rng.below(256) as u8).collect(),
        labels: (0..n).map(|i| (i % 3) as u16).collect(),
        test_start: None,
        converted: Vec::new(),
    };
    let recipe = Recipe {
        epochs: 1,
        batch_size: 8,
        lr: 0.1,
        weight_decay: 0.0,
        ..Recipe::default()
    };
    let before: Vec<Vec<f32>> = ["b", "s", "two"].iter().map(|p| values(&g, p)).collect();
    let mut session = Session::new(&g, &set, recipe, Backend::Flex, None).expect("session");
    session.run_epoch(&mut ()).expect("epoch");
    session.write_back(&mut g).expect("write back");
    let after: Vec<Vec<f32>> = ["b", "s", "two"].iter().map(|p| values(&g, p)).collect();
    for (i, name) in ["b", "s"].iter().enumerate() {
        let moved = before[i]
            .iter()
            .zip(&after[i])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(moved > 1e-4, "{name} did not change: {:?} -> {:?}", before[i], after[i]);
    }
    assert_eq!(before[2], after[2], "the scalar changed");
}

#[test]
fn fresh_elementwise_biases_are_zero_and_scales_one() {
    let mut g = matmul_bias();
    let program = lower(&g).expect("lower");
    reinitialise(&mut g, &program, 3).expect("reinitialise");
    assert_eq!(values(&g, "b"), [0.0; 3]);
    assert_eq!(values(&g, "s"), [1.0; 3]);
    assert_eq!(values(&g, "two"), [2.0]);
}
