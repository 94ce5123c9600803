//! `stretch plan`: search a branching plan for a model on a device.

use crate::model_args::ModelArgs;
use crate::plan_text::{describe, precision_lines};
use anyhow::{Context, Result, bail};
use branching::plan::{Merge, Plan, Settings};
use branching::search;
use predictor::{DeviceModel, LatencyModel};
use scheduler_rt::timing::plan_model::MeasuredModel;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

/// Search how to branch a model's stages across a device's processors
/// (NN-Stretch §4).
///
/// For each stage: if the communication a meeting point costs is at most
/// --alpha x the stage's predicted latency (Eq. 4), the stage is duplicated
/// once per processor and every (depth, width) pair within --min-depth and
/// --min-width is tried per branch; a candidate is kept when each branch is
/// at most --beta x the original stage on its fastest processor (Eq. 5) and
/// the branches' MACs are within --capacity of the original stage. The
/// fastest kept candidate wins (ties: FLOPs proportional to processor speed,
/// Eq. 6; depth-scaling on GPU/DSP, width-scaling on CPU). Head and merges
/// run on the fastest single processor; the stem's leading convolution is
/// split by output channels across the processors where that is predicted
/// faster (--no-split-stem keeps it whole). Every latency is predicted by
/// the device profile's latency model, or with --measure-on timed on this
/// machine, and the plan says which.
///
/// Writes a versioned JSON plan (stretch.plan/1) with -o; --explain lists
/// every candidate and the constraint that removed it; --all-combinations
/// compares every combination of the processors.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub search: SearchArgs,

    /// Write the plan (JSON) here.
    #[arg(short, long, value_name = "PLAN.json")]
    pub out: Option<PathBuf>,

    /// List every candidate considered and the constraint that removed it.
    #[arg(long)]
    pub explain: bool,

    /// Predict every combination of the processors (--processors, else all
    /// the device has) and print their speedup over the fastest single one.
    #[arg(long, conflicts_with = "out")]
    pub all_combinations: bool,

    /// With --all-combinations: also draw the speedups as an SVG bar chart here.
    #[arg(long, value_name = "CHART.svg", requires = "all_combinations")]
    pub chart: Option<PathBuf>,
}

/// Options shared by `plan` and `stretch`.
#[derive(clap::Args, Debug)]
pub struct SearchArgs {
    /// Device profile (TOML), e.g. configs/devices/snapdragon855.toml.
    #[arg(long, value_name = "PROFILE.toml")]
    pub device: PathBuf,

    /// Processors to branch across, comma-separated (default: all the device has).
    #[arg(long, value_delimiter = ',')]
    pub processors: Vec<String>,

    /// Eq. 4: a stage is branched only if communication <= alpha x its latency.
    #[arg(long, default_value_t = 0.1)]
    pub alpha: f64,

    /// Eq. 5: each branch <= beta x the original stage on its fastest processor.
    #[arg(long, default_value_t = 1.1)]
    pub beta: f64,

    /// Lower bound on a branch's depth / the stage's depth, in (0, 1].
    #[arg(long, default_value_t = 0.5)]
    pub min_depth: f64,

    /// Lower bound on a branch's width / the stage's width, in (0, 1].
    #[arg(long, default_value_t = 0.5)]
    pub min_width: f64,

    /// Band of the branches' total MACs relative to the original stage:
    /// LO,HI. The default keeps at least the original's work in every
    /// branched stage, so speedups compare like with like; a LO below 1
    /// trades work (and accuracy) for speed. Every report states the MACs
    /// ratio the plan ends up with.
    #[arg(long, value_delimiter = ',', default_value = "1.0,1.2")]
    pub capacity: Vec<f64>,

    /// How branches meet: project (1x1 conv to each branch's share, then
    /// concat; later stages unchanged) or concat (outputs concatenated; the
    /// next layer widens).
    #[arg(long, value_enum, default_value = "project")]
    pub merge: MergeArg,

    /// Branch channel counts are multiples of this. The engines' matrix
    /// kernels work in tiles of output channels (tract on AVX-512: 16, 32,
    /// 48, 64 or 80 rows), so a width just above a tile pays for the whole
    /// tile; 16 or 32 trades finer widths for whole tiles.
    #[arg(long, default_value_t = branching::plan::DEFAULT_WIDTH_MULTIPLE)]
    pub width_multiple: usize,

    /// Branch widths tried per stage: every 1/N of the stage's width down
    /// to --min-width, rounded to --width-multiple. More steps find plans
    /// closer to the capacity band's lower bound, at the cost of a longer
    /// search (the candidates grow with its square on two processors).
    #[arg(long, value_name = "N", default_value_t = branching::plan::DEFAULT_WIDTH_STEPS)]
    pub width_steps: usize,

    /// Time every subgraph the search weighs on this machine instead of
    /// predicting it: each is compiled on its processor's engine from this
    /// runtime configuration (e.g. configs/runtime/host.toml, whose
    /// processor names must be --device's) and timed on that processor's
    /// cores, median of 10 runs; a stage's branch options are timed
    /// together, round-robin and on every processor at once, so that a
    /// drift of the machine's speed falls on them alike. Hand-offs still
    /// come from --device. Plans for the machine and engines that will run
    /// the model, at the cost of a few minutes of timing (once: see --cost-db).
    #[arg(long, value_name = "RUNTIME.toml")]
    pub measure_on: Option<PathBuf>,

    /// Keep the stem whole on the fastest processor. By default the stem's
    /// leading convolution and the channel-wise layers after it are split
    /// by output channels across the processors (the original's weights
    /// sliced: the same function, nothing to retrain) where that is
    /// predicted faster, so that the part before the first branched stage
    /// does not leave processors idle.
    #[arg(long)]
    pub no_split_stem: bool,

    /// With --measure-on: the database of subgraph times (JSON, keyed by a
    /// subgraph's structure and its processor's engine, threads and cores);
    /// a subgraph timed once is never timed again.
    #[arg(long, value_name = "DB.json", requires = "measure_on")]
    pub cost_db: Option<PathBuf>,

    /// Price processors at other precisions than the device profile says
    /// they run, e.g. cpu=fp32 or cpu=int8,gpu=fp16. A processor runs its
    /// profile's `rated_precision` and every precision it has a `speedup`
    /// for; the plan records the precision of each processor.
    #[arg(long, value_name = "PROC=PRECISION,...")]
    pub precisions: Option<String>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum MergeArg {
    Project,
    Concat,
}

impl SearchArgs {
    pub fn settings(&self) -> Result<Settings> {
        let [lo, hi] = self.capacity[..] else {
            bail!("--capacity takes two numbers LO,HI, got {:?}", self.capacity);
        };
        let s = Settings {
            alpha: self.alpha,
            beta: self.beta,
            min_depth: self.min_depth,
            min_width: self.min_width,
            capacity: [lo, hi],
            merge: match self.merge {
                MergeArg::Project => Merge::Project,
                MergeArg::Concat => Merge::Concat,
            },
            width_multiple: self.width_multiple,
            width_steps: self.width_steps,
            split_stem: !self.no_split_stem,
        };
        s.validate()?;
        Ok(s)
    }

    pub fn model(&self) -> Result<DeviceModel> {
        let mut model =
            DeviceModel::load(&self.device).with_context(|| format!("cannot load {}", self.device.display()))?;
        if let Some(text) = &self.precisions {
            let pairs =
                predictor::DeviceProfile::parse_precisions(text).map_err(|e| anyhow::anyhow!("--precisions: {e}"))?;
            for (processor, precision) in pairs {
                model
                    .set_precision(&processor, precision)
                    .with_context(|| format!("--precisions {processor}={precision}"))?;
            }
        }
        Ok(model)
    }

    pub fn processors(&self, model: &DeviceModel) -> Vec<String> {
        if self.processors.is_empty() {
            model.processors()
        } else {
            self.processors.clone()
        }
    }

    /// Searches a plan for `graph` (read from `label`) on `processors`.
    pub fn plan(
        &self,
        graph: &graph_ir::Graph,
        label: &str,
        processors: &[String],
        explain: bool,
    ) -> Result<(Plan, branching::SearchReport)> {
        let model = self.model()?;
        let kinds: HashMap<String, _> = model
            .profile()
            .processors
            .iter()
            .map(|(n, p)| (n.clone(), p.kind))
            .collect();
        let settings = self.settings()?;
        let precisions: std::collections::BTreeMap<String, predictor::Precision> = processors
            .iter()
            .filter_map(|p| model.profile().processors.get(p).map(|x| (p.clone(), x.precision())))
            .collect();
        let Some(runtime) = &self.measure_on else {
            let (mut plan, report) = search(graph, label, &model, processors, &kinds, &settings, explain)?;
            plan.precisions = precisions;
            crate::warn_if_measured_elsewhere(model.profile());
            return Ok((plan, report));
        };
        let config =
            scheduler_rt::RuntimeConfig::load(runtime).with_context(|| format!("cannot load {}", runtime.display()))?;
        let (bar, ticks) = crate::progress::timing_spinner();
        let engines = scheduler_rt::factory(multi_dnn::splash::cloud::engines());
        let db = self.cost_db.as_deref();
        let measured = MeasuredModel::new(&model, runtime, config.processors, engines, db, ticks)?;
        let found =
            search(graph, label, &measured, processors, &kinds, &settings, explain).map(|(mut plan, report)| {
                plan.precisions = processors
                    .iter()
                    .map(|p| (p.clone(), predictor::Precision::Fp32))
                    .collect();
                (plan, report)
            });
        bar.finish_and_clear();
        let lower: Vec<String> = precisions
            .iter()
            .filter(|(_, p)| **p != predictor::Precision::Fp32)
            .map(|(n, p)| format!("{n} ({p})"))
            .collect();
        if !lower.is_empty() {
            eprintln!(
                "warning: --measure-on times the fp32 model: {} priced at fp32, not at the precision {} gives",
                lower.join(", "),
                self.device.display()
            );
        }
        measured.finish()?;
        let (timed, reused) = measured.counts();
        let db = db.map_or("the database (none given)".to_string(), |p| p.display().to_string());
        eprintln!(
            "measured: {timed} subgraphs timed on {}, {reused} taken from {db}",
            runtime.display()
        );
        Ok(found?)
    }
}

pub fn run(args: Args) -> Result<()> {
    let graph = args.model.load()?;
    let label = args.model.model.display().to_string();
    let model = args.search.model()?;
    let mut out = std::io::stdout().lock();
    if args.all_combinations {
        let all = args.search.processors(&model);
        let (full, _) = args.search.plan(&graph, &label, &all, false)?;
        let best_single = full.totals.original_ms[&full.totals.fastest_single];
        let mut bars = Vec::new();
        let mut rows = vec![
            [
                "processors",
                "predicted ms",
                "speedup vs fastest single",
                "work (MACs vs original)",
                "branched stages",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for mask in 1u32..(1 << all.len()) {
            let set: Vec<String> = all
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, p)| p.clone())
                .collect();
            let (plan, _) = args.search.plan(&graph, &label, &set, false)?;
            bars.push((set.join("+"), best_single / plan.totals.plan_ms));
            rows.push(vec![
                set.join("+"),
                format!("{:.2}", plan.totals.plan_ms),
                format!("{:.2}x", best_single / plan.totals.plan_ms),
                format!("{:.2}x", plan.totals.work_ratio),
                format!("{}/{}", plan.branched_stages(), plan.stages.len()),
            ]);
        }
        writeln!(
            out,
            "{label} on {}: speedup over the fastest single processor ({}, {best_single:.2} ms); all figures predicted, not measured",
            model.device(),
            full.totals.fastest_single
        )?;
        write!(out, "{}", crate::format::table(&rows, 1))?;
        if let Some(path) = &args.chart {
            let title = format!(
                "{} on {}: predicted speedup over {} alone",
                args.model
                    .model
                    .file_stem()
                    .map_or(label.clone(), |s| s.to_string_lossy().into_owned()),
                model.device(),
                full.totals.fastest_single
            );
            std::fs::write(path, crate::chart::bars_svg(&title, &bars, "x"))
                .with_context(|| format!("cannot write {}", path.display()))?;
            writeln!(out, "wrote {}", path.display())?;
        }
        return Ok(());
    }
    let processors = args.search.processors(&model);
    let (plan, report) = args.search.plan(&graph, &label, &processors, args.explain)?;
    if args.explain {
        write!(out, "{}", precision_lines(&model, &processors))?;
        for c in &report.candidates {
            let b: Vec<String> = c.branches.iter().map(|(p, d, w)| format!("{p}(d{d} w{w})")).collect();
            writeln!(
                out,
                "stage {} {:<60} {:>9.3} ms  macs {:.2}x  {}",
                c.stage,
                b.join(" + "),
                c.predicted_ms,
                c.macs_ratio,
                c.removed_by.as_deref().unwrap_or("kept")
            )?;
        }
    }
    write!(out, "{}", describe(&plan))?;
    if let Some(path) = &args.out {
        plan.save(path)?;
        writeln!(out, "wrote {}", path.display())?;
    }
    Ok(())
}
