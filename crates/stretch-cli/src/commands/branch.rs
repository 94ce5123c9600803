//! `stretch branch` and `stretch stretch`: write the branched model.

use super::plan::SearchArgs;
use crate::model_args::ModelArgs;
use crate::plan_text::describe;
use anyhow::{Context, Result};
use branching::{Plan, apply_plan};
use std::path::PathBuf;

/// Write the branched model a plan describes (ONNX, opset 17).
///
/// Every branched stage is replaced by one branch per processor (its first
/// `depth` blocks, channels scaled to `width`, new layers freshly
/// initialised: Kaiming normal, BatchNorm 1/0) meeting in a Concat; every
/// node carries `processor` and `meeting_point` annotations (ONNX
/// metadata_props, which other tools ignore). With --random-weights SEED a
/// structure-only model becomes runnable; new layers' weights come from
/// --seed.
///
/// A plan made for another model (its recorded structure fingerprint
/// differs) is refused. A plan that records no fingerprint (written before
/// plans recorded one) is applied with a warning on stderr: its stages,
/// blocks and channels are still checked against the model, which is all
/// the rewrite relies on, so the branched model is well formed; only the
/// plan's latencies may belong to another model.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,

    /// The plan (`stretch plan -o`).
    #[arg(long, value_name = "PLAN.json")]
    pub plan: PathBuf,

    /// Seed of the new layers' weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Output ONNX file.
    #[arg(short, long, value_name = "OUT.onnx")]
    pub out: PathBuf,
}

/// Search a plan and write the branched model in one step (`plan` + `branch`).
#[derive(clap::Args, Debug)]
pub struct StretchArgs {
    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub search: SearchArgs,

    /// Also write the plan here.
    #[arg(long, value_name = "PLAN.json")]
    pub plan_out: Option<PathBuf>,

    /// Seed of the new layers' weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    #[command(flatten)]
    pub calibration: crate::commands::quantize::CalibrationArgs,

    /// Output ONNX file (with --calibration, the quantized model; the fp32
    /// branched model is written beside it as `NAME.fp32.onnx`).
    #[arg(short, long, value_name = "OUT.onnx")]
    pub out: PathBuf,
}

/// Branches `graph` by `plan`, writes it to `out` and returns it.
fn write(graph: &graph_ir::Graph, plan: &Plan, seed: u64, out: &PathBuf) -> Result<graph_ir::Graph> {
    let branched = apply_plan(graph, plan, seed).context("cannot branch the model")?;
    graph_ir::onnx::export_file(&branched, out).with_context(|| format!("cannot write {}", out.display()))?;
    let cost = branched.total_cost();
    let original = graph.total_cost().macs;
    println!(
        "wrote {}: {} stages branched of {}, {:.3} GMACs ({:.2}x the original's {:.3}), {} params",
        out.display(),
        plan.branched_stages(),
        plan.stages.len(),
        cost.macs as f64 / 1e9,
        cost.macs as f64 / original.max(1) as f64,
        original as f64 / 1e9,
        cost.params
    );
    Ok(branched)
}

pub fn run(args: Args) -> Result<()> {
    let graph = args.model.load()?;
    let plan = Plan::load(&args.plan)?;
    if plan.model_fingerprint.is_none() {
        eprintln!(
            "warning: {}: the plan records no model fingerprint, so it is not known to be for {}: only its stages, blocks and channels are checked",
            args.plan.display(),
            args.model.model.display()
        );
    }
    write(&graph, &plan, args.seed, &args.out).map(drop)
}

pub fn run_stretch(args: StretchArgs) -> Result<()> {
    let graph = args.model.load()?;
    let label = args.model.model.display().to_string();
    let model = args.search.model()?;
    let processors = args.search.processors(&model);
    let (plan, _) = args.search.plan(&graph, &label, &processors, false)?;
    print!("{}", describe(&plan));
    if let Some(p) = &args.plan_out {
        plan.save(p)?;
        println!("wrote {}", p.display());
    }
    if args.calibration.calibration.is_none() {
        return write(&graph, &plan, args.seed, &args.out).map(drop);
    }
    let fp32 = args.out.with_extension("fp32.onnx");
    let branched = write(&graph, &plan, args.seed, &fp32)?;
    let quantized = crate::commands::quantize::quantize_to(
        &branched,
        &fp32.display().to_string(),
        &args.search.device,
        None,
        &args.calibration,
        &args.out,
    );
    if quantized.is_err() {
        let _ = std::fs::remove_file(&fp32);
    }
    quantized
}
