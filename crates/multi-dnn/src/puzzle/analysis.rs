//! Puzzle's static analysis (§4) as one call: the baselines (the single
//! best processor, the best model-level mapping, Band's `lst`), the
//! genetic search, each front plan's saturation multiplier α*, the choice
//! among them and, on measured costs, the re-timed choice ([`retime`]).
//! Every figure is simulated.

use super::PuzzleError;
use super::bound;
use super::chromosome::{Chromosome, LayerGraph};
use super::evaluate::{Built, Outcome, Problem};
use super::ga::{self, GaOptions, Generation};
use super::mapping::{best_mappings, whole_on};
use super::retime::{self, Retimed};
use crate::core::units::{ModelUnits, analyze as band_units};
use crate::policy::Lst;
use crate::predicted::costs::Costs;
use crate::predicted::costs::candidate_rows;
use crate::sim::Truth;
use graph_ir::Graph;
use scheduler_rt::support::OpSupport;

/// A named plan and its figures.
pub struct Judged {
    pub name: String,
    pub outcome: Outcome,
    pub saturation: Option<f64>,
}

/// A plan of the search's front, built, with its figures; or a baseline's
/// plan added after the front because the search found nothing better.
pub struct FrontPlan {
    pub built: Built,
    pub outcome: Outcome,
    pub saturation: Option<f64>,
    /// The baseline this plan is (`best mapping`, `single processor`), for
    /// a plan that is not the search's.
    pub baseline: Option<&'static str>,
}

/// What the analysis reports as it goes.
pub enum Event<'a> {
    /// Something the user should know before a long step.
    Note(&'a str),
    /// A generation of the search ended.
    Generation(&'a Generation),
    /// The search ended and its front was judged (re-timing follows).
    Searched,
}

/// How to analyse.
pub struct Options {
    pub ga: GaOptions,
    /// Largest period multiplier tried when looking for α*.
    pub max_multiplier: f64,
}

/// The analysis: baselines, front, choice.
pub struct Analysis {
    /// The single best processor, the best mapping, Band's `lst`.
    pub baselines: Vec<Judged>,
    /// The best model-level mapping (first of its front), built, and its outcome.
    pub best_built: Built,
    pub best_outcome: Outcome,
    /// The search's front (the best mapping alone when there is one model).
    pub front: Vec<FrontPlan>,
    /// The plan with the smallest α* (then the smallest first objective)
    /// among the front and the baselines' static plans: never worse than
    /// the best mapping or the best single processor.
    pub chosen: usize,
    /// The median α* over the search's front (baselines' plans left out), where finite.
    pub front_median_saturation: Option<f64>,
    /// The α* below which no plan can go on a relaxation of the costs
    /// ([`bound::ideal_saturation`]); `None` on measured costs.
    pub ideal_saturation: Option<f64>,
    /// On measured costs: the choice made again on fresh timings.
    pub retimed: Option<Retimed>,
    pub history: Vec<Generation>,
    /// Objectives of the final population and of its front, for plots.
    pub population_objectives: Vec<Vec<f64>>,
    pub front_objectives: Vec<Vec<f64>>,
}

impl Analysis {
    /// The plan whose figures stand: the re-timed choice, else the search's.
    pub fn final_plan(&self) -> (&Built, &Outcome, Option<f64>) {
        match &self.retimed {
            Some(r) => (&r.built, &r.outcome, r.saturation),
            None => {
                let f = &self.front[self.chosen];
                (&f.built, &f.outcome, f.saturation)
            }
        }
    }

    /// The best mapping's figures on the same costs as [`Self::final_plan`].
    pub fn final_best_mapping(&self) -> (&Built, &Outcome) {
        match &self.retimed {
            Some(r) => (&r.best_built, &r.best_outcome),
            None => (&self.best_built, &self.best_outcome),
        }
    }

    /// The front plan marked as chosen: the re-timed choice's source, else [`Self::chosen`].
    pub fn marked(&self) -> Option<usize> {
        self.retimed
            .as_ref()
            .map_or(Some(self.chosen), |r| r.source.front_plan())
    }
}

/// Band's units of every model, each candidate's time per processor from
/// `costs` (scaled like the plan's pieces; no hand-off costs).
pub fn band_setup(
    graphs: &[Graph],
    layers: &[LayerGraph],
    support: &[OpSupport],
    names: &[String],
    costs: &mut dyn Costs,
) -> Result<(Vec<ModelUnits>, Truth), PuzzleError> {
    let mut units = Vec::new();
    let mut table = Vec::new();
    for (m, g) in graphs.iter().enumerate() {
        let u = band_units(g, names, support).map_err(|e| PuzzleError::Model {
            model: g.name.clone(),
            reason: e.to_string(),
        })?;
        table.push(candidate_rows(costs, m, &layers[m], &u, names.len())?);
        units.push(u);
    }
    let truth = Truth {
        table,
        overhead_ms: costs.dispatch_ms(),
        arrival_lag_quantiles: costs.arrival_lag_ms(),
        spread_correlation: (0..names.len()).map(|p| costs.spread_correlation(p)).collect(),
        ..Truth::default()
    };
    Ok((units, truth))
}

fn inf(a: Option<f64>) -> f64 {
    a.unwrap_or(f64::INFINITY)
}

/// A static plan judged by what the choice compares.
struct Candidate {
    chromosome: Chromosome,
    built: Built,
    outcome: Outcome,
    saturation: Option<f64>,
}

/// The order the choice uses: smaller α* first, then the smaller first
/// objective.
fn by_alpha(a: (Option<f64>, &Outcome), b: (Option<f64>, &Outcome)) -> std::cmp::Ordering {
    inf(a.0)
        .total_cmp(&inf(b.0))
        .then(a.1.objectives()[0].total_cmp(&b.1.objectives()[0]))
}

/// The best of `plans` by [`by_alpha`] (the first of equals), with its index.
fn best_of(problem: &mut Problem, plans: Vec<Chromosome>, max: f64) -> Result<Option<(usize, Candidate)>, PuzzleError> {
    let w = problem.workload.clone();
    let mut best: Option<(usize, Candidate)> = None;
    for (i, chromosome) in plans.into_iter().enumerate() {
        let built = problem.build(&chromosome)?;
        let outcome = problem.simulate(&built, &w)?;
        let saturation = problem.saturation(&built, max)?;
        if best
            .as_ref()
            .is_none_or(|(_, b)| by_alpha((saturation, &outcome), (b.saturation, &b.outcome)).is_lt())
        {
            best = Some((
                i,
                Candidate {
                    chromosome,
                    built,
                    outcome,
                    saturation,
                },
            ));
        }
    }
    Ok(best)
}

/// What the baselines leave for the search and the choice.
struct Baselines {
    judged: Vec<Judged>,
    /// The best model-level mappings (their front) with their objectives.
    mappings: Vec<(Chromosome, Vec<f64>)>,
    /// The best of `mappings` by α*: the plan the "best mapping" row
    /// describes and the one written beside the chosen plan.
    best: Candidate,
    /// The best single processor's plan.
    single: Candidate,
}

/// Baselines and the best mappings (see [`Analysis::baselines`]).
fn baselines(
    problem: &mut Problem,
    band: (&[ModelUnits], &Truth),
    rank: &[usize],
    max: f64,
) -> Result<Baselines, PuzzleError> {
    let w = problem.workload.clone();
    let singles = (0..problem.names.len())
        .map(|p| whole_on(problem.layers, p, rank.to_vec()))
        .collect();
    let (p, single) = best_of(problem, singles, max)?.ok_or_else(|| PuzzleError::Model {
        model: problem.names.join(", "),
        reason: "no processor to map the models on".into(),
    })?;
    let mut judged = vec![Judged {
        name: format!("single processor ({})", problem.names[p]),
        outcome: single.outcome.clone(),
        saturation: single.saturation,
    }];
    let mappings = best_mappings(problem, rank)?;
    let plans = mappings.iter().map(|(c, _)| c.clone()).collect();
    let (_, best) = best_of(problem, plans, max)?.ok_or_else(|| PuzzleError::Model {
        model: problem.names.join(", "),
        reason: "no model-level mapping could be built".into(),
    })?;
    judged.push(Judged {
        name: format!("best mapping (best α* of {} on its front)", mappings.len()),
        outcome: best.outcome.clone(),
        saturation: best.saturation,
    });
    let (units, truth) = band;
    let lst_outcome = problem.run_policy(units.to_vec(), truth, Box::new(Lst::new(false)), &w)?;
    let lst_sat = problem.saturation_with(units, truth, || Box::new(Lst::new(false)), max)?;
    judged.push(Judged {
        name: "Band lst (online, no hand-off costs)".into(),
        outcome: lst_outcome,
        saturation: lst_sat,
    });
    Ok(Baselines {
        judged,
        mappings,
        best,
        single,
    })
}

/// The search's front with its population's and front's objectives.
type Searched = (
    Vec<(Chromosome, Outcome)>,
    Vec<Generation>,
    Vec<Vec<f64>>,
    Vec<Vec<f64>>,
);

fn search(
    problem: &mut Problem,
    options: &GaOptions,
    best: (&Chromosome, &Vec<f64>, &Outcome),
    seeds: &[Chromosome],
    events: &mut dyn FnMut(Event),
) -> Result<Searched, PuzzleError> {
    if problem.layers.len() == 1 {
        events(Event::Note(
            "one model in the workload: nothing to search (no priorities to order, and cutting a lone model only adds hand-offs); the plan is the best mapping",
        ));
        let (c, o, outcome) = best;
        return Ok((
            vec![(c.clone(), outcome.clone())],
            Vec::new(),
            vec![o.clone()],
            vec![o.clone()],
        ));
    }
    let result = ga::search(problem, options, seeds, |g| events(Event::Generation(g)))?;
    let pop_objs: Vec<Vec<f64>> = result.population.iter().map(|i| i.objectives.clone()).collect();
    let front = result
        .front
        .iter()
        .map(|i| {
            (
                result.population[*i].chromosome.clone(),
                result.population[*i].outcome.clone(),
            )
        })
        .collect();
    let front_objs = result.front.iter().map(|i| pop_objs[*i].clone()).collect();
    Ok((front, result.history, pop_objs, front_objs))
}

/// Analyses `problem` (its workload's groups resolved) with Band's units
/// and truth `band` for the `lst` baseline and models ranked by `rank`.
pub fn analyze(
    problem: &mut Problem,
    band: (&[ModelUnits], &Truth),
    rank: &[usize],
    options: &Options,
    events: &mut dyn FnMut(Event),
) -> Result<Analysis, PuzzleError> {
    let max = options.max_multiplier;
    let ideal_saturation = bound::ideal_saturation(problem, max)?;
    let base = baselines(problem, band, rank, max)?;
    let best_objectives = base.best.outcome.objectives();
    let best = (&base.best.chromosome, &best_objectives, &base.best.outcome);
    let mut seeds: Vec<Chromosome> = vec![base.single.chromosome.clone()];
    seeds.extend(base.mappings.iter().map(|(c, _)| c.clone()));
    let (found, history, population_objectives, mut front_objectives) =
        search(problem, &options.ga, best, &seeds, events)?;
    let chromosomes: Vec<Chromosome> = found.iter().map(|f| f.0.clone()).collect();
    let mut front = Vec::with_capacity(found.len());
    for (c, outcome) in found {
        let built = problem.build(&c)?;
        let saturation = problem.saturation(&built, max)?;
        front.push(FrontPlan {
            built,
            outcome,
            saturation,
            baseline: None,
        });
    }
    let order = |x: &FrontPlan, y: &FrontPlan| by_alpha((x.saturation, &x.outcome), (y.saturation, &y.outcome));
    let mut chosen = (0..front.len())
        .min_by(|&x, &y| order(&front[x], &front[y]))
        .unwrap_or(0);
    let sats: Vec<f64> = front.iter().map(|f| inf(f.saturation)).collect();
    let median = graph_ir::stats::median_nan(&sats);
    for (name, c) in [("best mapping", &base.best), ("single processor", &base.single)] {
        let plan = FrontPlan {
            built: c.built.clone(),
            outcome: c.outcome.clone(),
            saturation: c.saturation,
            baseline: Some(name),
        };
        if front.get(chosen).is_none_or(|f| order(&plan, f).is_lt()) {
            front_objectives.push(plan.outcome.objectives());
            front.push(plan);
            chosen = front.len() - 1;
        }
    }
    events(Event::Searched);
    let retimed = if problem.layers.len() > 1 {
        let w = problem.workload.clone();
        let mut starting = || {
            events(Event::Note(
                "timing the front's pieces afresh to choose among them, then once more for the chosen plan's figures...",
            ))
        };
        retime::choose(
            problem,
            &chromosomes,
            (&base.best.chromosome, &base.best.built),
            &w,
            max,
            &mut starting,
        )?
    } else {
        None
    };
    problem.costs.finish().map_err(|reason| PuzzleError::Measure {
        step: "keeping the measured costs".into(),
        reason,
    })?;
    Ok(Analysis {
        baselines: base.judged,
        best_built: base.best.built,
        best_outcome: base.best.outcome,
        front,
        chosen,
        front_median_saturation: median.is_finite().then_some(median),
        ideal_saturation,
        retimed,
        history,
        population_objectives,
        front_objectives,
    })
}
