//! Choosing among the analyzer's front on measurements it was not found on.
//!
//! With measured costs every piece is timed once and the search keeps the
//! plans whose pieces timed fast, partly by luck: the chosen plan's
//! simulated makespan is biased low (the winner's curse). Here the front's
//! plans, each also with its same-processor neighbours merged, and the best
//! model-level mapping (also a point of the search space) are simulated on
//! pieces timed afresh as served (pass 1) and the best is chosen; its
//! figures, and the best mapping's, then come from a second fresh timing
//! (pass 2) that played no part in any choice.

use super::PuzzleError;
use super::chromosome::Chromosome;
use super::evaluate::{Built, Outcome, Problem};
use crate::core::workload::Workload;

/// Where the chosen plan came from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Source {
    /// The front's plan `plan`, with its same-processor neighbours merged
    /// where `merged`.
    Front { plan: usize, merged: bool },
    /// The best model-level mapping.
    BestMapping,
}

impl Source {
    /// The front's plan it came from, if any.
    pub fn front_plan(self) -> Option<usize> {
        match self {
            Source::Front { plan, .. } => Some(plan),
            Source::BestMapping => None,
        }
    }

    /// How the analyzer names it.
    pub fn describe(self) -> String {
        match self {
            Source::Front { plan, merged: false } => format!("plan {plan}"),
            Source::Front { plan, merged: true } => format!("plan {plan} with same-processor neighbours merged"),
            Source::BestMapping => "the best model-level mapping".into(),
        }
    }
}

/// The plan chosen on re-timed pieces and its figures from a second timing.
pub struct Retimed {
    pub source: Source,
    /// Pass 1: its score and α* among the candidates.
    pub choice_score: f64,
    pub choice_saturation: Option<f64>,
    /// Pass 2: the plan built, simulated and saturated on fresh times.
    pub built: Built,
    pub outcome: Outcome,
    pub saturation: Option<f64>,
    /// Pass 2: the best mapping built and simulated on the same times.
    pub best_built: Built,
    pub best_outcome: Outcome,
    /// Candidates simulated in pass 1.
    pub candidates: usize,
}

fn better(a: (Option<f64>, f64), b: (Option<f64>, f64)) -> bool {
    let inf = |s: Option<f64>| s.unwrap_or(f64::INFINITY);
    inf(a.0) < inf(b.0) || (inf(a.0) == inf(b.0) && a.1 < b.1)
}

/// Re-times and chooses (see the module docs), telling `starting` before
/// the first timing; `None` where the costs are not measured (nothing to
/// re-time: the search's own choice stands).
pub fn choose(
    problem: &mut Problem,
    front: &[Chromosome],
    best: (&Chromosome, &Built),
    w: &Workload,
    max_multiplier: f64,
    starting: &mut dyn FnMut(),
) -> Result<Option<Retimed>, PuzzleError> {
    let (best_chromosome, best_mapping) = best;
    if front.is_empty() || !problem.costs.retime() {
        return Ok(None);
    }
    starting();
    let layers = problem.layers;
    let mut candidates: Vec<(Source, Chromosome)> = Vec::new();
    let mut seen = Vec::new();
    for (i, c) in front.iter().enumerate() {
        seen.push(c.decode(layers));
        candidates.push((Source::Front { plan: i, merged: false }, c.clone()));
        let m = c.merge_same_processor(layers);
        let merged = m.decode(layers);
        if !seen.contains(&merged) {
            seen.push(merged);
            candidates.push((Source::Front { plan: i, merged: true }, m));
        }
    }
    if !seen.contains(&best_chromosome.decode(layers)) {
        candidates.push((Source::BestMapping, best_chromosome.clone()));
    }
    let mut pick: Option<(usize, (Option<f64>, f64), f64)> = None;
    for (k, (_, c)) in candidates.iter().enumerate() {
        let b = problem.build(c)?;
        let o = problem.simulate(&b, w)?;
        let key = (problem.saturation(&b, max_multiplier)?, o.objectives()[0]);
        if pick.as_ref().is_none_or(|p| better(key, p.1)) {
            pick = Some((k, key, o.score()));
        }
    }
    let Some((k, (choice_saturation, _), choice_score)) = pick else {
        return Ok(None);
    };
    problem.costs.retime();
    let (source, c) = &candidates[k];
    let built = problem.build(c)?;
    let outcome = problem.simulate(&built, w)?;
    let saturation = problem.saturation(&built, max_multiplier)?;
    let best_built = problem.build_pieces(best_mapping.pieces.clone(), best_mapping.rank.clone())?;
    let best_outcome = problem.simulate(&best_built, w)?;
    Ok(Some(Retimed {
        source: *source,
        choice_score,
        choice_saturation,
        built,
        outcome,
        saturation,
        best_built,
        best_outcome,
        candidates: candidates.len(),
    }))
}
