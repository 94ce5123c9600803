//! `stretch analyze`: Puzzle's static analyzer.

use crate::puzzle_setup::{self as ps, Scenario};
use anyhow::{Context, Result, bail};
use clap::Args as ClapArgs;
use multi_dnn::predicted::costs::Costs;
use multi_dnn::puzzle::analysis::{self, Analysis, Event, Options};
use multi_dnn::puzzle::breakdown::Breakdown;
use multi_dnn::puzzle::chromosome::Piece;
use multi_dnn::puzzle::evaluate::{Built, Outcome, Problem};
use multi_dnn::puzzle::ga::GaOptions;
use multi_dnn::puzzle::mapping::shortest_first;
use multi_dnn::puzzle::measured::Measured;
use multi_dnn::puzzle::plan_file::PlanFile;
use multi_dnn::puzzle::retime::Source;
use multi_dnn::puzzle::score::MAX_MULTIPLIER;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Search how to cut each model of a workload's model groups into
/// subgraphs, where each runs and which model goes first (Puzzle: a
/// genetic algorithm, NSGA-II selection, over the multi-DNN simulator).
/// Prints the Pareto front of mean and p90 group makespans, the chosen
/// plan, its XRBench score and saturation multiplier α* (the smallest
/// period multiplier that scores 1), and the same for three baselines:
/// every model on the single best processor, the best model-level mapping
/// without cuts, and Band's `lst` online policy. Every figure is simulated, from costs predicted by a
/// device profile (--device) or measured on this machine (--runtime-config).
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Workload (TOML) whose apps all belong to `[[group]]`s; see
    /// configs/workloads/puzzle_*.toml.
    #[arg(long, value_name = "W.toml")]
    pub workload: PathBuf,

    /// Device profile: processors, operator support, predictor, links,
    /// and optionally measured whole-model latencies (`[models.APP]`):
    /// costs are predicted.
    #[arg(
        long,
        value_name = "D.toml",
        required_unless_present = "runtime_config",
        conflicts_with = "runtime_config"
    )]
    pub device: Option<PathBuf>,

    /// Runtime configuration (processors, engines, operator support; see
    /// configs/runtime/hetero.toml): costs are measured on this machine,
    /// each piece once on its processor's engine and cores, and kept in
    /// --cost-db; hand-offs cost the piecewise fit of measured thread
    /// hand-offs between the processors' cores. The plan is for `serve --plan`.
    #[arg(long = "runtime-config", value_name = "C.toml")]
    pub runtime_config: Option<PathBuf>,

    /// Processor specs added to or replacing the runtime configuration's.
    #[arg(long = "processor", value_name = "SPEC", requires = "runtime_config")]
    pub processors: Vec<scheduler_rt::ProcessorConfig>,

    /// Database of measured piece times (JSON; created if missing).
    #[arg(long = "cost-db", value_name = "DB.json", default_value = "target/puzzle-costs.json")]
    pub cost_db: PathBuf,

    /// Most generations to run (the search stops earlier when for 3
    /// generations neither the population's mean score nor its mean first
    /// objective has improved).
    #[arg(long, default_value_t = 40)]
    pub generations: usize,

    /// Individuals per generation (each makes one child per generation).
    #[arg(long, default_value_t = 24)]
    pub population: usize,

    /// Seed of the search (the same seed gives the same front).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Ticks of the slowest group simulated per evaluation.
    #[arg(long, default_value_t = 30)]
    pub periods: usize,

    /// Largest period multiplier tried when looking for α*, from 0.1 to 20.
    #[arg(long, default_value_t = 4.0)]
    pub max_multiplier: f64,

    /// Write the chosen plan (JSON) for `simulate --plan` / `serve --plan`,
    /// and the best model-level mapping beside it (NAME.best-mapping.json).
    #[arg(short = 'o', long = "out", value_name = "plan.json")]
    pub out: Option<PathBuf>,

    /// Write the final population and its front as a PNG.
    #[arg(long, value_name = "front.png")]
    pub front: Option<PathBuf>,

    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

fn pieces_text(pieces: &[Vec<Piece>], names: &[String]) -> String {
    pieces
        .iter()
        .map(|ps| {
            ps.iter()
                .map(|p| format!("{}x{}", names[p.processor], p.layers.len()))
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Each group's mean / p90 makespan (ms), comma-separated.
fn makespans_text(o: &Outcome) -> String {
    o.objectives()
        .chunks(2)
        .map(|c| format!("{:.2} / {:.2}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(", ")
}

fn alpha(a: Option<f64>) -> String {
    a.map_or("> max".into(), |a| format!("{a:.2}"))
}

fn check(a: &Args) -> Result<()> {
    if a.generations == 0 {
        bail!("--generations 0: nothing would be searched; give at least 1");
    }
    if a.population < 2 || a.periods == 0 {
        bail!("--population must be at least 2 and --periods at least 1");
    }
    if !(a.max_multiplier >= 0.1 && a.max_multiplier <= MAX_MULTIPLIER) {
        bail!(
            "--max-multiplier {}: give at least 0.1 and at most {MAX_MULTIPLIER} (each step of 0.05 up to it may cost a simulation)",
            a.max_multiplier
        );
    }
    Ok(())
}

pub fn run(a: Args) -> Result<()> {
    check(&a)?;
    let started = Instant::now();
    let sc = match &a.device {
        Some(d) => ps::load(&a.workload, d)?,
        None => ps::load_runtime(&a.workload, &a.runtime_config, &a.processors)?,
    };
    let mut predicted;
    let mut measured;
    let costs: &mut dyn Costs = if sc.device.is_some() {
        predicted = ps::predicted(&sc)?;
        &mut predicted
    } else {
        eprintln!("measuring hand-offs between processors...");
        let engines = scheduler_rt::factory(multi_dnn::splash::cloud::engines());
        measured = Measured::new(&sc.graphs, &sc.layers, &sc.procs, engines, Some(&a.cost_db))?;
        &mut measured
    };
    let (units, truth) = analysis::band_setup(&sc.graphs, &sc.layers, &sc.support, &sc.names, costs)?;
    let (mut problem, fastest) = ps::problem(&sc, costs, a.periods)?;
    let rank = shortest_first(&fastest);
    let options = Options {
        ga: GaOptions {
            population: a.population,
            generations: a.generations,
            seed: a.seed,
            ..GaOptions::default()
        },
        max_multiplier: a.max_multiplier,
    };
    let bar = crate::progress::bar(
        a.generations as u64,
        "{elapsed_precise} [{bar:30}] gen {pos}/{len} {wide_msg}",
    );
    let mut elapsed = 0.0;
    let r = analysis::analyze(&mut problem, (&units, &truth), &rank, &options, &mut |e| match e {
        Event::Note(note) => bar.suspend(|| eprintln!("{note}")),
        Event::Generation(g) => {
            bar.set_position(g.index as u64);
            bar.set_message(format!(
                "front best mean makespan {:.2} ms, best score {:.3}, mean score {:.3}, {} simulations",
                g.best_mean_ms, g.best_score, g.mean_score, g.simulations
            ));
        }
        Event::Searched => {
            bar.finish_and_clear();
            elapsed = started.elapsed().as_secs_f64();
        }
    })?;
    let plan = plan_file(&sc, &mut problem, &r)?;
    if let Some(path) = &a.out {
        write_plans(path, &plan, &sc, &mut problem, &r)?;
    }
    if let Some(path) = &a.front {
        let marks: Vec<(String, Vec<f64>)> = r
            .baselines
            .iter()
            .map(|b| (b.name.clone(), b.outcome.objectives()))
            .collect();
        crate::front_plot::write_png(path, &r.population_objectives, &r.front_objectives, &marks)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(());
    }
    print_text(&sc, &problem, &r, elapsed, a.out.as_deref());
    Ok(())
}

/// What the ideal α* is, for the text and the plan's figures.
const IDEAL_NOTE: &str = "no plan goes below it on these costs: layers priced at their share of the whole model, split freely among processors, free hand-offs, only layer order kept, every request of an evaluation done by its deadline";

/// The chosen plan with its figures.
fn plan_file(sc: &Scenario, problem: &mut Problem, r: &Analysis) -> Result<PlanFile> {
    let (built, outcome, saturation) = r.final_plan();
    let w = problem.workload.clone();
    let mut plan =
        PlanFile::new(&sc.names, &sc.apps, &sc.graphs, &sc.layers, &built.pieces, &built.rank).with_groups(&w);
    let apps = ps::app_values(&Breakdown::of(&problem.simulate_log(built, &w)?), &sc.apps);
    let searched = &r.front[r.chosen];
    plan.figures = serde_json::json!({
        "simulated": true,
        "costs": costs_note(sc),
        "cost_notes": problem.costs.notes(),
        "groups": group_figures(&w, outcome),
        "apps": apps,
        "score": outcome.score(),
        "saturation_multiplier": saturation,
        "retimed": r.retimed.as_ref().map(|t| serde_json::json!({
            "note": "chosen among the front's plans (and each with its same-processor neighbours merged) and the best model-level mapping on pieces timed afresh after the search, as served; the figures above come from a second fresh timing",
            "from_front_plan": t.source.front_plan(),
            "merged_same_processor_neighbours": matches!(t.source, Source::Front { merged: true, .. }),
            "best_mapping": t.source == Source::BestMapping,
            "candidates": t.candidates,
            "choice_score": t.choice_score,
            "choice_saturation_multiplier": t.choice_saturation,
            "search_score": searched.outcome.score(),
            "search_saturation_multiplier": searched.saturation,
        })),
        "ga_median_saturation_multiplier": r.front_median_saturation,
        "ideal_saturation_multiplier": r.ideal_saturation,
        "ideal_note": IDEAL_NOTE,
        "baselines": r.baselines.iter().map(|b| serde_json::json!({
            "name": b.name, "score": b.outcome.score(), "saturation_multiplier": b.saturation,
        })).collect::<Vec<_>>(),
    });
    Ok(plan)
}

/// Writes the chosen plan to `path` and the best mapping beside it.
fn write_plans(path: &Path, plan: &PlanFile, sc: &Scenario, problem: &mut Problem, r: &Analysis) -> Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(plan)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    let (b, best_outcome): (&Built, &Outcome) = r.final_best_mapping();
    let w = problem.workload.clone();
    let mut best = PlanFile::new(&sc.names, &sc.apps, &sc.graphs, &sc.layers, &b.pieces, &b.rank).with_groups(&w);
    let best_apps = ps::app_values(&Breakdown::of(&problem.simulate_log(b, &w)?), &sc.apps);
    best.figures = serde_json::json!({
        "simulated": true,
        "plan": "best model-level mapping without cuts (baseline)",
        "retimed": r.retimed.is_some(),
        "groups": group_figures(&w, best_outcome),
        "apps": best_apps,
        "score": best_outcome.score(),
    });
    let path = baseline_path(path);
    std::fs::write(&path, serde_json::to_string_pretty(&best)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

fn print_text(sc: &Scenario, problem: &Problem, r: &Analysis, elapsed: f64, out: Option<&Path>) {
    let names = &sc.names;
    println!(
        "analyze: {} models in {} group(s) on {} ({}; every figure is simulated)",
        sc.graphs.len(),
        problem.workload.groups.len(),
        names.join(", "),
        costs_note(sc)
    );
    for n in problem.costs.notes().iter().filter(|_| sc.device.is_none()) {
        println!("  {n}");
    }
    for g in &problem.workload.groups {
        println!(
            "  group {}: base period {:.2} ms, period {:.2} ms",
            g.name,
            g.base_ms.unwrap_or(f64::NAN),
            g.period_ms.unwrap_or(f64::NAN)
        );
    }
    if let Some(last) = r.history.last() {
        println!(
            "search: {} generations, {} simulations, {:.1} s",
            last.index, problem.simulations, elapsed
        );
    }
    println!(
        "Pareto front ({} plans; makespans per group: mean / p90 ms):",
        r.front.len()
    );
    for (i, f) in r.front.iter().enumerate() {
        println!(
            "  {}{i:>2}  {}  score {:.3}  α* {}  {}{}",
            if Some(i) == r.marked() { "*" } else { " " },
            makespans_text(&f.outcome),
            f.outcome.score(),
            alpha(f.saturation),
            pieces_text(&f.built.pieces, names),
            f.baseline
                .map_or(String::new(), |b| format!("  ({b}: the search found nothing better)"))
        );
    }
    let searched = &r.front[r.chosen];
    println!(
        "{} plan {} (smallest α*), score {:.3} at the workload's periods, α* {}; median α* over the front {}",
        if r.retimed.is_some() {
            "the search's own choice (on its measurements):"
        } else {
            "chosen:"
        },
        r.chosen,
        searched.outcome.score(),
        alpha(searched.saturation),
        alpha(r.front_median_saturation)
    );
    if let Some(t) = &r.retimed {
        println!(
            "re-timed: {} candidates (the front's plans, each with its same-processor neighbours merged, and the best model-level mapping) simulated on pieces timed afresh as served; best: {}, score {:.3}, α* {}",
            t.candidates,
            t.source.describe(),
            t.choice_score,
            alpha(t.choice_saturation)
        );
        println!(
            "  on a second fresh timing (the figures written to the plan): {}  score {:.3}  α* {}  {}",
            makespans_text(&t.outcome),
            t.outcome.score(),
            alpha(t.saturation),
            pieces_text(&t.built.pieces, names)
        );
    }
    println!("baselines                                   score   α*");
    for b in &r.baselines {
        println!("  {:<40} {:.3}  {}", b.name, b.outcome.score(), alpha(b.saturation));
    }
    if let Some(ideal) = r.ideal_saturation {
        println!("ideal α* {} ({IDEAL_NOTE})", alpha(Some(ideal)));
    }
    if let Some(path) = out {
        println!(
            "plan written to {} (best mapping: {})",
            path.display(),
            baseline_path(path).display()
        );
    }
}

/// `plan.json` -> `plan.best-mapping.json`.
pub fn baseline_path(p: &std::path::Path) -> PathBuf {
    let stem = p
        .file_stem()
        .map_or("plan".into(), |s| s.to_string_lossy().into_owned());
    p.with_file_name(format!("{stem}.best-mapping.json"))
}

fn group_figures(w: &multi_dnn::core::workload::Workload, o: &Outcome) -> Vec<serde_json::Value> {
    let obj = o.objectives();
    w.groups
        .iter()
        .enumerate()
        .map(|(g, grp)| {
            serde_json::json!({
                "group": grp.name,
                "base_period_ms": grp.base_ms,
                "period_ms": grp.period_ms,
                "mean_makespan_ms": obj[2 * g],
                "p50_makespan_ms": o.makespans.get(g).map(|m| graph_ir::stats::quantile_nan(m, 0.5)),
                "p90_makespan_ms": obj[2 * g + 1],
            })
        })
        .collect()
}

fn costs_note(sc: &Scenario) -> String {
    let Some(device) = &sc.device else {
        return format!("costs measured on this machine ({})", sc.names.join(", "));
    };
    let p = device.profile();
    let measured = sc.graphs.iter().filter(|g| p.models.contains_key(&g.name)).count();
    format!(
        "costs predicted by the {} profile{}",
        p.name,
        if measured > 0 {
            format!(", {measured} model(s) scaled to its measured whole-model latencies")
        } else {
            String::new()
        }
    )
}
