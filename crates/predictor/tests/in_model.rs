//! Kernels timed inside a whole model on tract: every kernel of the fusion
//! rules gets the time of the plan nodes tract derives from its ONNX nodes,
//! little time is left to no kernel, the kernels add up to the run, and the
//! rows carry the features prediction computes.

use graph_ir::builder::{Builder, ConvSpec};

use engine::TractEngine;
use engine::host::CoreSet;
use graph_ir::Graph;
use predictor::features::features;
use predictor::kernels::{OpClass, default_rules, detect};
use predictor::profiler::csv::Row;
use predictor::profiler::in_model::{inputs, time_kernels};
use predictor::profiler::{KernelKind, Origin};

fn model() -> Graph {
    let mut b = Builder::new("small-resnet");
    let x = b.input("x", &[1, 3, 48, 48]).unwrap();
    let y = b.conv_bn("stem", x, ConvSpec::new(16, 3, 2), true).unwrap();
    let y = b.max_pool("stem.pool", y, 3, 2).unwrap();
    let y = b.basic_block("s0.b0", y, 16, 1).unwrap();
    let y = b.basic_block("s1.b0", y, 32, 2).unwrap();
    let y = b.classifier("head", y, 10).unwrap();
    b.finish("y", y).unwrap()
}

#[test]
fn every_kernel_gets_its_time_inside_the_model() {
    let g = model();
    let engine = TractEngine::new(1).unwrap();
    let times = time_kernels(&engine, &g, &inputs(&g, 3), &default_rules(), 1, 5).unwrap();

    let kernels = detect(&g, &g.compute_order().unwrap(), &default_rules());
    assert_eq!(times.kernels.len(), kernels.len());
    for (timed, k) in times.kernels.iter().zip(&kernels) {
        assert_eq!(timed.name, g.node(k.nodes[0]).name);
        assert_eq!(timed.features, features(&g, k), "{}", timed.name);
        assert_eq!(timed.timing.reps, 5);
        let t = timed.timing;
        assert!(
            t.p10_ms <= t.median_ms && t.median_ms <= t.p90_ms,
            "{}: {t:?}",
            timed.name
        );
        if matches!(timed.class, OpClass::Conv | OpClass::Pool | OpClass::Fc) {
            assert!(t.median_ms > 0.0, "{} got no time", timed.name);
        }
    }
    let run = times.run.median_ms;
    assert!(
        times.unattributed_ms < 0.1 * run,
        "{} ms of a {run} ms run owned by no kernel",
        times.unattributed_ms
    );
    let sum: f64 = times.kernels.iter().map(|k| k.timing.median_ms).sum();
    assert!(
        sum > 0.5 * run && sum < 1.2 * run,
        "kernels {sum} ms against a {run} ms run"
    );

    let cores = CoreSet::new(vec![0]).unwrap();
    let conv = times.kernels.iter().find(|k| k.class == OpClass::Conv).unwrap();
    let row = conv.row(&engine, &cores, 0).expect("conv kernels have a kind");
    assert_eq!((row.kind, row.origin), (KernelKind::ConvBnRelu, Origin::InModel));
    assert_eq!(Row::parse(&row.to_line()).unwrap().to_line(), row.to_line());
    let flatten = times.kernels.iter().find(|k| k.class == OpClass::Layout);
    assert!(flatten.is_none_or(|k| k.row(&engine, &cores, 0).is_none()));
}

/// A 1x1 convolution, then an inverted residual on it (1x1 expand,
/// depthwise 3x3, 1x1 project, the residual add); three 1x1 siblings on one
/// value; a classifier.
fn fused_model() -> Graph {
    let mut b = Builder::new("fused");
    let x = b.input("x", &[1, 3, 32, 32]).unwrap();
    let x = b.conv_bn("stem", x, ConvSpec::new(32, 3, 1), true).unwrap();
    let x = b.conv_bn("pre", x, ConvSpec::new(32, 1, 1), false).unwrap();
    let e = b.conv_bn("ir.expand", x, ConvSpec::new(192, 1, 1), true).unwrap();
    let d = b
        .conv_bn("ir.dw", e, ConvSpec::new(192, 3, 1).group(192), true)
        .unwrap();
    let p = b.conv_bn("ir.project", d, ConvSpec::new(32, 1, 1), false).unwrap();
    let y = b.add("ir.add", x, p).unwrap();
    let s1 = b.conv_bn("sib.a", y, ConvSpec::new(64, 1, 1), true).unwrap();
    let s2 = b.conv_bn("sib.b", y, ConvSpec::new(32, 1, 1), true).unwrap();
    let s2 = b.conv_bn("sib.b3", s2, ConvSpec::new(64, 3, 1), true).unwrap();
    let s3 = b.conv_bn("sib.c", y, ConvSpec::new(16, 1, 1), true).unwrap();
    let s3 = b.conv_bn("sib.c3", s3, ConvSpec::new(32, 3, 1), true).unwrap();
    let y = b.add("sib.add", s1, s2).unwrap();
    let y = b.relu("sib.relu", y).unwrap();
    let z = b.conv_bn("sib.proj", s3, ConvSpec::new(64, 1, 1), false).unwrap();
    let y = b.add("sib.add2", y, z).unwrap();
    let y = b.classifier("head", y, 10).unwrap();
    b.finish("y", y).unwrap()
}

#[test]
fn products_that_absorbed_an_add_and_merged_siblings_keep_their_time() {
    let g = fused_model();
    let engine = TractEngine::new(1).unwrap();
    let times = time_kernels(&engine, &g, &inputs(&g, 3), &default_rules(), 1, 5).unwrap();
    let ms = |name: &str| {
        times
            .kernels
            .iter()
            .find(|k| k.name == name)
            .unwrap_or_else(|| panic!("no kernel {name}"))
            .timing
            .median_ms
    };
    assert!(
        ms("ir.add") < 0.5 * ms("ir.project"),
        "the residual add kept {} ms, the 1x1 projection before it {} ms",
        ms("ir.add"),
        ms("ir.project")
    );
    let (a, b, c) = (ms("sib.a"), ms("sib.b"), ms("sib.c"));
    assert!(b > 0.0 && c > 0.0, "1x1 siblings a {a}, b {b}, c {c} ms");
    assert!(
        (a / b - 2.0).abs() < 1e-6 && (b / c - 2.0).abs() < 1e-6,
        "shares by work: {a} {b} {c}"
    );
}
