//! Kernels timed inside whole models.
//!
//! A kernel profiled alone runs on inputs its previous run left in the
//! caches, with nothing before or after it; inside a model its inputs come
//! from the kernel before, and memory-bound kernels (pools, concats, small
//! fully connected layers) take longer there. This module runs a whole
//! model on tract with every node of the optimised plan timed, gives each
//! plan node's time to the ONNX node whose name is the longest
//! dot-separated prefix of the plan node's name (a matrix product to the
//! kernel of its first operand, see `owners`; 1x1 siblings share theirs,
//! see `pointwise_siblings`), and sums them per kernel of the predictor's
//! fusion rules, so the kernels come out with the very features prediction
//! computes and can be written as CSV rows of origin `in-model` beside the
//! isolated measurements.

use super::csv::Row;
use super::error::ProfilerError;
use super::space::{KernelKind, Origin};
use super::timing::Timing;
use crate::features::{Work, features, work};
use crate::kernels::{FusionRule, Kernel, OpClass, detect};
use engine::host::CoreSet;
use engine::{Engine, PlanNode, TractEngine};
use graph_ir::ops::Op;
use graph_ir::rng::SplitMix64;
use graph_ir::{Graph, Outlet, Tensor};
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

fn engine_error(model: &str, source: engine::EngineError) -> ProfilerError {
    ProfilerError::Engine {
        kernel: format!("model {model}"),
        error: source,
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
        error: Box::new(source),
    })?;
    let nodes = g.compute_order().map_err(|source| ProfilerError::Build {
        kernel: format!("model {model}"),
        error: Box::new(source),
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
    let owner = owners(runnable.plan_nodes(), &kernel_of_name, |k| {
        matches!(kernels[k].class, OpClass::Conv | OpClass::DwConv | OpClass::Fc)
    });
    let siblings = pointwise_siblings(g, &kernels);
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
        for group in &siblings {
            let total: f64 = group.iter().map(|(k, _)| sums[*k]).sum();
            for (k, share) in group {
                sums[*k] = total * share;
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

/// The kernel each plan node's time goes to: the one named by the longest
/// prefix of its name, except for a matrix product whose first operand
/// belongs to a kernel `computes_products` accepts (a convolution or fully
/// connected layer). tract names a product that absorbed the ops after it
/// (bias, a residual add, an activation) after the last of them, which may
/// belong to another kernel: a 1x1 convolution fused with the residual add
/// after it is named after the add, and its time is the convolution's.
fn owners(
    plan: &[PlanNode],
    kernel_of_name: &HashMap<&str, usize>,
    computes_products: impl Fn(usize) -> bool,
) -> Vec<Option<usize>> {
    let mut owner: Vec<Option<usize>> = Vec::with_capacity(plan.len());
    for node in plan {
        let by_name = longest_prefix(&node.name, kernel_of_name);
        let by_operand = (node.op == "OptMatMul")
            .then(|| node.inputs.first().and_then(|i| owner.get(*i).copied().flatten()))
            .flatten()
            .filter(|k| computes_products(*k));
        owner.push(by_operand.or(by_name));
    }
    owner
}

/// Groups of kernels led by 1x1 convolutions (not grouped) that read the
/// same value, each kernel with its share of the group's FLOPs. tract runs
/// such siblings (an Inception block's 1x1 branch and the 1x1 reductions
/// before its 3x3 and 5x5) as one matrix product, whose time its plan gives
/// to one of them; the group's time is shared out by work instead.
fn pointwise_siblings(g: &Graph, kernels: &[Kernel]) -> Vec<Vec<(usize, f64)>> {
    let mut by_input: HashMap<Outlet, Vec<usize>> = HashMap::new();
    for (k, kernel) in kernels.iter().enumerate() {
        let node = g.node(kernel.nodes[0]);
        let pointwise = match &node.op {
            Op::Conv(c) => {
                c.group == 1
                    && node
                        .inputs
                        .get(1)
                        .and_then(|w| g.fact(*w))
                        .is_some_and(|w| w.shape.len() == 4 && w.shape[2] == 1 && w.shape[3] == 1)
            }
            _ => false,
        };
        if pointwise {
            by_input.entry(node.inputs[0]).or_default().push(k);
        }
    }
    by_input
        .into_values()
        .filter(|ks| ks.len() > 1)
        .map(|ks| {
            let flops: Vec<f64> = ks.iter().map(|k| work(g, &kernels[*k]).flops as f64).collect();
            let total: f64 = flops.iter().sum();
            ks.into_iter()
                .zip(flops)
                .map(|(k, f)| (k, if total > 0.0 { f / total } else { 0.0 }))
                .collect()
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
