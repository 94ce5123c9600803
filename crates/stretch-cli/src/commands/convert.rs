//! `stretch convert`: import and export again.

use crate::model_args::ModelArgs;
use anyhow::{Context, Result};
use std::path::PathBuf;

/// Import an ONNX model and write it back out through the IR (opset 17).
///
/// On the way, Identity and Dropout nodes and constant subgraphs are folded
/// away and dynamic dimensions are fixed (batch 1 unless --input-shape says
/// otherwise). With --random-weights, a structure-only model becomes a
/// runnable one. Node annotations are kept as ONNX metadata_props.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,

    /// Where to write the converted model.
    #[arg(short, long, value_name = "OUT.onnx")]
    pub output: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    let graph = args.model.load()?;
    graph_ir::onnx::export_file(&graph, &args.output)
        .with_context(|| format!("cannot export to {}", args.output.display()))?;
    let cost = graph.total_cost();
    let missing = graph.weights_without_data().len();
    let note = if args.model.random_weights.is_some() {
        ", missing weights filled from the seed".to_string()
    } else if missing > 0 {
        format!("; {missing} weights have no data (structure-only), pass --random-weights SEED to fill them")
    } else {
        String::new()
    };
    let operators = graph
        .node_ids()
        .into_iter()
        .filter(|&id| !matches!(graph.node(id).op, graph_ir::Op::Input(_) | graph_ir::Op::Const(_)))
        .count();
    println!(
        "wrote {} ({operators} operators, {} parameters{note})",
        args.output.display(),
        cost.params
    );
    Ok(())
}
