//! Tests of [`super`]: the fake-quantized forward pass against the
//! quantized file.

use super::*;
use graph_ir::zoo::{ZooOptions, build};
use graph_ir::{NodeId, Outlet};
use predictor::Precision;
use quantize::{Collector, PrecisionMap};
use std::collections::{HashMap, HashSet};

const N: usize = 16;

/// `N` deterministic 3x16x16 inputs in [-1, 1].
fn inputs() -> Vec<f32> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    (0..N * 3 * 16 * 16)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// The model up to `out` (its only output), dead nodes removed.
fn up_to(g: &Graph, out: Outlet) -> Graph {
    let mut cut = g.clone();
    cut.set_outputs(vec![("y".into(), out)]).unwrap();
    cut.prune_dead();
    cut
}

struct Case {
    g: Graph,
    folded: Graph,
    map: PrecisionMap,
    plan: QatPlan,
    unfolded: QatPlan,
    ranges: HashMap<Outlet, (f32, f32)>,
    x: Vec<f32>,
}

impl Case {
    /// Values of the `i`th quantized activation (by the plan's order) from
    /// the unfolded model under fake quantization and from the quantized
    /// folded model run by tract.
    fn at(&self, i: usize) -> (Vec<f32>, Vec<f32>) {
        let f = up_to(&self.folded, self.plan.int8_activations[i].0);
        let acts = quantize::activations_to_calibrate(&f, &self.map).unwrap();
        let ranges: Vec<(f32, f32)> = acts.iter().map(|a| self.ranges[a]).collect();
        let (file, _) = quantize::insert_qdq(&f, &self.map, &ranges).unwrap();
        let mut written = Vec::new();
        scheduler_rt::probe::probe(&file, &[file.outputs()[0].1], &self.x, |_, v| {
            written.extend_from_slice(v)
        })
        .unwrap();
        let g = up_to(&self.g, self.unfolded.int8_activations[i].0);
        let ids: HashSet<NodeId> = g.node_ids().into_iter().collect();
        let mut kept = spec(&self.unfolded);
        kept.activations.retain(|(o, _)| ids.contains(&o.node));
        kept.weights.retain(|(n, _)| ids.contains(n));
        let mut inference = training::Inference::new(&g, &training::Backend::Flex.device()).unwrap();
        inference.set_fake_quant(&kept).unwrap();
        (inference.scores(&self.x, N), written)
    }
}

fn case(name: &str) -> Case {
    let mut g = build(
        name,
        &ZooOptions {
            input_size: 16,
            classes: 10,
        },
    )
    .unwrap();
    g.fill_missing_weights(7);
    for id in g.node_ids() {
        g.annotate(id, graph_ir::keys::PROCESSOR, "cpu");
    }
    let map = PrecisionMap::new([("cpu".to_string(), Precision::Int8)].into(), None);
    let (folded, _) = quantize::fold_bn::fold_batch_norms(&g).unwrap();
    let acts = quantize::activations_to_calibrate(&folded, &map).unwrap();
    let x = inputs();
    let mut collector = Collector::new(Method::MinMax, acts.len());
    scheduler_rt::probe::probe(&folded, &acts, &x, |k, v| collector.observe(0, k, v)).unwrap();
    let ranges: Vec<(f32, f32)> = collector.ranges().into_iter().map(Option::unwrap).collect();
    let plan = quantize::qat_plan(&folded, &map, &ranges).unwrap();
    let unfolded = quantize::unfold_plan(&plan, &folded, &g).unwrap();
    Case {
        ranges: acts.into_iter().zip(ranges).collect(),
        g,
        folded,
        map,
        plan,
        unfolded,
        x,
    }
}

/// Worst and mean difference in steps of `step`.
fn steps(a: &[f32], b: &[f32], step: f32) -> (f32, f32) {
    let d: Vec<f32> = a.iter().zip(b).map(|(x, y)| (x - y).abs() / step).collect();
    (
        d.iter().cloned().fold(0.0, f32::max),
        d.iter().sum::<f32>() / d.len() as f32,
    )
}

fn top1(scores: &[f32]) -> Vec<usize> {
    scores
        .chunks(scores.len() / N)
        .map(|r| (0..r.len()).fold(0, |b, k| if r[k] > r[b] { k } else { b }))
        .collect()
}

/// Training under a plan's fake quantization computes what the
/// quantized file computes: batch norms unfolded in one and folded in
/// the other, float convolutions against tract's run of the Q/DQ file (weights and inputs rounded to their grids). At the
/// first layers the two agree but for rare rounding flips (at the i-th
/// quantized value, at most 0.005·i steps on average; a value
/// within float error of a rounding boundary: a step of the input's
/// grid, re-rounded to the value's, at most two steps of the coarser);
/// deeper, each flip
/// moves later values (random weights amplify them: about twice per
/// convolution), so the scores are held to the top-1 class and to
/// being closer to the file's than the float pass's are.
#[test]
fn the_fake_quantized_forward_pass_matches_the_quantized_file() {
    for name in ["resnet-mini", "mbnet-mini"] {
        let c = case(name);
        for i in 1..=4 {
            let (trained, written) = c.at(i);
            let step = c.plan.int8_activations[i - 1..=i]
                .iter()
                .map(|(_, p)| p.scale)
                .fold(0.0, f32::max);
            let (worst, mean) = steps(&trained, &written, step);
            assert!(mean <= 0.005 * i as f32, "{name} activation {i}: mean {mean} steps");
            assert!(i > 2 || worst <= 2.0001, "{name} activation {i}: worst {worst} steps");
        }
        let last = c.plan.int8_activations.len() - 1;
        assert_eq!(c.plan.int8_activations[last].0, c.folded.outputs()[0].1);
        let step = c.plan.int8_activations[last].1.scale;
        let (trained, written) = c.at(last);
        let float = training::Inference::new(&c.g, &training::Backend::Flex.device())
            .unwrap()
            .scores(&c.x, N);
        let (worst, mean) = steps(&trained, &written, step);
        let (_, float_mean) = steps(&float, &written, step);
        let agree = top1(&trained)
            .iter()
            .zip(top1(&written))
            .filter(|(a, b)| **a == *b)
            .count();
        println!(
            "{name}: scores of the fake-quantized pass vs the file: worst {worst:.2} steps, mean {mean:.3} (float pass: mean {float_mean:.3}); top-1 agrees on {agree}/{N}"
        );
        assert!(mean < float_mean, "{name}: mean {mean} steps, float {float_mean}");
        assert!(agree >= N - 1, "{name}: top-1 agrees on {agree}/{N}");
    }
}
