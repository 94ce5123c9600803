//! `stretch bench`: a branched model on its processors against its original.

use crate::chrome_trace;
use crate::model_args::ModelArgs;
use crate::runtime_args::RuntimeArgs;
use anyhow::{Context, Result, bail};
use engine::host;
use scheduler_rt::bench::{self, Measured, Models, measure::Options};
use scheduler_rt::timing::interleave::Rounds;
use scheduler_rt::{AdaptiveParams, ProcessorConfig};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Measure a branched model on its processors against the original model.
///
/// In one run, on the same random input: (1) the original on one core,
/// (2) the original with one intra-op thread per available core, (3) the
/// original in onnxruntime with 2 intra-op threads and its other session
/// defaults, spinning threads included (the outside reference, as a user
/// runs it; every block of it is followed by a 100 ms pause, for its
/// threads to stop spinning; needs the `ort` feature and libonnxruntime.so,
/// else skipped with the reason), (4) the branched model with every
/// processor inline on one core (branches one after the other), (5) the
/// branched model on its processors, (6) the same with every processor on
/// each other engine this build has.
/// (1), (2), (4) and (5) use tract unless the configuration names another
/// engine (versions printed). After a warm-up of each, the configurations
/// are timed interleaved: every round runs each of them for a short block
/// (--block), so a change in the machine's speed during the benchmark
/// (other tenants, clock frequency) falls on all of them alike. Prints the
/// minimum, median, p90 and p99 latency (measured, wall clock per request),
/// the ratios of (5) against the others at the median and at the minimum
/// (the least disturbed by other tenants on a shared machine), and writes a
/// Chrome trace (chrome://tracing, Perfetto) and a Gantt chart
/// (PNG) of one run of (5).
///
/// Per engine, (5) or (6) against its ideal (the `ideal` line): each
/// subgraph's median in the sequential runs (4) laid on its processor as
/// soon as its inputs exist. The `in-run` line splits the distance in
/// three: the subgraphs beside each other (their medians in the parallel
/// runs, laid the same way, over the ideal), their spread (the median of
/// each parallel run laid with its own times, over that) and the runtime
/// between them (the measured median over the last).
///
/// With --interference CORES (or --adaptive, or an [adaptive] table in the
/// runtime configuration), (7) the branched model on its processors with
/// the adaptive runtime is measured too: a subgraph slow on its processor
/// for a few runs moves to the processor that finishes it first and moves
/// back when the load is gone (paper §7.4). The load runs during every
/// timed run and never during warm-up, so the adaptive runtime learns
/// unloaded latencies first; after (7)'s timed runs the load stops and
/// (7) keeps running, untimed, until its moved subgraphs are back. Its p50
/// and p99 are printed beside (5) and (2)/(3), and the Chrome trace holds
/// every run of (7) as a second process, with an instant event per move.
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

    /// Timed runs of one configuration in a row within each round of the
    /// interleaved measurement; each such block starts with one untimed run,
    /// so that thread pools still spinning after the previous configuration
    /// (onnxruntime's, the intra-op executor's) and its cache contents do not
    /// count against this one.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub block: usize,

    /// Run a CPU-burning thread pinned to these cores (`core0`, `0-1`) during
    /// every timed run (not during warm-up), to see how each configuration
    /// suffers from outside load and how the adaptive runtime copes.
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

    /// Print every figure as JSON (schema `stretch.bench/1`: configurations
    /// with min/p50/p90/p99 ms and loaded memory, speedups of the branched
    /// model against each, work ratio, engines, adaptive figures) instead
    /// of the text report.
    #[arg(long)]
    pub json: bool,

    /// The tensor pool: `on` hands subgraph inputs to onnxruntime in place
    /// and reuses output tensors across runs; `off` copies every input into
    /// a fresh buffer and every output into a fresh tensor (only the
    /// onnxruntime engine crosses a copying boundary).
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = ["on", "off"])]
    pub tensor_pool: String,
}

pub fn run(args: Args) -> Result<()> {
    engine::pool::pool().set_enabled(args.tensor_pool == "on");
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if args.block == 0 {
        bail!("--block must be at least 1");
    }
    let label = args.model.model.display().to_string();
    let branched = args.model.load_runnable()?;
    let original_label = args.original.display().to_string();
    let original = ModelArgs {
        model: args.original.clone(),
        input_shape: args.model.input_shape.clone(),
        random_weights: args.model.random_weights,
    }
    .load_runnable()?;
    if let (Some(want), Some(have)) = (
        branched.metadata.get(graph_ir::keys::ORIGINAL_FINGERPRINT),
        original.fingerprint(),
    ) && *want != have
    {
        bail!(
            "--original {original_label} is not the model {label} was branched from \
             (its structure fingerprint is {have}; {label} records {want})"
        );
    }
    let cores = host::allowed_cores()?;
    let processors: Vec<ProcessorConfig> = if args.runtime.is_configured() {
        args.runtime.processors(&branched)?
    } else {
        let named = args.runtime.processors(&branched)?;
        let pin = |(i, p): (usize, &ProcessorConfig)| bench::pinned(&p.name, p.kind, i, 1, &cores);
        named.iter().enumerate().map(pin).collect()
    };
    let adaptive = match args.runtime.adaptive()? {
        Some(p) => Some(p),
        None => args.interference.as_ref().map(|_| AdaptiveParams::default()),
    };
    let models = Models {
        branched: &branched,
        branched_label: &label,
        original: &original,
        original_label: &original_label,
    };
    let configs = bench::configurations(&models, processors, adaptive, &cores);
    let options = Options {
        rounds: Rounds {
            runs: args.runs,
            warmup: args.warmup,
            block: args.block,
        },
        interference: args.interference.as_deref(),
        engines: scheduler_rt::factory(multi_dnn::splash::cloud::engines()),
    };
    let bar = crate::progress::Runs(crate::progress::bar(0, "{bar:40} {pos}/{len} {msg}"));
    let measured = bench::measure(&models, &configs, &options, &cores, &bar);
    bar.0.finish_and_clear();
    let mut m = measured?;
    let gantt = args.gantt.clone().unwrap_or_else(|| args.trace.with_extension("png"));
    write_traces(&m, &configs.processors, &label, &args.trace, &gantt)?;
    m.report.trace = args.trace.display().to_string();
    m.report.gantt = gantt.display().to_string();
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&m.report)?)?;
    } else {
        m.report.write_text(&mut out)?;
    }
    Ok(())
}

/// Writes the Chrome trace (one run on the processors, then every adaptive
/// run) and the Gantt chart of the one run.
fn write_traces(m: &Measured, processors: &[ProcessorConfig], label: &str, trace: &Path, gantt: &Path) -> Result<()> {
    let n = processors.len();
    let mut events = chrome_trace::events(&m.trace, 1, &format!("one run, {n} processors"), 0.0);
    for (offset, t) in &m.adaptive_runs {
        events.extend(chrome_trace::events(t, 2, "adaptive runs (load, then none)", *offset));
    }
    std::fs::write(trace, serde_json::to_string_pretty(&chrome_trace::document(events))?)
        .with_context(|| format!("cannot write {}", trace.display()))?;
    let names: Vec<String> = processors.iter().map(|p| p.name.clone()).collect();
    crate::gantt::write_png(gantt, &format!("{label}: one run on {n} processors"), &names, &m.trace)
}
