//! Fits the analytic (roofline) model's CPU figures to real phone latencies.
//!
//! Reads an nn-Meter block table (the repository's
//! `data/phone-latency/*_blocks.json`), builds each MBConv block through the
//! IR, splits it into kernels with the default fusion rules, and fits effective
//! throughput, bandwidth and kernel overhead by grid search on log-latency
//! error over a seeded 80% split. Prints the held-out 20% accuracy of the
//! fitted analytic model and the profile figures with their source.
//!
//! `cargo run --release -p predictor --example fit_phone_cpu -- data/phone-latency/pixel4_cpu_blocks.json`

use graph_ir::builder::{Builder, ConvSpec};
use graph_ir::ops::{BinaryOp, UnaryOp};
use graph_ir::{Graph, GraphError, NodeId, Op};
use predictor::features::{Work, work};
use predictor::fit::Sample;
use predictor::fit::analytic::{accuracy, fit};
use predictor::kernels::{OpClass, default_rules, detect};
use std::collections::BTreeMap;

/// An MBConv block from an nn-Meter key.
struct Block {
    key: String,
    hw: usize,
    cin: usize,
    cout: usize,
    expand: usize,
    stride: usize,
    kernel: usize,
    se: bool,
}

fn parse(key: &str) -> Option<Block> {
    let p: Vec<&str> = key.split('_').collect();
    if p.len() != 10 || p[0] != "conv" {
        return None;
    }
    let n = |i: usize| p[i].parse::<usize>().ok();
    Some(Block {
        key: key.to_string(),
        hw: n(1)?,
        cin: n(2)?,
        cout: n(3)?,
        expand: n(4)?,
        stride: n(5)?,
        kernel: n(8)?,
        se: p[9] == "se",
    })
}

fn make_divisible(v: usize, d: usize) -> usize {
    (v + d / 2) / d * d.max(1)
}

/// The block as a graph (BatchNorm folded into conv biases, hard-swish activations).
fn build(b: &Block) -> Result<Graph, GraphError> {
    let mut g = Builder::new(&b.key);
    let x = g.input("x", &[1, b.cin, b.hw, b.hw])?;
    let mid = b.cin * b.expand;
    let mut y = x;
    if b.expand > 1 {
        y = g.conv("expand", y, ConvSpec::new(mid, 1, 1).bias())?;
        y = g.unary("expand.act", y, UnaryOp::HardSwish)?;
    }
    y = g.conv("dw", y, ConvSpec::new(mid, b.kernel, b.stride).group(mid).bias())?;
    y = g.unary("dw.act", y, UnaryOp::HardSwish)?;
    if b.se {
        let r = make_divisible(mid / 4, 8).max(8);
        let p = g
            .graph
            .add_node("se.pool", Op::GlobalAveragePool(Default::default()), &[y])?;
        let s = g.conv("se.reduce", p.out(0), ConvSpec::new(r, 1, 1).bias())?;
        let s = g.relu("se.relu", s)?;
        let s = g.conv("se.expand", s, ConvSpec::new(mid, 1, 1).bias())?;
        let s = g.unary(
            "se.gate",
            s,
            UnaryOp::HardSigmoid {
                alpha: 1.0 / 6.0,
                beta: 0.5,
            },
        )?;
        y = g.binary("se.scale", y, s, BinaryOp::Mul)?;
    }
    y = g.conv("project", y, ConvSpec::new(b.cout, 1, 1).bias())?;
    g.finish("y", y)
}

/// Kernel works of a block under the default fusion rules, flagged when the
/// kernel is a depthwise convolution.
fn kernel_works(g: &Graph) -> Result<Vec<(Work, bool)>, GraphError> {
    let nodes: Vec<NodeId> = g.topo_order()?;
    Ok(detect(g, &nodes, &default_rules())
        .iter()
        .map(|k| (work(g, k), k.class == OpClass::DwConv))
        .collect())
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: fit_phone_cpu BLOCKS.json   (e.g. data/phone-latency/pixel4_cpu_blocks.json)");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("error: {path}: {e}");
        std::process::exit(1)
    });
    let table: BTreeMap<String, f64> = serde_json::from_str(&text).unwrap_or_else(|e| {
        eprintln!("error: {path}: not a key → latency JSON object: {e}");
        std::process::exit(1)
    });
    let mut samples = Vec::new();
    for (key, ms) in &table {
        let Some(block) = parse(key) else { continue };
        match build(&block).and_then(|g| kernel_works(&g)) {
            Ok(works) => samples.push(Sample { works, ms: *ms }),
            Err(e) => eprintln!("skipping {key}: {e}"),
        }
    }
    let (mut train, mut test) = (Vec::new(), Vec::new());
    let mut state = 0x5eed_u64;
    for s in samples {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        if (state >> 33).is_multiple_of(5) {
            test.push(s)
        } else {
            train.push(s)
        }
    }
    let p = fit(&train);
    println!(
        "{path}: {} MBConv blocks ({} train, {} held out, split seed 0x5eed)",
        train.len() + test.len(),
        train.len(),
        test.len()
    );
    println!(
        "fitted: effective throughput {:.2} GFLOP/s (depthwise x{:.3}), bandwidth {:.2} GB/s, kernel overhead {:.1} us",
        p.gflops, p.depthwise_efficiency, p.bandwidth_gbs, p.overhead_us
    );
    for within in [0.05, 0.10, 0.15] {
        println!(
            "analytic model, held-out ±{:.0}% accuracy: {:.1}%  (train {:.1}%)",
            within * 100.0,
            100.0 * accuracy(&test, &p, within),
            100.0 * accuracy(&train, &p, within)
        );
    }
}
