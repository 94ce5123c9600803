//! `stretch inspect`: stages, blocks and costs of a model.

use crate::format::{shape, si, table};
use crate::model_args::ModelArgs;
use anyhow::{Context, Result};
use graph_ir::analysis::{PartSummary, analyze};
use serde::Serialize;
use std::io::Write;

/// Show a model's stem, stages and head with their shapes and costs.
///
/// Per part: blocks (and how many are identity-residual), input and output
/// shapes, channels, MACs, parameters and share of the model's MACs.
///
/// Stages are found from the graph's structure (cuts, identity-residual
/// blocks, linear bottlenecks), never from node names. MACs count Conv and
/// Gemm/MatMul multiply-accumulates; parameters count the elements of float
/// initializers (BatchNorm statistics included).
///
/// --json prints a document with schema "stretch.inspect/1":
/// {schema, model, input: {name, shape}, output: {name, shape},
///  stem, stages: [..], head (each: kind, index, blocks, residual_blocks,
///  input_shape, output_shape, channels, macs, flops, params,
///  activation_bytes, mac_share, nodes),
///  total: {macs, flops, params, activation_bytes}}.
/// Fields are only ever added within a schema version.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,

    /// Print the stable JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Port {
    name: String,
    shape: Vec<usize>,
}

#[derive(Serialize)]
struct Report {
    schema: &'static str,
    model: String,
    input: Port,
    output: Port,
    #[serde(flatten)]
    summary: graph_ir::analysis::Summary,
}

fn row(label: String, p: &PartSummary) -> Vec<String> {
    let blocks = if p.kind == "stage" {
        format!("{} ({} res)", p.blocks, p.residual_blocks)
    } else {
        "-".into()
    };
    vec![
        label,
        blocks,
        shape(&p.input_shape),
        shape(&p.output_shape),
        p.channels.to_string(),
        si(p.macs),
        si(p.params),
        format!("{:.1}%", 100.0 * p.mac_share),
    ]
}

pub fn run(args: Args) -> Result<()> {
    let graph = args.model.load()?;
    let structure = analyze(&graph).with_context(|| format!("cannot analyse {}", args.model.model.display()))?;
    let summary = structure.summary(&graph);
    let input = graph.inputs()[0];
    let (out_name, out) = graph.outputs()[0].clone();
    let report = Report {
        schema: "stretch.inspect/1",
        model: args.model.model.display().to_string(),
        input: Port {
            name: graph.node(input).name.clone(),
            shape: graph.node(input).outputs[0].shape.clone(),
        },
        output: Port {
            name: out_name,
            shape: graph.fact(out).map(|f| f.shape.clone()).unwrap_or_default(),
        },
        summary,
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    let s = &report.summary;
    let mut rows = vec![
        [
            "part", "blocks", "input", "output", "channels", "MACs", "params", "MACs %",
        ]
        .map(String::from)
        .to_vec(),
    ];
    rows.push(row("stem".into(), &s.stem));
    for st in &s.stages {
        rows.push(row(format!("stage {}", st.index), st));
    }
    rows.push(row("head".into(), &s.head));
    rows.push(vec![
        "total".into(),
        s.stages.iter().map(|p| p.blocks).sum::<usize>().to_string(),
        shape(&report.input.shape),
        shape(&report.output.shape),
        String::new(),
        si(s.total.macs),
        si(s.total.params),
        "100.0%".into(),
    ]);
    writeln!(
        out,
        "{}: input `{}` {}, output `{}` {}, {} stages, blocks per stage {:?}",
        report.model,
        report.input.name,
        shape(&report.input.shape),
        report.output.name,
        shape(&report.output.shape),
        s.stages.len(),
        s.stages.iter().map(|p| p.blocks).collect::<Vec<_>>()
    )?;
    write!(out, "{}", table(&rows, 2))?;
    writeln!(
        out,
        "MACs count Conv/Gemm/MatMul multiply-accumulates (computed from shapes); params count float initializer elements ({} exactly).",
        s.total.params
    )?;
    Ok(())
}
