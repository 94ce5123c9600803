//! `stretch zoo`: small reference CNNs built through the IR.

use anyhow::{Context, Result};
use graph_ir::zoo::{self, ZooOptions};
use std::path::PathBuf;

/// Write a small reference CNN as ONNX: `resnet-mini` (three stages of ResNet
/// basic blocks, 16/32/64 channels) or `mbnet-mini` (three stages of
/// MobileNetV2 inverted residuals with depthwise convs and ReLU6). Both keep
/// BatchNorm and end in global pooling and a fully connected layer. Weights
/// are drawn from --seed (uniform with variance 1/fan-in; BatchNorm scale and
/// variance in [0.5, 1.5]), so the model runs as written.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model name: resnet-mini or mbnet-mini.
    pub name: String,

    /// Side of the square RGB input.
    #[arg(long, default_value_t = 32)]
    pub input_size: usize,

    /// Number of classes of the classifier.
    #[arg(long, default_value_t = 10)]
    pub classes: usize,

    /// Seed of the weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Output ONNX file.
    #[arg(short, long, value_name = "OUT.onnx")]
    pub out: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    let o = ZooOptions {
        input_size: args.input_size,
        classes: args.classes,
    };
    let mut g = zoo::build(&args.name, &o)?;
    g.fill_missing_weights(args.seed);
    graph_ir::onnx::export_file(&g, &args.out).with_context(|| format!("cannot write {}", args.out.display()))?;
    let cost = g.total_cost();
    println!(
        "wrote {}: {} for {}x{} inputs, {} classes, {:.2} MMACs, {} params",
        args.out.display(),
        args.name,
        args.input_size,
        args.input_size,
        args.classes,
        cost.macs as f64 / 1e6,
        cost.params
    );
    Ok(())
}
