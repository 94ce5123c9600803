//! `stretch bench`: a branched model on its processors against its original.

use crate::model_args::ModelArgs;
use crate::runtime_args::{RuntimeArgs, load};
use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use predictor::profiler::CoreSet;
use scheduler_rt::npy::random_values;
use scheduler_rt::{EngineKind, ProcessorConfig, Runtime, Span, TRACT_VERSION, WorkerKind, affinity};
use std::io::Write;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tract_onnx::prelude::{IntoTValue, Tensor};

/// Measure a branched model on its processors against the original model.
///
/// In one run, on the same random input, with the tract engine (tract
/// version printed; other engines are not built in): (1) the original on one
/// core, (2) the original with one intra-op thread per available core,
/// (3) the branched model with every processor inline on one core
/// (branches one after the other), (4) the branched model on its processors.
/// Prints median, p90 and p99 latency (measured, wall clock per request)
/// and the ratios of (4) against (1), (2) and (3), and writes a Chrome trace
/// (chrome://tracing, Perfetto) of one run of (4).
///
/// Without --processor, the processors the annotations name are used, the
/// first inline and the others as pool workers, processor i pinned to the
/// i-th available core (modulo the core count).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The branched (annotated) model.
    #[command(flatten)]
    pub model: ModelArgs,

    /// The original (unbranched) model the branched one was made from.
    #[arg(long, value_name = "ORIGINAL.onnx")]
    pub original: PathBuf,

    #[command(flatten)]
    pub runtime: RuntimeArgs,

    /// Timed runs per configuration.
    #[arg(long, default_value_t = 50)]
    pub runs: usize,

    /// Untimed runs before timing each configuration.
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,

    /// Run a CPU-burning thread pinned to these cores (`core0`, `0-1`) during
    /// every measurement, to see how each configuration suffers from outside
    /// load (the runtime does not adapt placement yet).
    #[arg(long, value_name = "CORES")]
    pub interference: Option<String>,

    /// Where to write the Chrome trace of one branched run.
    #[arg(long, value_name = "TRACE.json", default_value = "bench-trace.json")]
    pub trace: PathBuf,
}

struct Row {
    name: String,
    ms: Vec<f64>,
}

impl Row {
    fn quantile(&self, q: f64) -> f64 {
        let mut v = self.ms.clone();
        v.sort_by(f64::total_cmp);
        let i = ((v.len() as f64 - 1.0) * q).round() as usize;
        v.get(i).copied().unwrap_or(f64::NAN)
    }
}

fn pinned(name: &str, kind: WorkerKind, core: usize, threads: usize, cores: &CoreSet) -> ProcessorConfig {
    let ids = if threads > 1 {
        cores.ids().to_vec()
    } else {
        vec![cores.ids()[core % cores.len()]]
    };
    ProcessorConfig {
        name: name.to_string(),
        kind,
        cores: CoreSet::new(ids),
        threads,
        engine: EngineKind::Tract,
    }
}

fn time(rt: &Runtime, x: &Tensor, args: &Args, bar: &ProgressBar, name: &str) -> Result<Row> {
    bar.set_message(name.to_string());
    for _ in 0..args.warmup {
        rt.run(vec![x.clone().into_tvalue()])?;
        bar.inc(1);
    }
    let mut ms = Vec::with_capacity(args.runs);
    for _ in 0..args.runs {
        let t = Instant::now();
        rt.run(vec![x.clone().into_tvalue()])?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        bar.inc(1);
    }
    Ok(Row {
        name: name.to_string(),
        ms,
    })
}

fn trace_json(spans: &[Span]) -> serde_json::Value {
    let events: Vec<serde_json::Value> = spans
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.subgraph, "cat": "subgraph", "ph": "X", "pid": 1, "tid": s.processor,
                "ts": s.start_s * 1e6, "dur": (s.end_s - s.start_s) * 1e6,
            })
        })
        .collect();
    serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}

pub fn run(args: Args) -> Result<()> {
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let label = args.model.model.display().to_string();
    let branched = args.model.load()?;
    let original_label = args.original.display().to_string();
    let original = ModelArgs {
        model: args.original.clone(),
        input_shape: args.model.input_shape.clone(),
        random_weights: args.model.random_weights,
    }
    .load()?;
    let cores = affinity::allowed_cores().map_err(anyhow::Error::msg)?;
    let processors = if args.runtime.is_configured() {
        args.runtime.processors(&branched)?
    } else {
        args.runtime
            .processors(&branched)?
            .iter()
            .enumerate()
            .map(|(i, p)| pinned(&p.name, p.kind, i, 1, &cores))
            .collect()
    };
    let one_core: Vec<ProcessorConfig> = processors
        .iter()
        .map(|p| pinned(&p.name, WorkerKind::Inline, 0, 1, &cores))
        .collect();
    let configs = [
        (
            "original, 1 core".to_string(),
            &original,
            vec![pinned("cpu0", WorkerKind::Inline, 0, 1, &cores)],
            &original_label,
        ),
        (
            format!("original, {} intra-op threads", cores.len()),
            &original,
            vec![pinned("cpu0", WorkerKind::Inline, 0, cores.len(), &cores)],
            &original_label,
        ),
        ("branched, 1 core (sequential)".to_string(), &branched, one_core, &label),
        (
            format!("branched, {} processors", processors.len()),
            &branched,
            processors.clone(),
            &label,
        ),
    ];
    let first = original
        .inputs()
        .first()
        .and_then(|i| original.fact(i.out(0)))
        .context("the original has no input")?;
    let x = Tensor::from_shape(&first.shape, &random_values(1, first.volume()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let burner = match &args.interference {
        Some(spec) => {
            let c = CoreSet::from_str(spec.strip_prefix("core").unwrap_or(spec))
                .with_context(|| format!("bad --interference '{spec}'"))?;
            affinity::check(&c).map_err(|e| anyhow::anyhow!("--interference: {e}"))?;
            let stop = stop.clone();
            Some(std::thread::spawn(move || {
                let pinned = affinity::pin_current_thread(&c);
                let mut x = 0u64;
                while pinned.is_ok() && !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
                pinned
            }))
        }
        None => None,
    };
    let total = (configs.len() * (args.runs + args.warmup)) as u64;
    let bar = ProgressBar::new(total).with_style(ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")?);
    let mut rows = Vec::new();
    let mut spans = Vec::new();
    for (name, g, procs, file) in &configs {
        affinity::pin_current_thread(&cores).map_err(anyhow::Error::msg)?;
        let rt = load(g, procs, file)?;
        rows.push(time(&rt, &x, &args, &bar, name)?);
        spans = rt.run_traced(vec![x.clone().into_tvalue()])?.1;
    }
    bar.finish_and_clear();
    stop.store(true, Ordering::Relaxed);
    if let Some(b) = burner {
        b.join()
            .map_err(|_| anyhow::anyhow!("the interference thread panicked"))?
            .map_err(|e| anyhow::anyhow!("--interference: {e}"))?;
    }
    std::fs::write(&args.trace, serde_json::to_string_pretty(&trace_json(&spans))?)
        .with_context(|| format!("cannot write {}", args.trace.display()))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "branched  {label}\noriginal  {original_label}")?;
    writeln!(
        out,
        "engine    tract {TRACT_VERSION}; cores available {cores}; {} timed runs each",
        args.runs
    )?;
    let specs: Vec<String> = processors
        .iter()
        .map(|p| {
            let c = p.cores.as_ref().map(|c| format!(":{c}")).unwrap_or_default();
            format!("{}={:?}{c},threads={}", p.name, p.kind, p.threads)
        })
        .collect();
    writeln!(out, "processors {}", specs.join(" "))?;
    if let Some(c) = &args.interference {
        writeln!(
            out,
            "interference: a CPU-burning thread pinned to {c} ran during every measurement"
        )?;
    }
    writeln!(
        out,
        "{:<34} {:>10} {:>10} {:>10}",
        "configuration (measured)", "p50 ms", "p90 ms", "p99 ms"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:<34} {:>10.3} {:>10.3} {:>10.3}",
            r.name,
            r.quantile(0.5),
            r.quantile(0.9),
            r.quantile(0.99)
        )?;
    }
    let b = rows[3].quantile(0.5);
    for r in &rows[..3] {
        writeln!(
            out,
            "speedup of branched on its processors vs {:<30} {:.2}x (p50)",
            r.name,
            r.quantile(0.5) / b
        )?;
    }
    writeln!(out, "trace     {}", args.trace.display())?;
    Ok(())
}
