//! `stretch fit`: predictors fitted to a profiler run.

use anyhow::{Result, bail};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use predictor::features::Work;
use predictor::fit::analytic::{self, Figures};
use predictor::fit::{KernelRegressors, Sample};
use predictor::forest::SplitMix64;
use predictor::profiler::csv::{self, Row};
use predictor::profiler::space::KernelKind;
use predictor::profiler::timing::Statistic;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Fit latency predictors to the kernels a `stretch profile` run measured.
///
/// Reads DIR/kernels.csv (and DIR/in-model.csv, see --in-model) and fits
/// (1) one random forest per kernel class (conv, dwconv, fc, pool, gap,
/// add, bn, act, concat; nn-Meter features, log targets), written with each class's out-of-fold accuracy to
/// DIR/regressors.json (format stretch.kernel-regressors/1), and (2) the
/// analytic model's figures (effective GFLOP/s, bandwidth, kernel overhead,
/// depthwise efficiency), judged on a seeded held-out 20% of the rows.
///
/// It prints the accuracy of both and a `[processors.NAME]` block for a
/// device profile whose figures cite the CSV; add `regressors = "FILE"` (a
/// path relative to the profile) to make `stretch predict` and every other
/// command use the forests for that processor.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory of a `stretch profile` run (holds kernels.csv).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Where to write the regressors (default DIR/regressors.json).
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// Name of the processor in the printed profile block.
    #[arg(long, default_value = "cpu")]
    pub processor: String,

    /// Seeds the forests, the out-of-fold split and the held-out split.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// How the forests use DIR/in-model.csv (kernels timed inside whole
    /// models, `stretch profile --in-model`) when it exists: `prefer` fits a
    /// class on its in-model rows alone where it has enough of them and on
    /// the isolated ones otherwise, `both` fits on all rows, `ignore` on
    /// the isolated ones. The analytic figures always come from the isolated
    /// rows.
    #[arg(long, value_enum, default_value = "prefer")]
    pub in_model: InModelUse,

    /// Which summary of each row's timed runs the forests and the analytic
    /// figures are fitted to: `median`, or `p10`, the 10th percentile (noise
    /// from the rest of the machine only adds time, so it repeats better
    /// between runs minutes apart; predictions are then of that statistic).
    #[arg(
        long,
        default_value = "median",
        value_parser = PossibleValuesParser::new(["median", "p10"]).try_map(|s| s.parse::<Statistic>())
    )]
    pub statistic: Statistic,
}

/// What `stretch fit` does with kernels timed inside whole models.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum InModelUse {
    Prefer,
    Both,
    Ignore,
}

/// The rows the forests are fitted on, by `choice`.
fn forest_rows(isolated: &[(usize, Row)], in_model: &[(usize, Row)], choice: InModelUse) -> Vec<(usize, Row)> {
    match choice {
        InModelUse::Ignore => isolated.to_vec(),
        InModelUse::Both => isolated.iter().chain(in_model).cloned().collect(),
        InModelUse::Prefer => {
            let mut count: std::collections::HashMap<KernelKind, usize> = std::collections::HashMap::new();
            for (_, r) in in_model {
                *count.entry(r.kind).or_default() += 1;
            }
            let enough = |k: &KernelKind| count.get(k).is_some_and(|n| *n >= predictor::fit::regressors::MIN_ROWS);
            isolated
                .iter()
                .filter(|(_, r)| !enough(&r.kind))
                .chain(in_model.iter().filter(|(_, r)| enough(&r.kind)))
                .cloned()
                .collect()
        }
    }
}

fn sample(r: &Row, statistic: Statistic) -> Sample {
    let names = predictor::features::feature_names(r.kind.op_class());
    let cout = predictor::features::named(names, &r.features, "cout").map_or(0, |v| v as usize);
    let params = predictor::features::named(names, &r.features, "params").map_or(0, |v| v as u64);
    Sample {
        works: vec![(
            Work {
                flops: r.flops,
                params,
                bytes: r.bytes,
                out_channels: cout,
            },
            r.kind == KernelKind::DwConvBnRelu,
        )],
        ms: r.ms(statistic),
    }
}

pub fn run(args: Args) -> Result<()> {
    let csv_path = args.dir.join("kernels.csv");
    if !csv_path.exists() {
        bail!(
            "{}: no such file; run `stretch profile --out {}` first",
            csv_path.display(),
            args.dir.display()
        );
    }
    let rows = csv::read(&csv_path)?.rows;
    let statistic = args.statistic;
    let in_model_path = args.dir.join(super::in_model::FILE);
    let in_model = if in_model_path.exists() && args.in_model != InModelUse::Ignore {
        csv::read(&in_model_path)?.rows
    } else {
        Vec::new()
    };
    let forest_rows = forest_rows(&rows, &in_model, args.in_model);
    let label = if in_model.is_empty() {
        csv_path.display().to_string()
    } else {
        format!(
            "{} + {} ({} in-model rows, --in-model {})",
            csv_path.display(),
            in_model_path.display(),
            in_model.len(),
            format!("{:?}", args.in_model).to_lowercase()
        )
    };
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed} {msg}").unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(format!(
        "fitting forests to {} rows (10-fold out-of-fold check per class)",
        forest_rows.len()
    ));
    bar.enable_steady_tick(Duration::from_millis(200));
    let regressors = KernelRegressors::fit(&forest_rows, &label, args.seed, statistic);
    bar.finish_and_clear();
    let regressors = regressors?;
    let out = args.out.clone().unwrap_or_else(|| args.dir.join("regressors.json"));
    regressors.save(&out)?;

    print_forests(&label, forest_rows.len(), statistic, &regressors, &out);
    fit_analytic(&args, &rows, &label, &csv_path, &out, regressors.precision())
}

/// The forests' out-of-fold accuracy per kernel class.
fn print_forests(label: &str, rows: usize, statistic: Statistic, regressors: &KernelRegressors, out: &Path) {
    println!(
        "{label}: {} rows for the forests ({} of each row's runs), {} {} thread(s) on cores {}",
        rows,
        statistic.name(),
        regressors.engine,
        regressors.threads,
        regressors.cores
    );
    println!("random forests, out-of-fold (each row predicted by a forest fitted without it):");
    println!(
        "{:<8} {:>6} {:>7} {:>7} {:>7} {:>8}",
        "class", "rows", "±5%", "±10%", "±15%", "RMSPE"
    );
    for (class, r) in &regressors.report {
        println!(
            "{:<8} {:>6} {:>6.1}% {:>6.1}% {:>6.1}% {:>7.1}%",
            class,
            r.rows,
            100.0 * r.within_5,
            100.0 * r.within_10,
            100.0 * r.within_15,
            100.0 * r.rmspe
        );
    }
    println!("wrote {}", out.display());
}

/// Fits the analytic model on 80% of the rows, judges it on the rest and
/// prints the profile's processor section with its figures.
fn fit_analytic(
    args: &Args,
    rows: &[(usize, Row)],
    label: &str,
    csv_path: &Path,
    out: &Path,
    precision: predictor::Precision,
) -> Result<()> {
    let statistic = args.statistic;
    let samples: Vec<Sample> = rows
        .iter()
        .filter(|(_, r)| r.ms(statistic) > 0.0)
        .map(|(_, r)| sample(r, statistic))
        .collect();
    let mut rng = SplitMix64::new(args.seed ^ 0x5eed);
    let (mut train, mut test) = (Vec::new(), Vec::new());
    for s in samples {
        if rng.below(5) == 0 { test.push(s) } else { train.push(s) }
    }
    if train.is_empty() || test.is_empty() {
        bail!("{label}: too few rows to fit and judge the analytic model");
    }
    let f: Figures = analytic::fit(&train);
    println!(
        "analytic model on a held-out 20% ({} rows): ±10% {:.1}%, ±15% {:.1}%",
        test.len(),
        100.0 * analytic::accuracy(&test, &f, 0.10),
        100.0 * analytic::accuracy(&test, &f, 0.15)
    );
    let src = match statistic {
        Statistic::Median => format!("fitted: {} by `stretch fit` (seed {})", csv_path.display(), args.seed),
        s => format!(
            "fitted: {} by `stretch fit` (seed {}, {} of each row's runs)",
            csv_path.display(),
            args.seed,
            s.name()
        ),
    };
    if precision != predictor::Precision::Fp32 {
        println!(
            "\n# kernels run at {precision} (engine `{}`): add to [processors.{}] as fitted at fp32",
            rows.first().map(|(_, r)| r.engine.as_str()).unwrap_or(""),
            args.processor
        );
        println!("regressors_at.{precision} = \"{}\"", out.display());
        println!(
            "# and speedup.{precision} = this peak over the fp32 fit's, for kernels no forest covers: {precision} peak_gflops {:.2} ({src})",
            f.gflops
        );
        return Ok(());
    }
    println!("\n[processors.{}]", args.processor);
    println!("kind = \"cpu\"");
    println!("peak_gflops = {{ value = {:.2}, source = \"{src}\" }}", f.gflops);
    println!("efficiency = {{ value = 1.0, source = \"folded into peak_gflops by the fit\" }}");
    println!(
        "bandwidth_gbs = {{ value = {:.2}, source = \"{src}\" }}",
        f.bandwidth_gbs
    );
    println!(
        "kernel_overhead_us = {{ value = {:.2}, source = \"{src}\" }}",
        f.overhead_us
    );
    println!(
        "depthwise_efficiency = {{ value = {:.3}, source = \"{src}\" }}",
        f.depthwise_efficiency
    );
    println!("regressors = \"{}\"", out.display());
    Ok(())
}
