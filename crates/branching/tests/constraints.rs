//! Each constraint of the plan search deciding on its own, with latencies
//! from a model written here: a processor runs `rate` MMACs per ms, and any
//! hand-off between two processors costs a fixed `comm` ms. What the
//! search must do is computed here from those two numbers.

mod common;

use branching::plan::{Merge, Plan, Settings};
use branching::{Candidate, search};
use common::resnet;
use graph_ir::analysis::analyze;
use graph_ir::ops::Op;
use graph_ir::{Graph, NodeId};
use predictor::profile::ProcessorKind;
use predictor::{LatencyModel, PredictError, Prediction};
use std::collections::HashMap;

struct Rates {
    rate: Vec<(&'static str, f64)>,
    comm: f64,
}

impl Rates {
    fn rate(&self, p: &str) -> f64 {
        self.rate.iter().find(|(n, _)| *n == p).map_or(f64::NAN, |r| r.1)
    }
}

impl LatencyModel for Rates {
    fn device(&self) -> &str {
        "rates"
    }
    fn processors(&self) -> Vec<String> {
        self.rate.iter().map(|(n, _)| n.to_string()).collect()
    }
    fn predict(&self, g: &Graph, nodes: &[NodeId], processor: &str) -> Result<Prediction, PredictError> {
        Ok(Prediction {
            processor: processor.to_string(),
            total_ms: g.cost_of(nodes).macs as f64 / 1e6 / self.rate(processor),
            subgraph_overhead_ms: 0.0,
            kernels: Vec::new(),
            calibration: None,
        })
    }
    fn comm_ms(&self, from: &str, to: &str, _bytes: u64) -> Result<f64, PredictError> {
        Ok(if from == to { 0.0 } else { self.comm })
    }
}

/// MMACs of each stage of `g`, counted here from the graph.
fn stage_mmacs(g: &Graph) -> Vec<f64> {
    analyze(g)
        .expect("stages")
        .stages
        .iter()
        .map(|s| {
            let nodes: Vec<NodeId> = s
                .nodes()
                .into_iter()
                .filter(|id| !matches!(g.node(*id).op, Op::Input(_) | Op::Const(_)))
                .collect();
            g.cost_of(&nodes).macs as f64 / 1e6
        })
        .collect()
}

/// Constraints that decide nothing unless a test tightens one.
fn loose() -> Settings {
    Settings {
        alpha: 1e6,
        beta: 1e6,
        min_depth: 0.5,
        min_width: 0.5,
        capacity: [0.01, 100.0],
        merge: Merge::Project,
        width_multiple: 8,
        width_steps: 16,
        split_stem: true,
    }
}

fn plan(model: &Rates, settings: &Settings, kinds: &HashMap<String, ProcessorKind>) -> (Plan, Vec<Candidate>) {
    let procs: Vec<String> = model.processors();
    let (plan, report) = search(&resnet(), "r", model, &procs, kinds, settings, true).expect("search");
    (plan, report.candidates)
}

fn reason(plan: &Plan, stage: usize) -> String {
    plan.stages[stage].reason.clone().unwrap_or_default()
}

#[test]
fn eq4_keeps_a_stage_whole_exactly_when_communication_exceeds_alpha_times_the_segment() {
    let model = Rates {
        rate: vec![("a", 1.0), ("b", 1.0)],
        comm: 0.05,
    };
    let seg = stage_mmacs(&resnet());
    for (stage, mmacs) in seg.iter().enumerate() {
        // One hand-off to b and one back: 2 x comm; the segment takes mmacs / 1 ms.
        let threshold = 2.0 * model.comm / mmacs;
        let below = plan(
            &model,
            &Settings {
                alpha: 0.99 * threshold,
                ..loose()
            },
            &HashMap::new(),
        )
        .0;
        assert!(
            reason(&below, stage).starts_with("Eq. 4"),
            "stage {stage}: {}",
            reason(&below, stage)
        );
        let above = plan(
            &model,
            &Settings {
                alpha: 1.01 * threshold,
                ..loose()
            },
            &HashMap::new(),
        )
        .0;
        assert!(
            !above.stages[stage].branches.is_empty(),
            "stage {stage}: {}",
            reason(&above, stage)
        );
    }
}

#[test]
fn eq5_removes_exactly_the_candidates_with_a_branch_slower_than_beta_times_the_segment() {
    let model = Rates {
        rate: vec![("a", 2.0), ("b", 1.0)],
        comm: 0.0,
    };
    let seg: Vec<f64> = stage_mmacs(&resnet()).iter().map(|m| m / 2.0).collect();
    let (free, _) = plan(&model, &loose(), &HashMap::new());
    let slowest = free.stages[0]
        .branches
        .iter()
        .map(|b| b.predicted_ms)
        .fold(0.0, f64::max);
    let beta = 0.999 * slowest / seg[0];
    let (tight, candidates) = plan(&model, &Settings { beta, ..loose() }, &HashMap::new());
    let mut removed = 0;
    for c in candidates.iter().filter(|c| c.stage == 0) {
        let worst = c
            .branches
            .iter()
            .zip(&c.branch_macs)
            .map(|((p, _, _), m)| *m as f64 / 1e6 / model.rate(p))
            .fold(0.0, f64::max);
        let eq5 = worst > beta * seg[0];
        removed += eq5 as usize;
        assert_eq!(
            c.removed_by.as_deref().is_some_and(|r| r.starts_with("Eq. 5")),
            eq5,
            "{c:?}: slowest branch {worst} ms, bound {} ms",
            beta * seg[0]
        );
    }
    assert!(removed > 0);
    let chosen = &tight.stages[0];
    if chosen.branches.is_empty() {
        assert!(reason(&tight, 0).contains("removed by Eq. 5"), "{}", reason(&tight, 0));
    } else {
        assert_ne!(chosen.branches, free.stages[0].branches, "beta must change the plan");
        for b in &chosen.branches {
            assert!(b.predicted_ms <= beta * seg[0] + 1e-9, "{b:?}");
        }
    }
}

#[test]
fn the_capacity_band_decides_how_much_work_a_branched_stage_keeps() {
    let model = Rates {
        rate: vec![("a", 1.0), ("b", 1.0)],
        comm: 0.0,
    };
    let ratio = |p: &Plan, s: usize| {
        let st = &p.stages[s];
        st.branches.iter().map(|b| b.macs).sum::<u64>() as f64 / st.macs as f64
    };
    let (free, _) = plan(&model, &loose(), &HashMap::new());
    assert!(
        ratio(&free, 1) < 0.8,
        "without the band the least work wins: {}",
        ratio(&free, 1)
    );
    let band = [0.8, 1.2];
    let (banded, candidates) = plan(
        &model,
        &Settings {
            capacity: band,
            ..loose()
        },
        &HashMap::new(),
    );
    for s in 0..banded.stages.len() {
        let r = ratio(&banded, s);
        assert!((band[0]..=band[1]).contains(&r), "stage {s}: {r}");
    }
    for c in &candidates {
        let outside = !(band[0]..=band[1]).contains(&c.macs_ratio);
        assert_eq!(
            c.removed_by.as_deref().is_some_and(|r| r.starts_with("capacity")),
            outside,
            "{c:?}"
        );
    }
    let (none, _) = plan(
        &model,
        &Settings {
            capacity: [50.0, 100.0],
            ..loose()
        },
        &HashMap::new(),
    );
    for s in 0..none.stages.len() {
        assert!(
            reason(&none, s).contains("by the capacity band"),
            "{}",
            reason(&none, s)
        );
    }
}

fn tie_score(c: &Candidate, model: &Rates, kinds: &HashMap<String, ProcessorKind>, blocks: usize, width: usize) -> f64 {
    let total: u64 = c.branch_macs.iter().sum();
    let speed_sum: f64 = c.branches.iter().map(|(p, _, _)| model.rate(p)).sum();
    let eq6: f64 = c
        .branches
        .iter()
        .zip(&c.branch_macs)
        .map(|((p, _, _), m)| (*m as f64 / total as f64 - model.rate(p) / speed_sum).abs())
        .sum();
    let pref: f64 = c
        .branches
        .iter()
        .map(|(p, d, w)| match kinds.get(p) {
            Some(ProcessorKind::Gpu) => 1.0 - *w as f64 / width as f64,
            _ => 1.0 - *d as f64 / blocks as f64,
        })
        .sum();
    eq6 + 0.5 * pref
}

#[test]
fn among_candidates_within_one_percent_eq6_and_the_scaling_preference_decide() {
    // Equal speeds: a candidate and its mirror (a's branch on b and b's on
    // a) take the same time and meet Eq. 6 equally; only the scaling
    // preference (full depth on the CPU, full width on the GPU) tells them
    // apart, so swapping the kinds must mirror the plan.
    let model = Rates {
        rate: vec![("a", 1.0), ("b", 1.0)],
        comm: 0.0,
    };
    let g = resnet();
    let stages = analyze(&g).expect("stages").stages;
    let settings = Settings {
        capacity: [0.8, 1.2],
        ..loose()
    };
    let kinds = |a: ProcessorKind, b: ProcessorKind| HashMap::from([("a".to_string(), a), ("b".to_string(), b)]);
    let mut chosen_per_kinds = Vec::new();
    let mut decided = 0;
    for kinds in [
        kinds(ProcessorKind::Cpu, ProcessorKind::Gpu),
        kinds(ProcessorKind::Gpu, ProcessorKind::Cpu),
    ] {
        let (p, candidates) = plan(&model, &settings, &kinds);
        let mut chosen_stages = Vec::new();
        for (s, stage) in stages.iter().enumerate() {
            let plan_stage = &p.stages[s];
            let kept: Vec<&Candidate> = candidates
                .iter()
                .filter(|c| c.stage == stage.index && c.removed_by.is_none())
                .collect();
            let fastest = kept.iter().map(|c| c.predicted_ms).fold(f64::INFINITY, f64::min);
            let near: Vec<&&Candidate> = kept.iter().filter(|c| c.predicted_ms <= 1.01 * fastest).collect();
            let score = |c: &Candidate| tie_score(c, &model, &kinds, stage.blocks.len(), plan_stage.channels);
            let best = near
                .iter()
                .min_by(|x, y| {
                    score(x)
                        .total_cmp(&score(y))
                        .then(x.predicted_ms.total_cmp(&y.predicted_ms))
                })
                .expect("a kept candidate");
            decided += near.iter().any(|c| (score(c) - score(best)).abs() > 1e-9) as usize;
            let chosen: Vec<(String, usize, usize)> = plan_stage
                .branches
                .iter()
                .map(|b| (b.processor.clone(), b.depth, b.width))
                .collect();
            assert_eq!(chosen, best.branches, "stage {s}, kinds {kinds:?}");
            chosen_stages.push(chosen);
        }
        chosen_per_kinds.push(chosen_stages);
    }
    let mut mirrored = 0;
    for (one, other) in chosen_per_kinds[0].iter().zip(&chosen_per_kinds[1]) {
        let shapes = |c: &[(String, usize, usize)]| c.iter().map(|(_, d, w)| (*d, *w)).collect::<Vec<_>>();
        let mut flipped = shapes(other);
        flipped.reverse();
        assert_eq!(
            shapes(one),
            flipped,
            "swapping the kinds must mirror the stage: {one:?} vs {other:?}"
        );
        mirrored += (shapes(one) != shapes(other)) as usize;
    }
    assert!(decided > 0, "in no stage did the tie-break have a choice to make");
    assert!(mirrored > 0, "no stage had two different branches to mirror");
}

#[test]
fn a_stage_whose_best_candidate_is_not_faster_than_the_whole_stays_whole() {
    let model = Rates {
        rate: vec![("a", 1.0), ("b", 1.0)],
        comm: 10.0,
    };
    let seg = stage_mmacs(&resnet());
    assert!(
        seg.iter().all(|m| 2.0 * 10.0 > *m),
        "the hand-offs alone must outlast a stage"
    );
    let (p, _) = plan(&model, &loose(), &HashMap::new());
    for s in 0..p.stages.len() {
        assert!(p.stages[s].branches.is_empty());
        assert!(
            reason(&p, s).contains("not faster than the whole stage"),
            "{}",
            reason(&p, s)
        );
    }
    let (cheap, _) = plan(&Rates { comm: 0.0, ..model }, &loose(), &HashMap::new());
    assert!(cheap.branched_stages() > 0);
}

#[test]
fn width_steps_set_the_branch_widths_the_search_tries() {
    let model = Rates {
        rate: vec![("a", 1.0), ("b", 1.0)],
        comm: 0.0,
    };
    // Stage 1 is 32 channels wide; with a width multiple of 1 and widths
    // down to half the stage's, N steps try 16, 16 + 32/N, ..., 32.
    for steps in [4usize, 8, 16, 32] {
        let (_, candidates) = plan(
            &model,
            &Settings {
                width_multiple: 1,
                width_steps: steps,
                ..loose()
            },
            &HashMap::new(),
        );
        let mut tried: Vec<usize> = candidates
            .iter()
            .filter(|c| c.stage == 1)
            .flat_map(|c| c.branches.iter().map(|b| b.2))
            .collect();
        tried.sort_unstable();
        tried.dedup();
        let expected: Vec<usize> = (steps / 2..=steps).map(|i| 32 * i / steps).collect();
        assert_eq!(tried, expected, "{steps} steps");
    }
}
