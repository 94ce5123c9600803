//! `stretch run`: run a (branched) model once on the subgraph runtime.

use crate::model_args::ModelArgs;
use crate::runtime_args::{RuntimeArgs, load_adaptive};
use anyhow::{Context, Result, bail};
use scheduler_rt::npy::{self, Array};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;
use tract_onnx::prelude::{IntoTValue, Tensor};

/// Run a model once on the subgraph runtime and summarize its outputs.
///
/// The model is cut into processor-level subgraphs from its `processor`
/// node annotations (as `stretch branch` writes them); each subgraph runs on
/// its processor's worker (tract engine), branches in parallel, joined at
/// meeting points. A model without annotations runs whole on the first
/// processor. Inputs and outputs are NumPy .npy files of float32 (C order,
/// little-endian); the model must have one input.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub runtime: RuntimeArgs,

    /// Input tensor (.npy, float32) with the model input's exact shape.
    #[arg(
        long,
        value_name = "IN.npy",
        conflicts_with = "random",
        required_unless_present = "random"
    )]
    pub input: Option<PathBuf>,

    /// Use a pseudo-random input (uniform in [-1, 1)) drawn from SEED.
    #[arg(long, value_name = "SEED")]
    pub random: Option<u64>,

    /// Write an output here (.npy, float32): the first --output gets
    /// output 0, a second one output 1, and so on.
    #[arg(long, value_name = "OUT.npy")]
    pub output: Vec<PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    let label = args.model.model.display().to_string();
    let graph = args.model.load_runnable()?;
    if args.output.len() > graph.outputs().len() {
        bail!(
            "{} --output files given, but {label} has {} outputs",
            args.output.len(),
            graph.outputs().len()
        );
    }
    let processors = args.runtime.processors(&graph)?;
    let rt = load_adaptive(&graph, &processors, args.runtime.adaptive()?, &label)?;
    let facts = rt.input_facts();
    let [(input_name, fact)] = facts.as_slice() else {
        bail!("{label} has {} inputs; stretch run supports one", facts.len());
    };
    let array = match (&args.input, args.random) {
        (Some(path), _) => npy::read(path)?,
        (None, Some(seed)) => Array {
            shape: fact.shape.clone(),
            data: scheduler_rt::npy::random_values(seed, fact.volume()),
        },
        (None, None) => bail!("give --input IN.npy or --random SEED"),
    };
    if array.shape != fact.shape {
        bail!(
            "input '{input_name}' of {label}: expected shape {:?}, got {:?}{}",
            fact.shape,
            array.shape,
            args.input
                .as_ref()
                .map(|p| format!(" from {}", p.display()))
                .unwrap_or_default()
        );
    }
    let x = Tensor::from_shape(&array.shape, &array.data)?.into_tvalue();
    let start = Instant::now();
    let (outputs, trace) = rt.run_traced(vec![x]).with_context(|| format!("cannot run {label}"))?;
    let spans = trace.spans;
    let elapsed = start.elapsed();
    let mut out = std::io::stdout().lock();
    let engines: Vec<String> = rt.engines().iter().map(|(p, e, v)| format!("{p}={e} {v}")).collect();
    writeln!(out, "model      {label}")?;
    writeln!(out, "processors {}", engines.join(", "))?;
    writeln!(out, "subgraphs  {}", rt.partition().subgraphs.len())?;
    for s in &spans {
        writeln!(
            out,
            "  {:<14} {:>9.3} ms .. {:>9.3} ms",
            s.subgraph,
            s.start_s * 1e3,
            s.end_s * 1e3
        )?;
    }
    writeln!(
        out,
        "run        {:.3} ms (measured, one run, first run included)",
        elapsed.as_secs_f64() * 1e3
    )?;
    for (i, v) in outputs.iter().enumerate() {
        let view = v.to_plain_array_view::<f32>().context("output is not float32")?;
        let data: Vec<f32> = view.iter().copied().collect();
        let n = data.len().max(1) as f64;
        let mean = data.iter().map(|v| *v as f64).sum::<f64>() / n;
        let (min, max) = data
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), v| (a.min(*v), b.max(*v)));
        let argmax = data
            .iter()
            .enumerate()
            .fold((0, f32::NEG_INFINITY), |m, (i, v)| if *v > m.1 { (i, *v) } else { m })
            .0;
        writeln!(
            out,
            "output {i}   shape {:?} min {min:.6} max {max:.6} mean {mean:.6} argmax {argmax}",
            v.shape()
        )?;
        if let Some(path) = args.output.get(i) {
            let a = Array {
                shape: v.shape().to_vec(),
                data,
            };
            npy::write(path, &a).with_context(|| format!("cannot write output {i} to {}", path.display()))?;
            writeln!(out, "wrote      {}", path.display())?;
        }
    }
    Ok(())
}
