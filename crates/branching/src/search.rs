//! The plan search (paper §4.2-4.3). Per stage, over every subset of two
//! or more of the asked processors (one branch each): Eq. 4
//! (communication at most α x the segment's latency, else the stage stays
//! whole), the (depth, width) grid within the lower bounds, Eq. 5 (each
//! branch at most β x the original segment on its fastest processor) and the
//! capacity band on MACs. Among the kept candidates whose predicted stage
//! latency is within 1% of the lowest, the one whose branch FLOPs are
//! closest to the processors' speed shares (Eq. 6: Σ |MACs_i / MACs −
//! speed_i / Σ speed|) plus half its distance from the preferred scaling
//! (Σ 1 − width_i / width on GPU/DSP/NPU, Σ 1 − depth_i / depth on CPU) is
//! the smallest wins (then the faster). A stage whose winner is not faster
//! than the whole stage stays whole. With the `concat` merge a candidate's
//! latency includes what its merge width costs the layers after it, and the
//! stage or head after a branched stage is priced reading the merge's
//! width. The stem is split by output channels across the processors
//! where that is predicted faster ([`crate::stem_split`]). End-to-end =
//! stem + per stage the slowest branch (communication included) + head,
//! every figure from the latency model (predicted, unless the model
//! measures: [`LatencyModel::provenance`] says which).

use crate::error::BranchError;
use crate::merge_cost::{Widening, widening};
use crate::plan::{Merge, Part, Plan, SCHEMA, Settings, StagePlan, Totals};
use crate::stage_search::StageSearch;
use graph_ir::Graph;
use graph_ir::analysis::{Structure, analyze};
use predictor::LatencyModel;
use predictor::profile::ProcessorKind;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// One candidate the search looked at, for `--explain`.
#[derive(Clone, Debug, Serialize)]
pub struct Candidate {
    pub stage: usize,
    /// (processor, depth, width) per branch.
    pub branches: Vec<(String, usize, usize)>,
    /// MACs per branch (its projection included), in `branches` order.
    pub branch_macs: Vec<u64>,
    pub predicted_ms: f64,
    pub macs_ratio: f64,
    /// The constraint that removed it; `None` if it was kept.
    pub removed_by: Option<String>,
}

/// What the search looked at, beside the plan.
#[derive(Debug, Default)]
pub struct SearchReport {
    /// Every candidate, when asked for.
    pub candidates: Vec<Candidate>,
}

/// Each processor's time for the whole model, the stem and the head.
struct Parts {
    original: BTreeMap<String, f64>,
    stem_ms: HashMap<String, f64>,
    head_ms: HashMap<String, f64>,
}

/// Searches a plan for `g` on `processors` of `model`. `kinds` gives each
/// processor's kind for the scaling preference (CPU when absent). Every
/// processor must exist in `model` and be named once.
pub fn search(
    g: &Graph,
    model_label: &str,
    model: &dyn LatencyModel,
    processors: &[String],
    kinds: &HashMap<String, ProcessorKind>,
    settings: &Settings,
    explain: bool,
) -> Result<(Plan, SearchReport), BranchError> {
    settings.validate()?;
    check_processors(model, processors)?;
    let s = analyze(g)?;
    let parts = parts(g, &s, model, processors)?;
    let fastest = parts
        .original
        .iter()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map(|(p, _)| p.clone())
        .unwrap_or_default();
    let primary = fastest.clone();
    let mut report = SearchReport::default();
    let stem = stem(g, &s, model, processors, &primary, &parts, settings)?;
    let mut ideal = stem.predicted_ms + parts.head_ms[&primary];
    let mut stages = Vec::new();
    let mut in_width = None;
    for stage in &s.stages {
        let search = StageSearch {
            g,
            stage,
            in_width,
            model,
            processors,
            primary: &primary,
            kinds,
            settings,
        };
        let sp = search.plan(explain, &mut report)?;
        ideal += stage_ideal(&sp);
        in_width = match settings.merge {
            Merge::Concat if !sp.branches.is_empty() => {
                let w: usize = sp.branches.iter().map(|b| b.width).sum();
                (w != sp.channels).then_some(w)
            }
            _ => None,
        };
        stages.push(sp);
    }
    let head_widening = match (in_width, s.stages.last()) {
        (Some(w), Some(last)) => widening(g, last.output(), w, last.index, model, &primary)?,
        _ => Widening::default(),
    };
    let head = Part {
        processor: primary.clone(),
        predicted_ms: parts.head_ms[&primary] + head_widening.ms,
        widened_macs: head_widening.macs,
        split: Vec::new(),
    };
    let totals = totals(g, parts.original, fastest, &stem, &stages, &head, ideal);
    let plan = Plan {
        schema: SCHEMA.into(),
        predicted_by: model.provenance(),
        model: model_label.to_string(),
        model_fingerprint: g.fingerprint(),
        device: model.device().to_string(),
        processors: processors.to_vec(),
        precisions: Default::default(),
        primary,
        settings: settings.clone(),
        stem,
        stages,
        head,
        totals,
    };
    Ok((plan, report))
}

/// Refuses a processor named twice or unknown to `model`, and an empty list.
fn check_processors(model: &dyn LatencyModel, processors: &[String]) -> Result<(), BranchError> {
    let available = model.processors();
    for (i, p) in processors.iter().enumerate() {
        if processors[..i].contains(p) {
            return Err(BranchError::DuplicateProcessor { name: p.clone() });
        }
        if !available.contains(p) {
            return Err(BranchError::UnknownProcessor {
                name: p.clone(),
                device: model.device().to_string(),
                available: available.join(", "),
            });
        }
    }
    if processors.is_empty() {
        return Err(BranchError::Option {
            name: "processors",
            reason: "name at least one processor".into(),
        });
    }
    Ok(())
}

/// The whole model, its stem and its head on every processor.
fn parts(g: &Graph, s: &Structure, model: &dyn LatencyModel, processors: &[String]) -> Result<Parts, BranchError> {
    let mut original = BTreeMap::new();
    let (mut stem_ms, mut head_ms) = (HashMap::new(), HashMap::new());
    for p in processors {
        original.insert(p.clone(), model.predict_graph(g, p)?.total_ms);
        stem_ms.insert(
            p.clone(),
            model
                .predict(g, &g.computing(s.stem.nodes.iter().copied()), p)?
                .total_ms,
        );
        head_ms.insert(
            p.clone(),
            model
                .predict(g, &g.computing(s.head.nodes.iter().copied()), p)?
                .total_ms,
        );
    }
    Ok(Parts {
        original,
        stem_ms,
        head_ms,
    })
}

/// The stem on `primary`, split by output channels across the processors
/// where the settings ask and that is predicted faster.
fn stem(
    g: &Graph,
    s: &Structure,
    model: &dyn LatencyModel,
    processors: &[String],
    primary: &str,
    parts: &Parts,
    settings: &Settings,
) -> Result<Part, BranchError> {
    let split = match (settings.split_stem, crate::stem_split::chain(g, &s.stem)) {
        (true, Some(chain)) if processors.len() > 1 => crate::stem_split::plan_split(
            g,
            &chain,
            model,
            processors,
            primary,
            &parts.stem_ms,
            settings.width_multiple,
        )?,
        _ => None,
    };
    let (split, predicted_ms) = split.unwrap_or_else(|| (Vec::new(), parts.stem_ms[primary]));
    Ok(Part {
        processor: primary.to_string(),
        predicted_ms,
        widened_macs: 0,
        split,
    })
}

/// End-to-end figures of the plan against the fastest single processor.
fn totals(
    g: &Graph,
    original: BTreeMap<String, f64>,
    fastest: String,
    stem: &Part,
    stages: &[StagePlan],
    head: &Part,
    ideal: f64,
) -> Totals {
    let original_macs = g.total_cost().macs;
    let plan_macs = stages
        .iter()
        .fold(original_macs as i64 + head.widened_macs, |m, sp| {
            m + sp.planned_macs() - sp.macs as i64
        })
        .max(0) as u64;
    let plan_ms = stem.predicted_ms + head.predicted_ms + stages.iter().map(|s| s.predicted_ms).sum::<f64>();
    let best_single = original[&fastest];
    Totals {
        original_ms: original,
        fastest_single: fastest,
        plan_ms,
        ideal_ms: ideal,
        speedup: best_single / plan_ms,
        ideal_speedup: best_single / ideal,
        original_macs,
        plan_macs,
        work_ratio: plan_macs as f64 / original_macs.max(1) as f64,
    }
}

/// The stage's share of the ideal bound: a branched stage's branch times
/// weighted by their processors' speeds (1 / the original stage's time
/// there) over the sum of every processor's speed, which never exceeds its
/// slowest branch; a whole stage's time with every processor in parallel.
fn stage_ideal(sp: &StagePlan) -> f64 {
    let speed = |p: &str| 1.0 / sp.original_ms.get(p).copied().unwrap_or(f64::INFINITY).max(1e-12);
    let total: f64 = sp.original_ms.keys().map(|p| speed(p)).sum();
    if sp.branches.is_empty() {
        return 1.0 / total;
    }
    sp.branches
        .iter()
        .map(|b| b.predicted_ms * speed(&b.processor))
        .sum::<f64>()
        / total
}
