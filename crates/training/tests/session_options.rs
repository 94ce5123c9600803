//! Session options that change how a step runs but not what it computes:
//! per-phase timing and the choice of convolution weight gradients.

use graph_ir::ops::{Flatten, MatMul, Op};
use graph_ir::rng::SplitMix64;
use graph_ir::{Fact, Graph, Tensor};
use training::data::ImageSet;
use training::{Autograd, Backend, ConvGrad, Recipe, Session, TrainError};

/// `flatten(x) @ w` on `[N, 1, 2, 2]` images, 3 classes.
fn linear() -> Graph {
    let mut g = Graph::new("linear");
    let x = g.add_input("x", Fact::f32([1, 1, 2, 2])).expect("input");
    let flat = g
        .add_node("flat", Op::Flatten(Flatten { axis: 1 }), &[x])
        .expect("flat")
        .out(0);
    let w: Vec<f32> = (0..12).map(|i| (i as f32 - 6.0) / 10.0).collect();
    let w = g.add_const("w", Tensor::from_f32([4, 3], &w)).expect("w");
    let y = g.add_node("mm", Op::MatMul(MatMul), &[flat, w]).expect("mm").out(0);
    g.set_outputs(vec![("y".into(), y)]).expect("outputs");
    g
}

fn images(n: usize) -> ImageSet {
    let mut rng = SplitMix64::new(9);
    ImageSet {
        description: "random".into(),
        shape: [1, 2, 2],
        classes: 3,
        pixels: (0..n * 4).map(|_| rng.below(256) as u8).collect(),
        labels: (0..n).map(|i| (i % 3) as u16).collect(),
        test_start: None,
        converted: Vec::new(),
    }
}

fn recipe() -> Recipe {
    Recipe {
        epochs: 1,
        batch_size: 8,
        lr: 0.1,
        ..Recipe::default()
    }
}

#[test]
fn phase_times_count_every_step_and_change_nothing() {
    let (g, set) = (linear(), images(50));
    let mut plain = Session::new(&g, &set, recipe(), Backend::Flex, None).expect("session");
    assert!(plain.phase_times().is_none());
    let want = plain.run_epoch(&mut ()).expect("epoch");
    let mut timed = Session::new(&g, &set, recipe(), Backend::Flex, None).expect("session");
    timed.set_phase_times(true);
    let got = timed.run_epoch(&mut ()).expect("epoch");
    let p = timed.phase_times().expect("phase times on");
    let steps = timed.split().train.len().div_ceil(8);
    assert_eq!(p.steps, steps);
    assert!(
        p.forward > 0.0 && p.backward > 0.0 && p.prepare >= 0.0 && p.update >= 0.0,
        "{p:?}"
    );
    assert!(p.line().contains(&format!("({steps} steps")), "{}", p.line());
    assert_eq!(
        (want.train_loss, want.val_loss, want.val_top1),
        (got.train_loss, got.val_loss, got.val_top1),
        "timing changed the training"
    );
}

#[test]
fn libtorch_conv_gradients_need_a_libtorch_backend() {
    let (g, set) = (linear(), images(16));
    let mut s = Session::new(&g, &set, recipe(), Backend::Flex, None).expect("session");
    match s.set_conv_grad(ConvGrad::LibTorch) {
        Err(TrainError::Option { key, reason }) => {
            assert_eq!(key, "conv-grad");
            assert!(reason.contains("tch backend"), "{reason}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(s.conv_grad(), ConvGrad::Autodiff);
    s.set_conv_grad(ConvGrad::Im2col).expect("im2col runs anywhere");
    assert_eq!(s.conv_grad(), ConvGrad::Im2col);
    assert_eq!("libtorch".parse::<ConvGrad>(), Ok(ConvGrad::LibTorch));
    assert!(
        "cudnn"
            .parse::<ConvGrad>()
            .unwrap_err()
            .contains("autodiff, im2col, libtorch")
    );
}

#[test]
fn libtorch_autograd_needs_a_libtorch_backend() {
    let (g, set) = (linear(), images(16));
    let mut s = Session::new(&g, &set, recipe(), Backend::Flex, None).expect("session");
    match s.set_autograd(Autograd::LibTorch) {
        Err(TrainError::Option { key, reason }) => {
            assert_eq!(key, "autograd");
            assert!(reason.contains("tch backend"), "{reason}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(s.autograd(), Autograd::Burn);
    s.set_autograd(Autograd::Burn).expect("burn runs anywhere");
    assert_eq!("libtorch".parse::<Autograd>(), Ok(Autograd::LibTorch));
    assert!("jax".parse::<Autograd>().unwrap_err().contains("burn, libtorch"));
}
