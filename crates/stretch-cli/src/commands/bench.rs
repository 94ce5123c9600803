//! `stretch bench`: a branched model on its processors against its original.

use crate::model_args::ModelArgs;
use crate::runtime_args::{RuntimeArgs, load};
use anyhow::{Context, Result, bail};
use graph_ir::Graph;
use indicatif::{ProgressBar, ProgressStyle};
use predictor::profiler::CoreSet;
use scheduler_rt::npy::random_values;
use scheduler_rt::{EngineKind, ProcessorConfig, Runtime, Trace, WorkerKind, affinity, make_engine};
use std::io::Write;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tract_onnx::prelude::{IntoTValue, Tensor};

/// Measure a branched model on its processors against the original model.
///
/// In one run, on the same random input: (1) the original on one core,
/// (2) the original with one intra-op thread per available core, (3) the
/// original in onnxruntime with 2 intra-op threads (the outside reference;
/// needs the `ort` feature and libonnxruntime.so, else skipped with the
/// reason), (4) the branched model with every processor inline on one core
/// (branches one after the other), (5) the branched model on its processors,
/// (6) the same with every processor on each other engine this build has.
/// (1), (2), (4) and (5) use tract unless the configuration names another
/// engine (versions printed). Prints median, p90 and p99 latency (measured,
/// wall clock per request), the ratios of (5) against the others, and
/// writes a Chrome trace (chrome://tracing, Perfetto) and a Gantt chart
/// (PNG) of one run of (5).
///
/// Without --processor or --runtime-config, the processors the annotations
/// name are used, the first inline and the others as pool workers,
/// processor i pinned to the i-th available core (modulo the core count).
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

    /// Where to write the Gantt chart (PNG) of the traced run: a row per
    /// processor, a bar per subgraph, waits at meeting points in grey.
    /// Default: the trace's path with the extension `.png`.
    #[arg(long, value_name = "GANTT.png")]
    pub gantt: Option<PathBuf>,
}

/// One measured configuration.
struct Config<'g> {
    name: String,
    graph: &'g Graph,
    processors: Vec<ProcessorConfig>,
    label: &'g str,
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

/// Chrome trace events: a complete event per subgraph run (thread = its
/// processor, `args.processor` too) and an instant event per move.
fn trace_json(trace: &Trace) -> serde_json::Value {
    let mut events: Vec<serde_json::Value> = trace
        .spans
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.subgraph, "cat": "subgraph", "ph": "X", "pid": 1, "tid": s.processor,
                "ts": s.start_s * 1e6, "dur": (s.end_s - s.start_s) * 1e6,
                "args": { "processor": s.processor, "meeting_point": s.meeting_point },
            })
        })
        .collect();
    events.extend(trace.moves.iter().map(|m| {
        serde_json::json!({
            "name": m.to_string(), "cat": "adaptation", "ph": "i", "s": "g", "pid": 1, "tid": m.to,
            "ts": m.at_s * 1e6,
            "args": { "subgraph": m.subgraph, "from": m.from, "to": m.to, "reason": m.reason },
        })
    }));
    serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}

/// The onnxruntime reference configuration, or why there is none.
fn ort_reference(cores: &CoreSet) -> std::result::Result<ProcessorConfig, String> {
    if !EngineKind::available().contains(&EngineKind::Ort) {
        return Err("not built (stretch-cli feature `ort`)".into());
    }
    let mut p = pinned("cpu0", WorkerKind::Inline, 0, 2, cores);
    p.engine = EngineKind::Ort;
    make_engine(&p).map(|_| p).map_err(|e| e.to_string())
}

/// Starts a thread burning CPU on the cores `spec` names until `stop` is set.
fn interference(spec: &str, stop: Arc<AtomicBool>) -> Result<std::thread::JoinHandle<Result<(), String>>> {
    let c = CoreSet::from_str(spec.strip_prefix("core").unwrap_or(spec))
        .with_context(|| format!("bad --interference '{spec}'"))?;
    affinity::check(&c).map_err(|e| anyhow::anyhow!("--interference: {e}"))?;
    Ok(std::thread::spawn(move || {
        let pinned = affinity::pin_current_thread(&c);
        let mut x = 0u64;
        while pinned.is_ok() && !stop.load(Ordering::Relaxed) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        pinned
    }))
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
    let processors: Vec<ProcessorConfig> = if args.runtime.is_configured() {
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
    let n = processors.len();
    let mut configs = vec![
        Config {
            name: "original, 1 core".into(),
            graph: &original,
            processors: vec![pinned("cpu0", WorkerKind::Inline, 0, 1, &cores)],
            label: &original_label,
        },
        Config {
            name: format!("original, {} intra-op threads", cores.len()),
            graph: &original,
            processors: vec![pinned("cpu0", WorkerKind::Inline, 0, cores.len(), &cores)],
            label: &original_label,
        },
    ];
    let reference = ort_reference(&cores);
    let ort_row = reference.as_ref().ok().map(|p| {
        configs.push(Config {
            name: "original, onnxruntime 2 threads".into(),
            graph: &original,
            processors: vec![p.clone()],
            label: &original_label,
        });
        configs.len() - 1
    });
    configs.push(Config {
        name: "branched, 1 core (sequential)".into(),
        graph: &branched,
        processors: one_core,
        label: &label,
    });
    let main = configs.len();
    configs.push(Config {
        name: format!("branched, {n} processors"),
        graph: &branched,
        processors: processors.clone(),
        label: &label,
    });
    for engine in EngineKind::available() {
        if processors.iter().all(|p| p.engine == engine) || (engine == EngineKind::Ort && reference.is_err()) {
            continue;
        }
        let on: Vec<ProcessorConfig> = processors
            .iter()
            .map(|p| ProcessorConfig { engine, ..p.clone() })
            .collect();
        configs.push(Config {
            name: format!("branched, {n} processors, {}", engine.as_str()),
            graph: &branched,
            processors: on,
            label: &label,
        });
    }
    let first = original
        .inputs()
        .first()
        .and_then(|i| original.fact(i.out(0)))
        .context("the original has no input")?;
    let x = Tensor::from_shape(&first.shape, &random_values(1, first.volume()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let burner = args
        .interference
        .as_deref()
        .map(|spec| interference(spec, stop.clone()))
        .transpose()?;
    let total = (configs.len() * (args.runs + args.warmup)) as u64;
    let bar = ProgressBar::new(total).with_style(ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")?);
    let mut rows = Vec::new();
    let mut trace = Trace::default();
    let mut engines = Vec::new();
    for (i, c) in configs.iter().enumerate() {
        affinity::pin_current_thread(&cores).map_err(anyhow::Error::msg)?;
        let rt = load(c.graph, &c.processors, c.label)?;
        for (_, e, v) in rt.engines() {
            let e = format!("{e} {v}");
            if !engines.contains(&e) {
                engines.push(e);
            }
        }
        rows.push(time(&rt, &x, &args, &bar, &c.name)?);
        if i == main {
            trace = rt.run_traced(vec![x.clone().into_tvalue()])?.1;
        }
    }
    bar.finish_and_clear();
    stop.store(true, Ordering::Relaxed);
    if let Some(b) = burner {
        b.join()
            .map_err(|_| anyhow::anyhow!("the interference thread panicked"))?
            .map_err(|e| anyhow::anyhow!("--interference: {e}"))?;
    }
    std::fs::write(&args.trace, serde_json::to_string_pretty(&trace_json(&trace))?)
        .with_context(|| format!("cannot write {}", args.trace.display()))?;
    let gantt = args.gantt.clone().unwrap_or_else(|| args.trace.with_extension("png"));
    let names: Vec<String> = processors.iter().map(|p| p.name.clone()).collect();
    crate::gantt::write_png(&gantt, &format!("{label}: one run on {n} processors"), &names, &trace)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "branched  {label}\noriginal  {original_label}")?;
    writeln!(
        out,
        "engines   {}; cores available {cores}; {} timed runs each",
        engines.join(", "),
        args.runs
    )?;
    let specs: Vec<String> = processors.iter().map(ProcessorConfig::spec).collect();
    writeln!(out, "processors {}", specs.join(" "))?;
    if let Err(reason) = &reference {
        writeln!(out, "onnxruntime reference: skipped: {reason}")?;
    }
    if let Some(c) = &args.interference {
        writeln!(
            out,
            "interference: a CPU-burning thread pinned to {c} ran during every measurement"
        )?;
    }
    writeln!(
        out,
        "{:<40} {:>10} {:>10} {:>10}",
        "configuration (measured)", "p50 ms", "p90 ms", "p99 ms"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:<40} {:>10.3} {:>10.3} {:>10.3}",
            r.name,
            r.quantile(0.5),
            r.quantile(0.9),
            r.quantile(0.99)
        )?;
    }
    let b = rows[main].quantile(0.5);
    for (i, r) in rows.iter().enumerate().filter(|(i, _)| *i != main) {
        let what = if Some(i) == ort_row {
            "speedup of branched vs the onnxruntime reference"
        } else {
            "speedup of branched on its processors vs"
        };
        let name = if Some(i) == ort_row {
            format!("(original, 2 threads, p50 {:.3} ms)", r.quantile(0.5))
        } else {
            r.name.clone()
        };
        writeln!(out, "{what} {name:<30} {:.2}x (p50)", r.quantile(0.5) / b)?;
    }
    writeln!(out, "trace     {}", args.trace.display())?;
    writeln!(out, "gantt     {}", gantt.display())?;
    Ok(())
}
