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
/// {schema, model, input: {name, shape}, output: {name, shape} (the first),
///  outputs: [{name, shape}] (every graph output),
///  stem, stages: [..], head (each: kind, index, blocks, residual_blocks,
///  input_shape, output_shape, channels, macs, flops, params,
///  activation_bytes, mac_share, nodes),
///  total: {macs, flops, params, activation_bytes},
///  branches and work_ratio for a branched model}.
/// Fields are only ever added within a schema version.
#[derive(clap::Args, Debug)]
#[command(after_long_help = supported_ops_help())]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,

    /// Print the stable JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The operators every command accepts, for `--help`.
pub fn supported_ops_help() -> String {
    format!(
        "Supported ONNX operators (default domain): {}.\n\
         Evaluated at import time where all their inputs are constants (shape computations): {}.\n\
         Convolution and pooling are 2-D; anything else is refused with the node named.",
        graph_ir::onnx::SUPPORTED_OPS.join(", "),
        graph_ir::onnx::FOLDED_OPS.join(", ")
    )
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
    outputs: Vec<Port>,
    #[serde(flatten)]
    summary: graph_ir::analysis::Summary,
    /// Branches of a branched model (absent otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    branches: Vec<BranchRow>,
    /// A branched model's MACs over those of the model it was branched
    /// from (from the metadata `stretch branch` writes; absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    work_ratio: Option<f64>,
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

/// One branch of a branched model, from its nodes' annotations.
#[derive(Serialize)]
struct BranchRow {
    stage: String,
    branch: String,
    processor: String,
    nodes: usize,
    macs: u64,
    params: u64,
}

/// Branches of a model `stretch branch` wrote, grouped by their `stage` and
/// `branch` annotations, in stage order.
fn branches(g: &graph_ir::Graph) -> Vec<BranchRow> {
    use graph_ir::keys;
    let mut groups: std::collections::BTreeMap<(usize, usize), (String, Vec<graph_ir::NodeId>)> = Default::default();
    for id in g.node_ids() {
        let a = &g.node(id).annotations;
        let (Some(s), Some(b)) = (a.get(keys::STAGE), a.get(keys::BRANCH)) else {
            continue;
        };
        let (Ok(s), Ok(b)) = (s.parse::<usize>(), b.parse::<usize>()) else {
            continue;
        };
        let entry = groups
            .entry((s, b))
            .or_insert_with(|| (a.get(keys::PROCESSOR).cloned().unwrap_or_default(), Vec::new()));
        entry.1.push(id);
    }
    groups
        .into_iter()
        .map(|((s, b), (processor, ids))| {
            let cost = g.cost_of(&ids);
            BranchRow {
                stage: s.to_string(),
                branch: b.to_string(),
                processor,
                nodes: ids.len(),
                macs: cost.macs,
                params: cost.params,
            }
        })
        .collect()
}

pub fn run(args: Args) -> Result<()> {
    let graph = args.model.load()?;
    let structure = analyze(&graph).with_context(|| format!("cannot analyse {}", args.model.model.display()))?;
    let summary = structure.summary(&graph);
    let input = graph.inputs()[0];
    let outputs: Vec<Port> = graph
        .outputs()
        .iter()
        .map(|(name, o)| Port {
            name: name.clone(),
            shape: graph.fact(*o).map(|f| f.shape.clone()).unwrap_or_default(),
        })
        .collect();
    let report = Report {
        schema: "stretch.inspect/1",
        model: args.model.model.display().to_string(),
        input: Port {
            name: graph.node(input).name.clone(),
            shape: graph.node(input).outputs[0].shape.clone(),
        },
        output: Port {
            name: outputs[0].name.clone(),
            shape: outputs[0].shape.clone(),
        },
        outputs,
        summary,
        branches: branches(&graph),
        work_ratio: graph
            .metadata
            .get(graph_ir::keys::ORIGINAL_MACS)
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&m| m > 0)
            .map(|m| graph.total_cost().macs as f64 / m as f64),
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    write_text(&mut out, &report)
}

/// The report as text: the stage table, then the branches of a branched model.
fn write_text(out: &mut impl Write, report: &Report) -> Result<()> {
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
        "{}: input `{}` {}, {} {}, {} stages, blocks per stage {:?}",
        report.model,
        report.input.name,
        shape(&report.input.shape),
        if report.outputs.len() == 1 { "output" } else { "outputs" },
        report
            .outputs
            .iter()
            .map(|p| format!("`{}` {}", p.name, shape(&p.shape)))
            .collect::<Vec<_>>()
            .join(", "),
        s.stages.len(),
        s.stages.iter().map(|p| p.blocks).collect::<Vec<_>>()
    )?;
    write!(out, "{}", table(&rows, 2))?;
    writeln!(out, "head: starts where {}", s.head_reason)?;
    if let Some(r) = report.work_ratio {
        writeln!(out, "work: {r:.2}x the MACs of the model it was branched from")?;
    }
    if !report.branches.is_empty() {
        let mut rows = vec![
            ["stage", "branch", "processor", "nodes", "MACs", "params"]
                .map(String::from)
                .to_vec(),
        ];
        for b in &report.branches {
            rows.push(vec![
                b.stage.clone(),
                b.branch.clone(),
                b.processor.clone(),
                b.nodes.to_string(),
                si(b.macs),
                si(b.params),
            ]);
        }
        writeln!(
            out,
            "branched model: {} branches meet at Concat meeting points (stage analysis above sees each branched stage as one region)",
            report.branches.len()
        )?;
        write!(out, "{}", table(&rows, 3))?;
    }
    writeln!(
        out,
        "MACs count Conv/Gemm/MatMul multiply-accumulates (computed from shapes); params count float initializer elements ({} exactly).",
        s.total.params
    )?;
    Ok(())
}
