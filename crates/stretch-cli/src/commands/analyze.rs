//! `stretch analyze`: Puzzle's static analyzer.

use crate::puzzle_setup::{self as ps, Scenario};
use anyhow::{Context, Result, bail};
use clap::Args as ClapArgs;
use indicatif::{ProgressBar, ProgressStyle};
use multi_dnn::ModelUnits;
use multi_dnn::analyze as band_units;
use multi_dnn::policy::Lst;
use multi_dnn::puzzle::breakdown::Breakdown;
use multi_dnn::puzzle::chromosome::{Chromosome, Piece};
use multi_dnn::puzzle::costs::Costs;
use multi_dnn::puzzle::evaluate::{Outcome, Problem, candidate_rows};
use multi_dnn::puzzle::ga::{self, GaOptions};
use multi_dnn::puzzle::nsga;
use multi_dnn::puzzle::plan_file::PlanFile;
use multi_dnn::sim::Truth;
use std::path::PathBuf;
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

    /// Largest period multiplier tried when looking for α*.
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

/// A named plan and its figures.
pub struct Judged {
    pub name: String,
    pub outcome: Outcome,
    pub saturation: Option<f64>,
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

/// The best model-level mappings without cuts at the workload's periods:
/// every assignment of models to processors (or, past 4,096, coordinate
/// descent from each model's fastest processor), ranked shortest first;
/// the non-dominated ones, at most 9 spread over the first objective.
fn best_mappings(problem: &mut Problem, rank: &[usize]) -> Result<Vec<(Chromosome, Vec<f64>)>> {
    let (m, n) = (problem.layers.len(), problem.names.len());
    let mut tried: Vec<(Chromosome, Vec<f64>)> = Vec::new();
    let mut eval = |problem: &mut Problem, assign: &[usize]| -> Result<Vec<f64>> {
        let c = ps::mapped(problem.layers, assign, rank.to_vec());
        let o = problem.evaluate(&c)?.objectives();
        tried.push((c, o.clone()));
        Ok(o)
    };
    if (n as f64).powi(m as i32) <= 4096.0 {
        let mut assign = vec![0usize; m];
        'all: loop {
            eval(problem, &assign)?;
            for digit in assign.iter_mut() {
                *digit += 1;
                if *digit < n {
                    continue 'all;
                }
                *digit = 0;
            }
            break;
        }
    } else {
        let iso = ps::isolated_ms(problem)?;
        let mut assign: Vec<usize> = (0..m)
            .map(|i| (0..n).min_by(|a, b| iso[i][*a].total_cmp(&iso[i][*b])).unwrap_or(0))
            .collect();
        let mut best = eval(problem, &assign)?;
        let mut improved = true;
        while improved {
            improved = false;
            for i in 0..m {
                for p in 0..n {
                    let old = assign[i];
                    assign[i] = p;
                    let o = eval(problem, &assign)?;
                    if o[0] < best[0] {
                        best = o;
                        improved = true;
                    } else {
                        assign[i] = old;
                    }
                }
            }
        }
    }
    let objs: Vec<Vec<f64>> = tried.iter().map(|t| t.1.clone()).collect();
    let mut front = nsga::fronts(&objs).into_iter().next().unwrap_or_default();
    front.sort_by(|a, b| objs[*a][0].total_cmp(&objs[*b][0]));
    front.dedup_by(|a, b| objs[*a] == objs[*b]);
    let keep: Vec<usize> = if front.len() <= 9 {
        front
    } else {
        (0..9).map(|k| front[k * (front.len() - 1) / 8]).collect()
    };
    Ok(keep.into_iter().map(|i| tried[i].clone()).collect())
}

/// Band's units of every model, each candidate's predicted time per
/// processor (scaled like the plan's pieces; no hand-off costs).
fn band_setup(sc: &Scenario, costs: &mut dyn Costs) -> Result<(Vec<ModelUnits>, Truth)> {
    let mut units = Vec::new();
    let mut table = Vec::new();
    for (m, g) in sc.graphs.iter().enumerate() {
        let u = band_units(g, &sc.names, &sc.support).with_context(|| format!("model '{}'", g.name))?;
        table.push(candidate_rows(costs, m, &sc.layers[m], &u, sc.names.len())?);
        units.push(u);
    }
    Ok((
        units,
        Truth {
            table,
            overhead_ms: costs.dispatch_ms(),
            arrival_lag_quantiles: costs.arrival_lag_ms(),
            spread_correlation: (0..sc.names.len()).map(|p| costs.spread_correlation(p)).collect(),
            ..Truth::default()
        },
    ))
}

pub fn run(a: Args) -> Result<()> {
    if a.generations == 0 {
        bail!("--generations 0: nothing would be searched; give at least 1");
    }
    if a.population < 2 || a.periods == 0 {
        bail!("--population must be at least 2 and --periods at least 1");
    }
    if !(a.max_multiplier.is_finite() && a.max_multiplier >= 0.1) {
        bail!("--max-multiplier must be at least 0.1, got {}", a.max_multiplier);
    }
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
        measured = crate::puzzle_measure::Measured::new(&sc.graphs, &sc.layers, &sc.procs, Some(&a.cost_db))?;
        &mut measured
    };
    let (units, truth) = band_setup(&sc, costs)?;
    let (mut problem, fastest) = ps::problem(&sc, costs, a.periods)?;
    let rank = ps::shortest_first(&fastest);
    let names = sc.names.clone();
    let models = sc.graphs.len();

    let mut baselines: Vec<Judged> = Vec::new();
    let mut single: Option<Judged> = None;
    for (p, name) in names.iter().enumerate() {
        let b = problem.build(&ps::whole_on(&sc.layers, p, rank.clone()))?;
        let w = problem.workload.clone();
        let outcome = problem.simulate(&b, &w)?;
        let sat = problem.saturation(&b, a.max_multiplier)?;
        let better = single.as_ref().is_none_or(|s| {
            sat.unwrap_or(f64::INFINITY) < s.saturation.unwrap_or(f64::INFINITY)
                || (sat == s.saturation && outcome.objectives()[0] < s.outcome.objectives()[0])
        });
        if better {
            single = Some(Judged {
                name: format!("single processor ({name})"),
                outcome,
                saturation: sat,
            });
        }
    }
    baselines.extend(single);
    let mappings = best_mappings(&mut problem, &rank)?;
    let mut sats = Vec::new();
    let mut best_built = None;
    for (c, _) in &mappings {
        let b = problem.build(c)?;
        sats.push(problem.saturation(&b, a.max_multiplier)?.unwrap_or(f64::INFINITY));
        best_built.get_or_insert(b);
    }
    let best_built = best_built.context("no model-level mapping could be built")?;
    let w = problem.workload.clone();
    let best_map = problem.simulate(&best_built, &w)?;
    let med = graph_ir::stats::median_nan(&sats);
    baselines.push(Judged {
        name: format!("best mapping ({} on its front)", mappings.len()),
        outcome: best_map.clone(),
        saturation: med.is_finite().then_some(med),
    });
    let lst_outcome = problem.run_policy(units.clone(), &truth, Box::new(Lst::new(false)), &w)?;
    let lst_sat = problem.saturation_with(&units, &truth, || Box::new(Lst::new(false)), a.max_multiplier)?;
    baselines.push(Judged {
        name: "Band lst (online, no hand-off costs)".into(),
        outcome: lst_outcome,
        saturation: lst_sat,
    });

    let (front, history, population_objs, front_objs) = if models == 1 {
        eprintln!(
            "one model in the workload: nothing to search (no priorities to order, and cutting a lone model only adds hand-offs); the plan is the best mapping"
        );
        let c = mappings[0].0.clone();
        let o = mappings[0].1.clone();
        (vec![(c, best_map.clone())], Vec::new(), vec![o.clone()], vec![o])
    } else {
        let bar = ProgressBar::new(a.generations as u64).with_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] gen {pos}/{len} {wide_msg}")
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let options = GaOptions {
            population: a.population,
            generations: a.generations,
            seed: a.seed,
            ..GaOptions::default()
        };
        let result = ga::search(&mut problem, &options, |g| {
            bar.set_position(g.index as u64);
            bar.set_message(format!(
                "front best mean makespan {:.2} ms, best score {:.3}, mean score {:.3}, {} simulations",
                g.best_mean_ms, g.best_score, g.mean_score, g.simulations
            ));
        })?;
        bar.finish_and_clear();
        let pop_objs: Vec<Vec<f64>> = result.population.iter().map(|i| i.objectives.clone()).collect();
        let front: Vec<(Chromosome, Outcome)> = result
            .front
            .iter()
            .map(|i| {
                (
                    result.population[*i].chromosome.clone(),
                    result.population[*i].outcome.clone(),
                )
            })
            .collect();
        let fo: Vec<Vec<f64>> = result.front.iter().map(|i| pop_objs[*i].clone()).collect();
        (front, result.history, pop_objs, fo)
    };
    let front_chromosomes: Vec<Chromosome> = front.iter().map(|f| f.0.clone()).collect();
    let mut judged = Vec::new();
    for (i, (c, outcome)) in front.into_iter().enumerate() {
        let b = problem.build(&c)?;
        let sat = problem.saturation(&b, a.max_multiplier)?;
        judged.push((i, b, outcome, sat));
    }
    let chosen = judged
        .iter()
        .min_by(|x, y| {
            x.3.unwrap_or(f64::INFINITY)
                .total_cmp(&y.3.unwrap_or(f64::INFINITY))
                .then(x.2.objectives()[0].total_cmp(&y.2.objectives()[0]))
        })
        .map(|j| j.0)
        .unwrap_or(0);
    let front_sats: Vec<f64> = judged.iter().map(|j| j.3.unwrap_or(f64::INFINITY)).collect();
    let ga_median = graph_ir::stats::median_nan(&front_sats);
    let elapsed = started.elapsed().as_secs_f64();
    let retimed = if models > 1 {
        crate::puzzle_retime::choose(
            &mut problem,
            &front_chromosomes,
            &mappings[0].0,
            &best_built,
            &w,
            a.max_multiplier,
        )?
    } else {
        None
    };
    problem.costs.finish().map_err(|e| anyhow::anyhow!(e))?;
    let (final_built, final_outcome, final_sat) = match &retimed {
        Some(r) => (&r.built, &r.outcome, r.saturation),
        None => (&judged[chosen].1, &judged[chosen].2, judged[chosen].3),
    };

    let mut plan = PlanFile::new(
        &names,
        &sc.apps,
        &sc.graphs,
        &sc.layers,
        &final_built.pieces,
        &final_built.rank,
    );
    let groups = group_figures(&problem.workload, final_outcome);
    let w = problem.workload.clone();
    let apps = ps::app_values(&Breakdown::of(&problem.simulate_log(final_built, &w)?), &sc.apps);
    plan.figures = serde_json::json!({
        "simulated": true,
        "costs": costs_note(&sc),
        "cost_notes": problem.costs.notes(),
        "groups": groups,
        "apps": apps,
        "score": final_outcome.score(),
        "saturation_multiplier": final_sat,
        "retimed": retimed.as_ref().map(|r| serde_json::json!({
            "note": "chosen among the front's plans (and each with its same-processor neighbours merged) and the best model-level mapping on pieces timed afresh after the search, as served; the figures above come from a second fresh timing",
            "from_front_plan": r.source.front_plan(),
            "merged_same_processor_neighbours": matches!(r.source, crate::puzzle_retime::Source::Front { merged: true, .. }),
            "best_mapping": r.source == crate::puzzle_retime::Source::BestMapping,
            "candidates": r.candidates,
            "choice_score": r.choice_score,
            "choice_saturation_multiplier": r.choice_saturation,
            "search_score": judged[chosen].2.score(),
            "search_saturation_multiplier": judged[chosen].3,
        })),
        "ga_median_saturation_multiplier": ga_median.is_finite().then_some(ga_median),
        "baselines": baselines.iter().map(|b| serde_json::json!({
            "name": b.name, "score": b.outcome.score(), "saturation_multiplier": b.saturation,
        })).collect::<Vec<_>>(),
    });
    if let Some(path) = &a.out {
        std::fs::write(path, serde_json::to_string_pretty(&plan)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let (b, best_outcome) = match &retimed {
            Some(r) => (&r.best_built, &r.best_outcome),
            None => (&best_built, &best_map),
        };
        let mut best = PlanFile::new(&names, &sc.apps, &sc.graphs, &sc.layers, &b.pieces, &b.rank);
        let best_apps = ps::app_values(&Breakdown::of(&problem.simulate_log(b, &w)?), &sc.apps);
        best.figures = serde_json::json!({
            "simulated": true,
            "plan": "best model-level mapping without cuts (baseline)",
            "retimed": retimed.is_some(),
            "groups": group_figures(&problem.workload, best_outcome),
            "apps": best_apps,
            "score": best_outcome.score(),
        });
        let path = baseline_path(path);
        std::fs::write(&path, serde_json::to_string_pretty(&best)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &a.front {
        let marks: Vec<(String, Vec<f64>)> = baselines
            .iter()
            .map(|b| (b.name.clone(), b.outcome.objectives()))
            .collect();
        crate::front_plot::write_png(path, &population_objs, &front_objs, &marks)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(());
    }
    println!(
        "analyze: {} models in {} group(s) on {} ({}; every figure is simulated)",
        models,
        problem.workload.groups.len(),
        names.join(", "),
        costs_note(&sc)
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
    if let Some(last) = history.last() {
        println!(
            "search: {} generations, {} simulations, {:.1} s",
            last.index, problem.simulations, elapsed
        );
    }
    println!(
        "Pareto front ({} plans; makespans per group: mean / p90 ms):",
        judged.len()
    );
    for (i, _, o, sat) in &judged {
        println!(
            "  {}{i:>2}  {}  score {:.3}  α* {}  {}",
            if Some(*i) == retimed.as_ref().map_or(Some(chosen), |r| r.source.front_plan()) {
                "*"
            } else {
                " "
            },
            makespans_text(o),
            o.score(),
            alpha(*sat),
            pieces_text(&judged[*i].1.pieces, &names)
        );
    }
    println!(
        "{} plan {chosen} (smallest α*), score {:.3} at the workload's periods, α* {}; median α* over the front {}",
        if retimed.is_some() {
            "the search's own choice (on its measurements):"
        } else {
            "chosen:"
        },
        judged[chosen].2.score(),
        alpha(judged[chosen].3),
        alpha(ga_median.is_finite().then_some(ga_median))
    );
    if let Some(r) = &retimed {
        println!(
            "re-timed: {} candidates (the front's plans, each with its same-processor neighbours merged, and the best model-level mapping) simulated on pieces timed afresh as served; best: {}, score {:.3}, α* {}",
            r.candidates,
            r.source.describe(),
            r.choice_score,
            alpha(r.choice_saturation)
        );
        println!(
            "  on a second fresh timing (the figures written to the plan): {}  score {:.3}  α* {}  {}",
            makespans_text(&r.outcome),
            r.outcome.score(),
            alpha(r.saturation),
            pieces_text(&r.built.pieces, &names)
        );
    }
    println!("baselines                                   score   α*");
    for b in &baselines {
        println!("  {:<40} {:.3}  {}", b.name, b.outcome.score(), alpha(b.saturation));
    }
    if let Some(path) = &a.out {
        println!(
            "plan written to {} (best mapping: {})",
            path.display(),
            baseline_path(path).display()
        );
    }
    Ok(())
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
