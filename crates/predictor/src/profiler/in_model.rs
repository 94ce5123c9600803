//! Kernels timed inside whole models.
//!
//! A kernel profiled alone runs on inputs its previous run left in the
//! caches, with nothing before or after it; inside a model its inputs come
//! from the kernel before, and memory-bound kernels (adds, pools, concats,
//! small fully connected layers) take several times longer there. This
//! module runs a whole model on tract with every node of the optimised plan
//! timed, gives each plan node's time to the ONNX node whose name is the
//! longest dot-separated prefix of the plan node's name, and sums them per
//! kernel of the predictor's fusion rules, so the kernels come out with the
//! very features prediction computes and can be written as CSV rows of
//! origin `in-model` beside the isolated measurements.

use super::affinity::CoreSet;
use super::csv::Row;
use super::engine::{Engine, TractEngine};
use super::error::ProfilerError;
use super::space::{KernelKind, Origin};
use super::timing::Timing;
use crate::features::{Work, features, work};
use crate::kernels::{FusionRule, OpClass, detect};
use graph_ir::rng::SplitMix64;
use graph_ir::{Graph, Tensor};
use std::collections::HashMap;
use std::time::Instant;

/// One kernel of a model with its times inside that model.
#[derive(Clone, Debug)]
pub struct InModelKernel {
    /// The kernel's first node.
    pub name: String,
    pub class: OpClass,
    /// Named by [`crate::features::feature_names`] of `class`.
    pub features: Vec<f64>,
    pub work: Work,
    /// Per run, the sum of the plan nodes given to the kernel.
    pub timing: Timing,
}

/// A model's kernels timed inside it.
#[derive(Clone, Debug)]
pub struct InModelTimes {
    pub kernels: Vec<InModelKernel>,
    /// The whole runs (with the per-node timers).
    pub run: Timing,
    /// Median per run of the time on plan nodes that match no kernel.
    pub unattributed_ms: f64,
}

impl InModelKernel {
    /// The kernel as a CSV row of origin `in-model`; `None` for classes the
    /// profiler has no kind for (their figures stay analytic).
    pub fn row(&self, engine: &TractEngine, cores: &CoreSet, round: u32) -> Option<Row> {
        let kind = KernelKind::of_class(self.class)?;
        Some(Row {
            kind,
            round,
            origin: Origin::InModel,
            features: self.features.clone(),
            flops: self.work.flops,
            bytes: self.work.bytes,
            median_ms: self.timing.median_ms,
            p10_ms: self.timing.p10_ms,
            p90_ms: self.timing.p90_ms,
            reps: self.timing.reps,
            engine: engine.name().into(),
            threads: engine.threads(),
            cores: cores.clone(),
        })
    }
}

fn engine_error(model: &str, source: super::error::EngineError) -> ProfilerError {
    ProfilerError::Engine {
        kernel: format!("model {model}"),
        source,
    }
}

/// Runs `g` (weights it lacks drawn from a fixed seed, inputs `inputs`)
/// `warmup` times untimed and `reps` times with every plan node timed, and
/// returns its kernels under `rules` with their in-model times.
pub fn time_kernels(
    engine: &TractEngine,
    g: &Graph,
    inputs: &[Tensor],
    rules: &[FusionRule],
    warmup: usize,
    reps: usize,
) -> Result<InModelTimes, ProfilerError> {
    let model = g.name.clone();
    let mut filled = g.clone();
    filled.fill_missing_weights(7);
    let bytes = graph_ir::onnx::export_bytes(&filled).map_err(|source| ProfilerError::Export {
        kernel: format!("model {model}"),
        source: Box::new(source),
    })?;
    let nodes = g.compute_order().map_err(|source| ProfilerError::Build {
        kernel: format!("model {model}"),
        source: Box::new(source),
    })?;
    let kernels = detect(g, &nodes, rules);
    let mut kernel_of_name: HashMap<&str, usize> = HashMap::new();
    for (k, kernel) in kernels.iter().enumerate() {
        for n in &kernel.nodes {
            kernel_of_name.insert(g.node(*n).name.as_str(), k);
        }
    }
    let mut runnable = engine.compile_node_timed(&bytes).map_err(|e| engine_error(&model, e))?;
    runnable.set_inputs(inputs).map_err(|e| engine_error(&model, e))?;
    let owner: Vec<Option<usize>> = runnable
        .node_names()
        .iter()
        .map(|name| longest_prefix(name, &kernel_of_name))
        .collect();
    let reps = reps.max(1);
    let mut per_kernel = vec![Vec::with_capacity(reps); kernels.len()];
    let mut runs = Vec::with_capacity(reps);
    let mut unattributed = Vec::with_capacity(reps);
    for rep in 0..warmup + reps {
        let start = Instant::now();
        let times = runnable.run_timed().map_err(|e| engine_error(&model, e))?;
        let total = start.elapsed().as_secs_f64() * 1e3;
        if rep < warmup {
            continue;
        }
        let mut sums = vec![0.0; kernels.len()];
        let mut rest = 0.0;
        for (ms, k) in times.iter().zip(&owner) {
            match k {
                Some(k) => sums[*k] += ms,
                None => rest += ms,
            }
        }
        for (samples, ms) in per_kernel.iter_mut().zip(sums) {
            samples.push(ms);
        }
        runs.push(total);
        unattributed.push(rest);
    }
    let timing = |v: Vec<f64>| Timing::of(v).unwrap_or_default();
    let kernels = kernels
        .iter()
        .zip(per_kernel)
        .map(|(k, samples)| InModelKernel {
            name: g.node(k.nodes[0]).name.clone(),
            class: k.class,
            features: features(g, k),
            work: work(g, k),
            timing: timing(samples),
        })
        .collect();
    Ok(InModelTimes {
        kernels,
        run: timing(runs),
        unattributed_ms: timing(unattributed).median_ms,
    })
}

/// Values for `g`'s inputs, uniform in `[0, 1)` from `seed`.
pub fn inputs(g: &Graph, seed: u64) -> Vec<Tensor> {
    let mut rng = SplitMix64::new(seed);
    g.inputs()
        .iter()
        .map(|id| {
            let shape = g.node(*id).outputs[0].shape.clone();
            let n = shape.iter().product::<usize>();
            let values: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
            Tensor::from_f32(shape, &values)
        })
        .collect()
}

/// The value of the longest prefix of `name`, cut at dots, that `map` holds.
fn longest_prefix(name: &str, map: &HashMap<&str, usize>) -> Option<usize> {
    let mut cut = name;
    loop {
        if let Some(k) = map.get(cut) {
            return Some(*k);
        }
        cut = &cut[..cut.rfind('.')?];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_nodes_go_to_the_longest_named_prefix() {
        let map: HashMap<&str, usize> = [("conv1", 0), ("conv1.bn", 1), ("/s0/b0/Add", 2)].into_iter().collect();
        assert_eq!(longest_prefix("conv1.pack", &map), Some(0));
        assert_eq!(longest_prefix("conv1.bn.fused", &map), Some(1));
        assert_eq!(longest_prefix("/s0/b0/Add", &map), Some(2));
        assert_eq!(longest_prefix("/s0/b0/Add.broadcast.0", &map), Some(2));
        assert_eq!(longest_prefix("x", &map), None);
        assert_eq!(longest_prefix("conv2.pack", &map), None);
    }
}
