//! `stretch bench`: a branched model on its processors against its original.

use super::bench_ideal;
use super::bench_report::{Adaptive, Configuration, Ideal, Report, Speedup, SubgraphTimes, Weights, Work};
use super::bench_timing::{Rounds, SETTLE_AFTER_SPINNING, recover, time_interleaved};
use crate::chrome_trace;
use crate::interference::Interference;
use crate::model_args::ModelArgs;
use crate::runtime_args::{RuntimeArgs, load_adaptive};
use anyhow::{Context, Result, bail};
use graph_ir::Graph;
use predictor::profiler::CoreSet;
use scheduler_rt::npy::random_values;
use scheduler_rt::{AdaptiveParams, EngineKind, ProcessorConfig, Spin, WorkerKind, affinity, make_engine};
use std::io::Write;
use std::path::PathBuf;
use tract_onnx::prelude::{IntoTValue, Tensor};

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

/// One measured configuration.
struct Config<'g> {
    name: String,
    graph: &'g Graph,
    processors: Vec<ProcessorConfig>,
    label: &'g str,
    adaptive: Option<AdaptiveParams>,
}

struct Row {
    name: String,
    ms: Vec<f64>,
}

impl Row {
    fn quantile(&self, q: f64) -> f64 {
        graph_ir::stats::quantile_nan(&self.ms, q)
    }
}

fn pinned(name: &str, kind: WorkerKind, core: usize, threads: usize, cores: &CoreSet) -> ProcessorConfig {
    let ids = if threads > 1 {
        cores.ids().to_vec()
    } else {
        vec![cores.ids()[core % cores.len()]]
    };
    ProcessorConfig {
        cores: CoreSet::new(ids),
        threads,
        ..ProcessorConfig::new(name, kind)
    }
}

/// The onnxruntime reference configuration, or why there is none.
fn ort_reference(cores: &CoreSet) -> std::result::Result<ProcessorConfig, String> {
    if !EngineKind::available().contains(&EngineKind::Ort) {
        return Err("not built (stretch-cli feature `ort`)".into());
    }
    let mut p = pinned("cpu0", WorkerKind::Inline, 0, 2, cores);
    p.engine = EngineKind::Ort;
    p.spin = Spin::On;
    make_engine(&p).map(|_| p).map_err(|e| e.to_string())
}

/// The process's resident set (`VmRSS` of `/proc/self/status`) in bytes,
/// after handing freed heap pages back to the system, so that a load that
/// follows is not hidden by reusing pages an earlier one freed.
fn resident_bytes() -> Option<u64> {
    // SAFETY: malloc_trim only returns free heap memory to the system.
    unsafe { libc::malloc_trim(0) };
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| {
        let kb: u64 = l
            .strip_prefix("VmRSS:")?
            .trim()
            .strip_suffix("kB")?
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    })
}

/// Bytes of every constant tensor in `g`.
fn weight_bytes(g: &Graph) -> u64 {
    g.node_ids()
        .iter()
        .filter_map(|id| g.const_tensor(id.out(0)))
        .map(|t| t.fact().bytes() as u64)
        .sum()
}

pub fn run(args: Args) -> Result<()> {
    scheduler_rt::pool::pool().set_enabled(args.tensor_pool == "on");
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
    let adaptive = match args.runtime.adaptive()? {
        Some(p) => Some(p),
        None => args.interference.as_ref().map(|_| AdaptiveParams::default()),
    };
    let one_core: Vec<ProcessorConfig> = processors
        .iter()
        .map(|p| ProcessorConfig {
            engine: p.engine,
            ..pinned(&p.name, WorkerKind::Inline, 0, 1, &cores)
        })
        .collect();
    let n = processors.len();
    let config = |name: String, graph, processors, label| Config {
        name,
        graph,
        processors,
        label,
        adaptive: None,
    };
    let mut configs = vec![
        config(
            "original, 1 core".into(),
            &original,
            vec![pinned("cpu0", WorkerKind::Inline, 0, 1, &cores)],
            &original_label,
        ),
        config(
            format!("original, {} intra-op threads", cores.len()),
            &original,
            vec![pinned("cpu0", WorkerKind::Inline, 0, cores.len(), &cores)],
            &original_label,
        ),
    ];
    let reference = ort_reference(&cores);
    let ort_row = reference.as_ref().ok().map(|p| {
        configs.push(config(
            "original, onnxruntime 2 threads".into(),
            &original,
            vec![p.clone()],
            &original_label,
        ));
        configs.len() - 1
    });
    configs.push(config(
        "branched, 1 core (sequential)".into(),
        &branched,
        one_core.clone(),
        &label,
    ));
    let sequential = configs.len() - 1;
    let main = configs.len();
    configs.push(config(
        format!("branched, {n} processors"),
        &branched,
        processors.clone(),
        &label,
    ));
    let mut ideal_pairs = vec![(sequential, main)];
    for engine in EngineKind::available() {
        if processors.iter().all(|p| p.engine == engine) || (engine == EngineKind::Ort && reference.is_err()) {
            continue;
        }
        let on: Vec<ProcessorConfig> = processors
            .iter()
            .map(|p| ProcessorConfig { engine, ..p.clone() })
            .collect();
        let seq: Vec<ProcessorConfig> = one_core
            .iter()
            .map(|p| ProcessorConfig { engine, ..p.clone() })
            .collect();
        configs.push(config(
            format!("branched, 1 core (sequential), {}", engine.as_str()),
            &branched,
            seq,
            &label,
        ));
        configs.push(config(
            format!("branched, {n} processors, {}", engine.as_str()),
            &branched,
            on,
            &label,
        ));
        ideal_pairs.push((configs.len() - 2, configs.len() - 1));
    }
    let adaptive_row = adaptive.as_ref().map(|params| {
        configs.push(Config {
            adaptive: Some(params.clone()),
            ..config(
                format!("branched, {n} processors, adaptive"),
                &branched,
                processors.clone(),
                &label,
            )
        });
        configs.len() - 1
    });
    let first = original
        .inputs()
        .first()
        .and_then(|i| original.fact(i.out(0)))
        .context("the original has no input")?;
    let x = Tensor::from_shape(&first.shape, &random_values(1, first.volume()))?;
    let load = args.interference.as_deref().map(Interference::start).transpose()?;
    let mut engines = Vec::new();
    let mut runtimes = Vec::with_capacity(configs.len());
    let mut loaded_bytes = Vec::with_capacity(configs.len());
    for c in &configs {
        affinity::pin_current_thread(&cores).map_err(anyhow::Error::msg)?;
        let before = resident_bytes();
        let rt = load_adaptive(c.graph, &c.processors, c.adaptive.clone(), c.label)?;
        loaded_bytes.push(before.zip(resident_bytes()).map(|(b, a)| a.saturating_sub(b)));
        for (_, e, v) in rt.engines() {
            let e = format!("{e} {v}");
            if !engines.contains(&e) {
                engines.push(e);
            }
        }
        runtimes.push((c.name.as_str(), rt, c.processors.iter().any(|p| p.spin == Spin::On)));
    }
    let mut keep: Vec<usize> = ideal_pairs.iter().flat_map(|p| [p.0, p.1]).collect();
    keep.extend(adaptive_row);
    let meter = predictor::profiler::steal::Meter::start();
    let (times, mut traces) = time_interleaved(
        &runtimes,
        &x,
        Rounds {
            runs: args.runs,
            warmup: args.warmup,
            block: args.block,
        },
        &cores,
        load.as_ref(),
        &keep,
    )?;
    let stolen = meter.and_then(|m| m.read());
    let mut adaptive_runs = adaptive_row.map_or(Vec::new(), |a| std::mem::take(&mut traces[a]));
    let rows: Vec<Row> = configs
        .iter()
        .zip(times)
        .map(|(c, ms)| Row {
            name: c.name.clone(),
            ms,
        })
        .collect();
    affinity::pin_current_thread(&cores).map_err(anyhow::Error::msg)?;
    let trace = runtimes[main].1.run_traced(vec![x.clone().into_tvalue()])?.1;
    if let Some(a) = adaptive_row {
        let end = adaptive_runs
            .last()
            .map_or(0.0, |(t, tr)| t + tr.spans.iter().map(|s| s.end_s).fold(0.0, f64::max));
        let limit = 20.0 * configs[a].adaptive.as_ref().map_or(0.2, |p| p.probe_ms / 1e3);
        let recovered = recover(&runtimes[a].1, &x, end, limit)?;
        adaptive_runs.extend(recovered);
    }
    if let Some(l) = load {
        l.finish()?;
    }
    let mut events = chrome_trace::events(&trace, 1, &format!("one run, {n} processors"), 0.0);
    for (offset, t) in &adaptive_runs {
        events.extend(chrome_trace::events(t, 2, "adaptive runs (load, then none)", *offset));
    }
    std::fs::write(
        &args.trace,
        serde_json::to_string_pretty(&chrome_trace::document(events))?,
    )
    .with_context(|| format!("cannot write {}", args.trace.display()))?;
    let gantt = args.gantt.clone().unwrap_or_else(|| args.trace.with_extension("png"));
    let names: Vec<String> = processors.iter().map(|p| p.name.clone()).collect();
    crate::gantt::write_png(&gantt, &format!("{label}: one run on {n} processors"), &names, &trace)?;
    let (macs_b, macs_o) = (branched.total_cost().macs, original.total_cost().macs);
    let (w_orig, w_branched) = (weight_bytes(&original), weight_bytes(&branched));
    let (b, b_min) = (rows[main].quantile(0.5), rows[main].quantile(0.0));
    let configurations = configs
        .iter()
        .zip(&rows)
        .enumerate()
        .map(|(i, (c, r))| {
            let weights = if std::ptr::eq(c.graph, &original) {
                w_orig
            } else {
                w_branched
            };
            Configuration {
                name: r.name.clone(),
                min_ms: r.quantile(0.0),
                p50_ms: r.quantile(0.5),
                p90_ms: r.quantile(0.9),
                p99_ms: r.quantile(0.99),
                loaded_bytes: loaded_bytes[i],
                loaded_over_weights: loaded_bytes[i].map(|l| l as f64 / weights.max(1) as f64),
                compiled_subgraph_copies: runtimes[i].1.compiled_copies(),
            }
        })
        .collect();
    let speedups = rows
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != main && Some(*i) != adaptive_row)
        .map(|(i, r)| Speedup {
            versus: r.name.clone(),
            reference: Some(i) == ort_row,
            p50: r.quantile(0.5) / b,
            min: r.quantile(0.0) / b_min,
        })
        .collect();
    let adaptive = adaptive_row.map(|a| {
        let (ad, fixed) = (&rows[a], &rows[main]);
        let reference = ort_row.map_or(&rows[1], |o| &rows[o]);
        let moves: Vec<String> = adaptive_runs
            .iter()
            .flat_map(|(_, t)| t.moves.iter().map(|m| m.to_string()))
            .collect();
        Adaptive {
            p50_ms: ad.quantile(0.5),
            p99_ms: ad.quantile(0.99),
            fixed_p50_ms: fixed.quantile(0.5),
            fixed_p99_ms: fixed.quantile(0.99),
            reference: reference.name.clone(),
            reference_p50_ms: reference.quantile(0.5),
            reference_p99_ms: reference.quantile(0.99),
            runs: adaptive_runs.len(),
            moves: moves.len(),
            moves_off_slow: moves.iter().filter(|m| m.ends_with("(slow)")).count(),
            moves_back: moves.iter().filter(|m| m.ends_with("(back)")).count(),
            first_move: moves.first().cloned(),
        }
    });
    let ideals = ideal_pairs
        .iter()
        .filter_map(|&(seq, on)| {
            let partition = runtimes[on].1.partition();
            let alone = bench_ideal::medians(traces[seq].iter().map(|(_, t)| t));
            let beside = bench_ideal::medians(traces[on].iter().map(|(_, t)| t));
            let ideal = bench_ideal::ideal_ms(partition, &alone)?;
            let in_run = bench_ideal::ideal_ms(partition, &beside)?;
            let runs_ideal = bench_ideal::runs_ideal_ms(partition, traces[on].iter().map(|(_, t)| t))?;
            let p50 = rows[on].quantile(0.5);
            Some(Ideal {
                configuration: rows[on].name.clone(),
                sequential: rows[seq].name.clone(),
                ideal_ms: ideal,
                p50_ms: p50,
                p50_over_ideal: p50 / ideal,
                in_run_ideal_ms: in_run,
                beside_over_alone: in_run / ideal,
                runs_ideal_ms: runs_ideal,
                spread_over_medians: runs_ideal / in_run,
                p50_over_runs_ideal: p50 / runs_ideal,
                subgraphs: partition
                    .subgraphs
                    .iter()
                    .map(|s| SubgraphTimes {
                        subgraph: s.name.clone(),
                        processor: s.processor.clone(),
                        sequential_ms: alone[&s.name],
                        in_run_ms: beside[&s.name],
                    })
                    .collect(),
                reference_over_p50: ort_row.map(|o| rows[o].quantile(0.5) / p50),
            })
        })
        .collect();
    let report = Report {
        schema: "stretch.bench/1",
        branched: label.clone(),
        original: original_label.clone(),
        engines,
        cores: cores.to_string(),
        runs: args.runs,
        block: args.block,
        processors: processors.iter().map(ProcessorConfig::spec).collect(),
        work: Work {
            branched_macs: macs_b,
            original_macs: macs_o,
            ratio: macs_b as f64 / macs_o.max(1) as f64,
        },
        reference: reference.as_ref().ok().map(ProcessorConfig::spec),
        reference_skipped: reference.err(),
        settle_after_spinning_ms: SETTLE_AFTER_SPINNING.as_secs_f64() * 1e3,
        interference: args.interference.clone(),
        configurations,
        speedups,
        ideals,
        steal: stolen,
        adaptive,
        weights: Weights {
            original_bytes: w_orig,
            branched_bytes: w_branched,
        },
        trace: args.trace.display().to_string(),
        gantt: gantt.display().to_string(),
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        report.write_text(&mut out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Row;

    /// `stretch bench`'s min/p50/p90/p99 are the one rule's, pinned on
    /// {15, 20, 35, 40, 50} ms: p50 35, p90 46, p99 49.6 (a rounded-index
    /// rule would read 50 for both).
    #[test]
    fn bench_rows_use_the_one_percentile_rule() {
        let r = Row {
            name: "x".into(),
            ms: vec![50.0, 15.0, 40.0, 20.0, 35.0],
        };
        assert_eq!(r.quantile(0.0), 15.0);
        assert!((r.quantile(0.5) - 35.0).abs() < 1e-9);
        assert!((r.quantile(0.9) - 46.0).abs() < 1e-9);
        assert!((r.quantile(0.99) - 49.6).abs() < 1e-9);
    }
}
