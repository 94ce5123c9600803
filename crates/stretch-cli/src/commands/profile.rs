//! `stretch profile`: measure kernels on an inference engine.

use anyhow::{Context, Result, bail};
use engine::host::{CoreSet, pin_current_thread};
use engine::{Engine, EngineRegistry, TractEngine};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use predictor::profiler::csv::{COLUMNS, Row, Store};
use predictor::profiler::host::{self, Host};
use predictor::profiler::{Event, Profiler, Settings, Summary};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Measure kernel latencies on an inference engine, to fit latency predictors.
///
/// Samples configurations of each kernel class (conv+bn+act, dwconv+bn+act,
/// fc, pool, gap, add+act, bn+act, act, concat) from the shapes ResNet,
/// MobileNet and RegNet layers use plus random ones, builds each as a tiny
/// ONNX model, compiles it once on the engine, runs it --warmup times, then
/// times --reps runs on a thread pinned to --cores. One CSV row per kernel:
/// class, features (as `stretch predict` computes them), FLOPs, bytes,
/// median/p10/p90 milliseconds, reps, engine, threads, cores.
///
/// Then --rounds adaptive rounds (nn-Meter): per class, a random forest is
/// judged out of fold on the rows so far, and configurations predicted more
/// than 10% off get neighbours with cin/cout scaled by 0.75-1.25.
///
/// Rows are appended and flushed as they are measured: run the same command
/// again after an interruption and it measures only what is missing (a row
/// cut off mid-write is dropped and measured again). Writes DIR/kernels.csv
/// and DIR/run.json (engine, versions, cores, host CPU, dates, counts).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Inference engine that runs the kernels.
    #[arg(long, default_value = "tract", value_parser = engine_names())]
    pub engine: String,

    /// Precision the kernels run at: `fp32`, or `int8` / `fp16` with each
    /// kernel rewritten as `stretch quantize` rewrites the nodes of a
    /// processor of that precision (int8: batch norm folded, Q/DQ pairs at
    /// ranges calibrated on the kernel's own inputs, int8 weights per
    /// channel; fp16: half constants, Casts at the edges). The CSV's
    /// `engine` column becomes e.g. `tract/int8`; `stretch fit` on such a
    /// DIR gives regressors a device profile names as
    /// `regressors_at.int8`.
    #[arg(long, default_value = "fp32", value_name = "fp32|fp16|int8")]
    pub precision: predictor::Precision,

    /// Kernel classes to measure, comma-separated (default: all of
    /// conv+bn+act, dwconv+bn+act, fc, pool, gap, add+act, bn+act, act,
    /// concat).
    #[arg(long, value_delimiter = ',', value_name = "CLASS,...", value_parser = parse_class)]
    pub classes: Vec<predictor::profiler::KernelKind>,

    /// Threads one kernel run may use (at most the number of --cores). tract
    /// splits large matrix products over them and keeps small ones on one thread.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,

    /// CPU cores the profiling thread (and the engine's threads) are pinned
    /// to, as a cpulist: `0`, `0,2`, `0-3`. Rows resumed from an earlier run
    /// must have been measured on the same cores.
    #[arg(long, default_value = "0", value_name = "CPULIST")]
    pub cores: String,

    /// Measure the thread hand-off between two cores instead of kernels:
    /// `FROM,TO`. A buffer of 4 KiB to 16 MiB is sent from a thread pinned to
    /// FROM and copied by a thread pinned to TO; writes DIR/link.csv and
    /// prints `latency + bytes / bandwidth` fitted to it, and the piecewise fit
    /// with a break at 1 MiB (Puzzle §4.1) that `stretch analyze` uses, with R² of each.
    #[arg(long, value_name = "FROM,TO", conflicts_with = "fusion")]
    pub link: Option<String>,

    /// Learn the engine's fusion rules instead of measuring kernels: time
    /// conv, dwconv, bn, add and act alone and chained in pairs at HW 28,
    /// Cin 64, Cout 128, k 3 on --cores; a pair is fused when chaining saves
    /// more than half of the cheaper op (nn-Meter). Writes DIR/fusion.csv and
    /// prints the `fusion = [...]` line for a device profile.
    #[arg(long)]
    pub fusion: bool,

    /// Time kernels inside these whole ONNX models instead of alone: each
    /// model runs --warmup times, then --reps times with every node of
    /// tract's plan timed; each node's time goes to the ONNX node it derives
    /// from, summed per kernel of the fusion rules. Appends one row of origin
    /// `in-model` per kernel to DIR/in-model.csv (default 10 reps, 1 warm-up),
    /// which `stretch fit DIR` uses (see its --in-model). Kernels inside a
    /// model find their inputs where the kernel before left them, not hot
    /// from their own previous run: memory-bound ones (adds, pools, small
    /// fully connected layers) take several times their isolated time there.
    #[arg(long, value_name = "MODEL.onnx", num_args = 1.., conflicts_with_all = ["fusion", "link"])]
    pub in_model: Vec<PathBuf>,

    /// Output directory for kernels.csv and run.json; created if missing. An
    /// existing kernels.csv is resumed.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// Configurations per class in the initial round (default 150, --quick 8).
    /// Also the most an adaptive round adds to one class. Raising it on a
    /// resumed run adds samples; the first ones stay the same.
    #[arg(long, value_name = "N")]
    pub samples: Option<usize>,

    /// Adaptive sampling rounds after the initial one (default 1).
    #[arg(long, value_name = "N")]
    pub rounds: Option<u32>,

    /// Timed runs per kernel; the CSV keeps their median, p10 and p90
    /// (default 30, --quick 3).
    #[arg(long, value_name = "N")]
    pub reps: Option<usize>,

    /// Untimed runs per kernel before timing (default 5, --quick 1).
    #[arg(long, value_name = "N")]
    pub warmup: Option<usize>,

    /// Seed of the sampling, weights and inputs; the same seed plans the same
    /// kernels, which is what resuming relies on.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Small preset that runs in seconds (for tests): 4 samples per class, 3
    /// reps, 1 warm-up, kernels of at most 20 MFLOP and 1 MiB. Explicit
    /// --samples/--rounds/--reps/--warmup still apply.
    #[arg(long)]
    pub quick: bool,
}

/// The engines `stretch profile` can measure on: the registry's named
/// engines, each with its summary.
fn engine_names() -> clap::builder::PossibleValuesParser {
    let registry = EngineRegistry::builtin();
    let values: Vec<clap::builder::PossibleValue> = registry
        .named()
        .map(|e| clap::builder::PossibleValue::new(e.name).help(e.summary))
        .collect();
    clap::builder::PossibleValuesParser::new(values)
}

fn parse_class(s: &str) -> Result<predictor::profiler::KernelKind, String> {
    use predictor::profiler::KernelKind;
    KernelKind::ALL
        .into_iter()
        .find(|k| k.name() == s.trim())
        .ok_or_else(|| {
            let names: Vec<&str> = KernelKind::ALL.iter().map(|k| k.name()).collect();
            format!("unknown kernel class `{s}`; the classes are {}", names.join(", "))
        })
}

fn settings(args: &Args) -> Settings {
    let base = if args.quick {
        Settings::quick()
    } else {
        Settings::standard()
    };
    Settings {
        samples: args.samples.unwrap_or(base.samples),
        rounds: args.rounds.unwrap_or(base.rounds),
        reps: args.reps.unwrap_or(base.reps),
        warmup: args.warmup.unwrap_or(base.warmup),
        seed: args.seed,
        kinds: if args.classes.is_empty() {
            base.kinds
        } else {
            args.classes.clone()
        },
        ..base
    }
}

pub fn run(args: Args) -> Result<()> {
    if let Some(link) = &args.link {
        return super::link::run(link, &args.out, args.reps.unwrap_or(200), args.warmup.unwrap_or(20));
    }
    let cores: CoreSet = args.cores.parse()?;
    if args.threads > cores.len() {
        bail!(predictor::profiler::ProfilerError::ThreadsExceedCores {
            threads: args.threads,
            cores: cores.to_string(),
        });
    }
    pin_current_thread(&cores)?;
    if args.precision != predictor::Precision::Fp32 && (args.fusion || !args.in_model.is_empty()) {
        bail!(
            "--precision {} profiles isolated kernels; --fusion and --in-model time fp32 models",
            args.precision
        );
    }
    if !args.in_model.is_empty() {
        if args.engine != "tract" {
            bail!("--in-model times each kernel inside tract's optimised plan; it needs --engine tract");
        }
        return super::in_model::run(
            &TractEngine::new(args.threads)?,
            &cores,
            &args.in_model,
            &args.out,
            args.reps.unwrap_or(10),
            args.warmup.unwrap_or(1),
        );
    }
    let engine = EngineRegistry::builtin().local("profile", &args.engine, args.threads)?;
    let rewritten;
    let engine: &dyn Engine = match quantize::PrecisionEngine::new(engine.as_ref(), args.precision) {
        None => engine.as_ref(),
        Some(e) => {
            rewritten = e;
            &rewritten
        }
    };
    if args.fusion {
        return super::link::run_fusion(engine, &args.out, args.reps.unwrap_or(50), args.warmup.unwrap_or(10));
    }
    let settings = settings(&args);
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let csv = args.out.join("kernels.csv");
    let (mut store, existing) = Store::open(&csv)?;
    if let Some(line) = existing.torn_line {
        eprintln!(
            "note: {}:{line} was cut off by an interrupted run; dropped, it is measured again",
            csv.display()
        );
    }
    let started = host::utc_now();
    let clock = Instant::now();
    let info = RunInfo {
        args: &args,
        engine,
        cores: &cores,
        settings: &settings,
        started: &started,
        earlier: earlier_invocations(&args.out),
    };
    info.write(None, 0.0)?;

    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} kernels, ETA {eta} {wide_msg}")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let profiler = Profiler {
        engine,
        cores: cores.clone(),
        settings: settings.clone(),
    };
    let summary = profiler.run(&mut store, existing, &mut |event| match event {
        Event::Round { round, to_measure, .. } => {
            bar.inc_length(to_measure as u64);
            bar.set_message(format!("round {round}"));
        }
        Event::Measured { config, .. } => {
            bar.inc(1);
            bar.set_message(config.to_string());
        }
        Event::Fitted(_) => {}
    });
    bar.finish_and_clear();
    let summary = summary?;
    info.write(Some(&summary), clock.elapsed().as_secs_f64())?;
    let (_, all) = Store::open(&csv)?;
    let rows: Vec<Row> = all.rows.into_iter().map(|(_, r)| r).collect();
    print_summary(&summary, &rows, &csv, clock.elapsed().as_secs_f64());
    Ok(())
}

struct RunInfo<'a> {
    args: &'a Args,
    engine: &'a dyn Engine,
    cores: &'a CoreSet,
    settings: &'a Settings,
    started: &'a str,
    /// `invocations` of the run.json an earlier run on this DIR left.
    earlier: Vec<serde_json::Value>,
}

/// The invocations an earlier run.json records; one still `running` was interrupted.
fn earlier_invocations(out: &Path) -> Vec<serde_json::Value> {
    let doc = std::fs::read_to_string(out.join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let mut list = doc
        .as_ref()
        .and_then(|d| d.get("invocations")?.as_array().cloned())
        .unwrap_or_default();
    for inv in &mut list {
        if inv["status"] == "running" {
            inv["status"] = "interrupted".into();
        }
    }
    list
}

impl RunInfo<'_> {
    /// Writes run.json: `status` is `running` until a summary is given.
    /// `invocations` lists every run on this DIR, earlier ones first.
    fn write(&self, summary: Option<&Summary>, seconds: f64) -> Result<()> {
        let status = if summary.is_some() { "complete" } else { "running" };
        let finished = summary.map(|_| host::utc_now());
        let mut invocations = self.earlier.clone();
        invocations.push(serde_json::json!({
            "status": status,
            "started": self.started,
            "finished": finished,
            "duration_s": summary.map(|_| seconds),
            "measured": summary.map(|s| s.measured),
            "resumed": summary.map(|s| s.resumed),
        }));
        let doc = serde_json::json!({
            "schema": "stretch.profile-run/1",
            "status": status,
            "csv": "kernels.csv",
            "columns": COLUMNS,
            "engine": {
                "name": self.engine.name(),
                "version": self.engine.version(),
                "threads": self.engine.threads(),
            },
            "cores": self.cores.to_string(),
            "host": Host::detect(),
            "stretch_version": env!("CARGO_PKG_VERSION"),
            "started": self.started,
            "finished": finished,
            "duration_s": summary.map(|_| seconds),
            "preset": if self.args.quick { "quick" } else { "standard" },
            "settings": self.settings,
            "summary": summary,
            "invocations": invocations,
        });
        let path = self.args.out.join("run.json");
        std::fs::write(&path, format!("{}\n", serde_json::to_string_pretty(&doc)?))
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

fn print_summary(summary: &Summary, rows: &[Row], csv: &Path, seconds: f64) {
    let mut table = vec![
        [
            "class",
            "rows",
            "measured",
            "resumed",
            "min ms",
            "median ms",
            "max ms",
            "median spread",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for (class, counts) in &summary.classes {
        let of: Vec<&Row> = rows.iter().filter(|r| r.kind.name() == class).collect();
        let ms: Vec<f64> = of.iter().map(|r| r.median_ms).collect();
        let spread: Vec<f64> = of
            .iter()
            .filter(|r| r.median_ms > 0.0)
            .map(|r| (r.p90_ms - r.p10_ms) / r.median_ms)
            .collect();
        table.push(vec![
            class.clone(),
            counts.rows.to_string(),
            counts.measured.to_string(),
            counts.resumed.to_string(),
            format!("{:.4}", ms.iter().copied().fold(f64::INFINITY, f64::min)),
            format!("{:.4}", graph_ir::stats::median_nan(&ms.clone())),
            format!("{:.4}", ms.iter().copied().fold(0.0, f64::max)),
            format!("{:.1}%", 100.0 * graph_ir::stats::median_nan(&spread)),
        ]);
    }
    print!("{}", crate::format::table(&table, 1));
    for r in &summary.adaptive {
        if r.fitted_rows == 0 {
            println!("round {} {}: too few rows to fit, nothing added", r.round, r.class);
        } else {
            println!(
                "round {} {}: {}/{} rows predicted within 10% out of fold; {} neighbours of the {} others added",
                r.round, r.class, r.within_threshold, r.fitted_rows, r.added, r.badly_predicted
            );
        }
    }
    println!(
        "{} kernels measured, {} already in {} ({:.1} s; spread = (p90 - p10) / median)",
        summary.measured,
        summary.resumed,
        csv.display(),
        seconds
    );
}
