//! Learns an engine's fusion rules from measurements (nn-Meter): two ops
//! count as fused when running them as a chain saves more than half of the
//! cheaper one, `lat(a) + lat(b) - lat(a→b) > 0.5 · min(lat(a), lat(b))`,
//! measured at one fixed shape (HW 28, Cin 64, Cout 128, k 3).

use super::error::ProfilerError;
use super::timing::Bound;
use super::timing::measure;
use crate::forest::SplitMix64;
use crate::kernels::OpClass;
use engine::Engine;
use graph_ir::builder::{Builder, ConvSpec};
use graph_ir::{Graph, GraphError, Outlet, Tensor};
use serde::Serialize;

/// The op pairs measured: every pair a default rule chains.
pub const PAIRS: [(OpClass, OpClass); 6] = [
    (OpClass::Conv, OpClass::Bn),
    (OpClass::Conv, OpClass::Act),
    (OpClass::Bn, OpClass::Act),
    (OpClass::DwConv, OpClass::Bn),
    (OpClass::DwConv, OpClass::Act),
    (OpClass::Add, OpClass::Act),
];

const HW: usize = 28;
const CIN: usize = 64;
const COUT: usize = 128;

/// One measured pair.
#[derive(Clone, Debug, Serialize)]
pub struct PairTiming {
    pub first: OpClass,
    pub second: OpClass,
    pub first_ms: f64,
    pub second_ms: f64,
    pub chain_ms: f64,
}

impl PairTiming {
    /// Milliseconds the chain saves over the two ops run apart.
    pub fn saving_ms(&self) -> f64 {
        self.first_ms + self.second_ms - self.chain_ms
    }

    /// nn-Meter's test: the saving exceeds half of the cheaper op.
    pub fn fused(&self) -> bool {
        self.saving_ms() > 0.5 * self.first_ms.min(self.second_ms)
    }
}

/// Applies `class` to `x` (and, for `add`, to a second input `y`).
fn op(b: &mut Builder, name: &str, class: OpClass, x: Outlet, y: Option<Outlet>) -> Result<Outlet, GraphError> {
    match class {
        OpClass::Conv => b.conv(name, x, ConvSpec::new(COUT, 3, 1)),
        OpClass::DwConv => b.conv(name, x, ConvSpec::new(COUT, 3, 1).group(COUT)),
        OpClass::Bn => b.batch_norm(name, x),
        OpClass::Add => match y {
            Some(y) => b.add(name, x, y),
            None => b.add(name, x, x),
        },
        _ => b.relu(name, x),
    }
}

fn input_channels(class: OpClass) -> usize {
    if class == OpClass::Conv { CIN } else { COUT }
}

/// The graph of `classes` run in sequence (one op or a chain of two).
pub fn chain_graph(classes: &[OpClass]) -> Result<Graph, GraphError> {
    let mut b = Builder::new("fusion");
    let x = b.input("x", &[1, input_channels(classes[0]), HW, HW])?;
    let y = if classes[0] == OpClass::Add {
        Some(b.input("x2", &[1, COUT, HW, HW])?)
    } else {
        None
    };
    let mut out = x;
    for (i, c) in classes.iter().enumerate() {
        out = op(&mut b, &format!("op{i}"), *c, out, if i == 0 { y } else { None })?;
    }
    b.finish("y", out)
}

fn time(engine: &dyn Engine, classes: &[OpClass], warmup: usize, reps: usize, seed: u64) -> Result<f64, ProfilerError> {
    let label: Vec<&str> = classes.iter().map(|c| c.name()).collect();
    let kernel = label.join("→");
    let build = |source: GraphError| ProfilerError::Build {
        kernel: kernel.clone(),
        error: Box::new(source),
    };
    let mut g = chain_graph(classes).map_err(build)?;
    g.fill_missing_weights(seed);
    let bytes = graph_ir::onnx::export_bytes(&g).map_err(|source| ProfilerError::Export {
        kernel: kernel.clone(),
        error: Box::new(source),
    })?;
    let engine_error = |error| ProfilerError::Engine {
        kernel: kernel.clone(),
        error,
    };
    let mut rng = SplitMix64::new(seed);
    let inputs: Vec<Tensor> = g
        .inputs()
        .iter()
        .map(|id| {
            let shape = g.node(*id).outputs[0].shape.clone();
            let v: Vec<f32> = (0..shape.iter().product::<usize>())
                .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
                .collect();
            Tensor::from_f32(shape, &v)
        })
        .collect();
    let bound = Bound::new(engine, &bytes, &inputs).map_err(engine_error)?;
    Ok(measure(|| bound.run(), warmup, reps).map_err(engine_error)?.median_ms)
}

/// Times every pair of [`PAIRS`]: each op alone and the two as a chain.
pub fn measure_pairs(
    engine: &dyn Engine,
    warmup: usize,
    reps: usize,
    seed: u64,
) -> Result<Vec<PairTiming>, ProfilerError> {
    PAIRS
        .iter()
        .map(|&(first, second)| {
            Ok(PairTiming {
                first,
                second,
                first_ms: time(engine, &[first], warmup, reps, seed)?,
                second_ms: time(engine, &[second], warmup, reps, seed)?,
                chain_ms: time(engine, &[first, second], warmup, reps, seed)?,
            })
        })
        .collect()
}

/// Fusion rules from measured pairs: every fused pair, and every chain of
/// three whose two pairs both fused (`conv+bn` and `bn+act` give `conv+bn+act`).
pub fn rules(pairs: &[PairTiming]) -> Vec<String> {
    let fused: Vec<(OpClass, OpClass)> = pairs
        .iter()
        .filter(|p| p.fused())
        .map(|p| (p.first, p.second))
        .collect();
    let mut out = Vec::new();
    for &(a, b) in &fused {
        for &(b2, c) in &fused {
            if b == b2 {
                out.push(format!("{a}+{b}+{c}"));
            }
        }
    }
    out.extend(fused.iter().map(|(a, b)| format!("{a}+{b}")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(first: OpClass, second: OpClass, a: f64, b: f64, ab: f64) -> PairTiming {
        PairTiming {
            first,
            second,
            first_ms: a,
            second_ms: b,
            chain_ms: ab,
        }
    }

    #[test]
    fn the_nn_meter_test_decides_and_chains_are_joined() {
        let pairs = vec![
            pair(OpClass::Conv, OpClass::Bn, 1.0, 0.2, 1.02),
            pair(OpClass::Bn, OpClass::Act, 0.2, 0.1, 0.22),
            pair(OpClass::Add, OpClass::Act, 0.2, 0.1, 0.29),
        ];
        assert!(pairs[0].fused() && pairs[1].fused() && !pairs[2].fused());
        assert_eq!(rules(&pairs), vec!["conv+bn+act", "conv+bn", "bn+act"]);
        for r in rules(&pairs) {
            r.parse::<crate::kernels::FusionRule>().unwrap();
        }
    }

    #[test]
    fn every_pair_builds_alone_and_chained() {
        for (a, b) in PAIRS {
            for classes in [vec![a], vec![b], vec![a, b]] {
                let g = chain_graph(&classes).unwrap();
                assert_eq!(g.outputs().len(), 1);
            }
        }
    }
}
