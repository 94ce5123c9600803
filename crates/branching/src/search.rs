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

use crate::branch::{BranchSpec, build_branch_at, channels, project, scale, shares};
use crate::error::BranchError;
use crate::merge_cost::{Widening, widening};
use crate::plan::{BranchPlan, Counts, Merge, Part, Plan, SCHEMA, Settings, StagePlan, Totals};
use graph_ir::Graph;
use graph_ir::analysis::{Stage, analyze};
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

/// The constraint that removed a candidate.
enum Removal {
    /// Eq. 5: the branch on `processors[processor]` takes `ms`.
    Eq5 { processor: usize, ms: f64 },
    /// The branches' MACs are `ratio` x the stage's, outside the band.
    Capacity { ratio: f64 },
}

impl Removal {
    fn describe(&self, processors: &[String], settings: &Settings, seg_ms: f64) -> String {
        match self {
            Removal::Eq5 { processor, ms } => format!(
                "Eq. 5: branch on {} {ms:.3} ms > beta {} x {seg_ms:.3} ms",
                processors[*processor], settings.beta
            ),
            Removal::Capacity { ratio } => format!(
                "capacity: branch MACs {ratio:.2}x the stage, outside [{}, {}]",
                settings.capacity[0], settings.capacity[1]
            ),
        }
    }
}

/// One (depth, width) option of a branch on one processor.
#[derive(Clone, Debug)]
struct Option_ {
    depth: usize,
    width: usize,
    body_ms: f64,
    macs: u64,
    params: u64,
}

fn bytes(g: &Graph, o: graph_ir::Outlet) -> u64 {
    g.fact(o).map_or(0, |f| f.shape.iter().product::<usize>() as u64 * 4)
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
    let s = analyze(g)?;
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
    let fastest = original
        .iter()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map(|(p, _)| p.clone())
        .unwrap_or_default();
    let primary = fastest.clone();
    let mut report = SearchReport::default();
    let mut stages = Vec::new();
    let split = match (settings.split_stem, crate::stem_split::chain(g, &s.stem)) {
        (true, Some(chain)) if processors.len() > 1 => crate::stem_split::plan_split(
            g,
            &chain,
            model,
            processors,
            &primary,
            &stem_ms,
            settings.width_multiple,
        )?,
        _ => None,
    };
    let (split, stem_predicted_ms) = split.unwrap_or_else(|| (Vec::new(), stem_ms[&primary]));
    let stem = Part {
        processor: primary.clone(),
        predicted_ms: stem_predicted_ms,
        widened_macs: 0,
        split,
    };
    let mut ideal = stem.predicted_ms + head_ms[&primary];
    let mut in_width = None;
    for stage in &s.stages {
        let sp = plan_stage(
            g,
            stage,
            in_width,
            model,
            processors,
            &primary,
            kinds,
            settings,
            explain,
            &mut report,
        )?;
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
    let head_total = head_ms[&primary] + head_widening.ms;
    let original_macs = g.total_cost().macs;
    let plan_macs = stages
        .iter()
        .fold(original_macs as i64 + head_widening.macs, |m, sp| {
            m + sp.planned_macs() - sp.macs as i64
        })
        .max(0) as u64;
    let plan_ms = stem.predicted_ms + head_total + stages.iter().map(|s| s.predicted_ms).sum::<f64>();
    let best_single = original[&fastest];
    let plan = Plan {
        schema: SCHEMA.into(),
        predicted_by: model.provenance(),
        model: model_label.to_string(),
        model_fingerprint: g.fingerprint(),
        device: model.device().to_string(),
        processors: processors.to_vec(),
        precisions: Default::default(),
        primary: primary.clone(),
        settings: settings.clone(),
        stem,
        stages,
        head: Part {
            processor: primary.clone(),
            predicted_ms: head_total,
            widened_macs: head_widening.macs,
            split: Vec::new(),
        },
        totals: Totals {
            original_ms: original,
            fastest_single: fastest,
            plan_ms,
            ideal_ms: ideal,
            speedup: best_single / plan_ms,
            ideal_speedup: best_single / ideal,
            original_macs,
            plan_macs,
            work_ratio: plan_macs as f64 / original_macs.max(1) as f64,
        },
    };
    Ok((plan, report))
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

/// Depths within the bound (at least 1) and widths at every
/// 1/`width_steps` of the stage width within the bound, rounded to
/// multiples of the settings' `width_multiple`.
fn grid(blocks: usize, width: usize, s: &Settings) -> (Vec<usize>, Vec<usize>) {
    let d_lo = ((s.min_depth * blocks as f64).ceil() as usize).clamp(1, blocks);
    let depths = (d_lo..=blocks).collect();
    let steps = s.width_steps.max(1);
    let mut widths: Vec<usize> = (0..=steps)
        .map(|i| scale(width, i as f64 / steps as f64, s.width_multiple))
        .filter(|w| *w as f64 >= s.min_width * width as f64 - 1e-9 && *w <= width)
        .collect();
    widths.dedup();
    if widths.is_empty() {
        widths.push(width);
    }
    (depths, widths)
}

/// Plans one stage whose input is `in_width` channels wide when an earlier
/// `concat` merge changed it.
#[allow(clippy::too_many_arguments)]
fn plan_stage(
    g: &Graph,
    stage: &Stage,
    in_width: Option<usize>,
    model: &dyn LatencyModel,
    processors: &[String],
    primary: &str,
    kinds: &HashMap<String, ProcessorKind>,
    settings: &Settings,
    explain: bool,
    report: &mut SearchReport,
) -> Result<StagePlan, BranchError> {
    let nodes = g.computing(stage.nodes());
    let width = channels(g, stage.output());
    let shape = |o| g.fact(o).map(|f| f.shape.clone()).unwrap_or_default();
    let macs = g.cost_of(&nodes).macs;
    let mut original_ms = BTreeMap::new();
    for p in processors {
        original_ms.insert(p.clone(), model.predict(g, &nodes, p)?.total_ms);
    }
    let seg_ms = original_ms.values().copied().fold(f64::INFINITY, f64::min);
    let widened = match in_width {
        Some(w) => widening(g, stage.input(), w, stage.index, model, primary)?,
        None => Widening::default(),
    };
    let whole_ms = original_ms[primary] + widened.ms;
    let whole = |reason: String, counts: Counts| {
        let mut sp = StagePlan {
            index: stage.index,
            blocks: stage.blocks.len(),
            channels: width,
            input_shape: shape(stage.input()),
            output_shape: shape(stage.output()),
            macs,
            original_ms: original_ms.clone(),
            branches: Vec::new(),
            processor: primary.to_string(),
            reason: Some(reason),
            predicted_ms: whole_ms,
            candidates: counts,
            widened_macs: widened.macs,
            work_ratio: 1.0,
        };
        sp.work_ratio = sp.planned_work_ratio();
        sp
    };
    if processors.len() < 2 {
        return Ok(whole("one processor: nothing to branch".into(), Counts::default()));
    }
    let in_bytes = match in_width {
        Some(w) => bytes(g, stage.input()) / channels(g, stage.input()).max(1) as u64 * w as u64,
        None => bytes(g, stage.input()),
    };
    let out_bytes = bytes(g, stage.output());
    let comm_of = |sub: &[usize]| -> Result<f64, BranchError> {
        let mut worst = 0.0f64;
        for p in sub.iter().map(|&i| &processors[i]).filter(|p| p.as_str() != primary) {
            worst = worst.max(model.comm_ms(primary, p, in_bytes)? + model.comm_ms(p, primary, out_bytes)?);
        }
        Ok(worst)
    };
    let cheapest = (0..processors.len())
        .flat_map(|a| ((a + 1)..processors.len()).map(move |b| [a, b]))
        .map(|pair| comm_of(&pair))
        .collect::<Result<Vec<f64>, _>>()?
        .into_iter()
        .fold(f64::INFINITY, f64::min);
    if cheapest > settings.alpha * seg_ms {
        return Ok(whole(
            format!(
                "Eq. 4: communication {cheapest:.3} ms > alpha {} x segment {seg_ms:.3} ms",
                settings.alpha
            ),
            Counts::default(),
        ));
    }
    let (depths, widths) = grid(stage.blocks.len(), width, settings);
    let mut bodies: Vec<(usize, usize, Graph)> = Vec::new();
    let mut unbuilt = None;
    for &d in &depths {
        for &w in &widths {
            let spec = BranchSpec {
                depth: d,
                width: w,
                project_to: None,
                weights: false,
                multiple: settings.width_multiple,
            };
            match build_branch_at(g, stage, &spec, in_width, 0, "") {
                Ok(b) => bodies.push((d, w, b)),
                Err(e @ BranchError::Unsupported { .. }) => return Ok(whole(e.to_string(), Counts::default())),
                Err(BranchError::Graph(e)) => {
                    unbuilt.get_or_insert(format!(
                        "stage {}: a branch {d} blocks deep and {w} channels wide does not build: {e}",
                        stage.index
                    ));
                }
                Err(e) => return Err(e),
            }
        }
    }
    if bodies.is_empty()
        && let Some(reason) = unbuilt
    {
        return Ok(whole(reason, Counts::default()));
    }
    model.prepare(&bodies.iter().map(|b| &b.2).collect::<Vec<_>>(), processors)?;
    let mut options: Vec<Vec<Option_>> = Vec::new();
    for p in processors {
        let mut list = Vec::new();
        for (d, w, b) in &bodies {
            let cost = b.total_cost();
            list.push(Option_ {
                depth: *d,
                width: *w,
                body_ms: model.predict_graph(b, p)?.total_ms,
                macs: cost.macs,
                params: cost.params,
            });
        }
        options.push(list);
    }
    let hw: usize = shape(stage.output()).iter().skip(2).product();
    let mut proj_cache: HashMap<(usize, usize, usize), (f64, u64)> = HashMap::new();
    let mut proj = |pi: usize, cin: usize, cout: usize| -> Result<(f64, u64), BranchError> {
        if let Some(v) = proj_cache.get(&(pi, cin, cout)) {
            return Ok(*v);
        }
        let mut b = Graph::new("proj");
        let out_shape = shape(stage.output());
        let x = b.add_input("x", graph_ir::Fact::f32(vec![1, cin, out_shape[2], out_shape[3]]))?;
        let y = project(&mut b, x, cout, false, 0, "p")?;
        b.set_outputs(vec![("y".into(), y)])?;
        let v = (model.predict_graph(&b, &processors[pi])?.total_ms, b.total_cost().macs);
        proj_cache.insert((pi, cin, cout), v);
        Ok(v)
    };
    let comm_in = processors
        .iter()
        .map(|p| {
            if p == primary {
                Ok(0.0)
            } else {
                model.comm_ms(primary, p, in_bytes)
            }
        })
        .collect::<Result<Vec<f64>, _>>()?;
    if settings.merge == Merge::Concat
        && let Err(e @ BranchError::Unsupported { .. }) =
            widening(g, stage.output(), width, stage.index, model, primary)
    {
        return Ok(whole(e.to_string(), Counts::default()));
    }
    let mut after_ms: HashMap<usize, f64> = HashMap::new();
    let stage_macs = (macs as i64 + widened.macs).max(1) as f64;
    let mut counts = Counts::default();
    let mut kept: Vec<(f64, f64, Vec<BranchPlan>, f64)> = Vec::new();
    let per = options[0].len();
    let (mut removed_eq5, mut removed_cap) = (0u64, 0u64);
    for mask in 1usize..(1 << processors.len()) {
        if mask.count_ones() < 2 {
            continue;
        }
        let sub: Vec<usize> = (0..processors.len()).filter(|i| mask & (1 << i) != 0).collect();
        let n = sub.len();
        let speed: Vec<f64> = sub
            .iter()
            .map(|&i| 1.0 / original_ms[&processors[i]].max(1e-12))
            .collect();
        let speed_sum: f64 = speed.iter().sum();
        let mut idx = vec![0usize; n];
        loop {
            counts.considered += 1;
            let chosen: Vec<&Option_> = (0..n).map(|i| &options[sub[i]][idx[i]]).collect();
            let mut branches = Vec::with_capacity(n);
            let mut total_macs = 0u64;
            let mut stage_ms = 0.0f64;
            let mut removed: Option<Removal> = None;
            let split = shares(
                width,
                &chosen.iter().map(|o| o.width).collect::<Vec<_>>(),
                settings.width_multiple,
            );
            for (i, o) in chosen.iter().enumerate() {
                let share = match settings.merge {
                    Merge::Project => Some(split[i]),
                    Merge::Concat => None,
                };
                let (proj_ms, proj_macs) = match share {
                    Some(c) => proj(sub[i], o.width, c)?,
                    None => (0.0, 0),
                };
                let run_ms = o.body_ms + proj_ms;
                if removed.is_none() && run_ms > settings.beta * seg_ms {
                    removed = Some(Removal::Eq5 {
                        processor: sub[i],
                        ms: run_ms,
                    });
                }
                let p = &processors[sub[i]];
                let out_b = (share.unwrap_or(o.width) * hw * 4) as u64;
                let comm = if p == primary {
                    0.0
                } else {
                    comm_in[sub[i]] + model.comm_ms(p, primary, out_b)?
                };
                stage_ms = stage_ms.max(run_ms + comm);
                total_macs += o.macs + proj_macs;
                branches.push(BranchPlan {
                    processor: p.clone(),
                    depth: o.depth,
                    width: o.width,
                    project_to: share,
                    macs: o.macs + proj_macs,
                    params: o.params,
                    predicted_ms: run_ms + comm,
                });
            }
            let ratio = total_macs as f64 / stage_macs;
            if removed.is_none() && !(settings.capacity[0]..=settings.capacity[1]).contains(&ratio) {
                removed = Some(Removal::Capacity { ratio });
            }
            match &removed {
                Some(Removal::Eq5 { .. }) => removed_eq5 += 1,
                Some(Removal::Capacity { .. }) => removed_cap += 1,
                None => {
                    counts.kept += 1;
                    let eq6: f64 = branches
                        .iter()
                        .zip(&speed)
                        .map(|(b, s)| (b.macs as f64 / total_macs.max(1) as f64 - s / speed_sum).abs())
                        .sum();
                    let pref: f64 = branches
                        .iter()
                        .map(|b| match kinds.get(&b.processor) {
                            Some(ProcessorKind::Gpu | ProcessorKind::Dsp | ProcessorKind::Npu) => {
                                1.0 - b.width as f64 / width as f64
                            }
                            _ => 1.0 - b.depth as f64 / stage.blocks.len() as f64,
                        })
                        .sum();
                    let tie = eq6 + 0.5 * pref;
                    let out_width: usize = branches.iter().map(|b| b.width).sum();
                    let after = match settings.merge {
                        Merge::Concat if out_width != width => match after_ms.get(&out_width) {
                            Some(v) => *v,
                            None => {
                                let v = widening(g, stage.output(), out_width, stage.index, model, primary)?.ms;
                                after_ms.insert(out_width, v);
                                v
                            }
                        },
                        _ => 0.0,
                    };
                    kept.push((stage_ms + after, tie, branches.clone(), stage_ms));
                }
            }
            if explain {
                report.candidates.push(Candidate {
                    stage: stage.index,
                    branches: branches
                        .iter()
                        .map(|b| (b.processor.clone(), b.depth, b.width))
                        .collect(),
                    branch_macs: branches.iter().map(|b| b.macs).collect(),
                    predicted_ms: stage_ms,
                    macs_ratio: ratio,
                    removed_by: removed.map(|r| r.describe(processors, settings, seg_ms)),
                });
            }
            let mut k = 0;
            loop {
                idx[k] += 1;
                if idx[k] < per {
                    break;
                }
                idx[k] = 0;
                k += 1;
                if k == n {
                    break;
                }
            }
            if k == n {
                break;
            }
        }
    }
    let fastest_ms = kept.iter().map(|k| k.0).fold(f64::INFINITY, f64::min);
    let best = kept
        .into_iter()
        .filter(|k| k.0 <= fastest_ms * 1.01)
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.total_cmp(&b.0)));
    let Some((ranked, _, branches, ms)) = best else {
        return Ok(whole(
            format!(
                "no candidate met the constraints ({} considered: {removed_eq5} removed by Eq. 5, {removed_cap} by the capacity band)",
                counts.considered
            ),
            counts,
        ));
    };
    if ranked >= whole_ms {
        return Ok(whole(
            format!(
                "the best candidate ({ranked:.3} ms) is not faster than the whole stage on {primary} ({whole_ms:.3} ms)"
            ),
            counts,
        ));
    }
    let mut sp = StagePlan {
        reason: None,
        branches,
        predicted_ms: ms,
        candidates: counts,
        widened_macs: 0,
        ..whole(String::new(), Counts::default())
    };
    sp.work_ratio = sp.planned_work_ratio();
    Ok(sp)
}
