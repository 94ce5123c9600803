//! Heimdall (MobiCom '20): models cut into chunks that fit between two
//! renders, and what its coordinator's policies share. The rendering task
//! itself lives in the [`Scheduler`](crate::Scheduler) (a
//! [`RenderSlot`](crate::core::RenderSlot) per worker), so the same
//! policies run under `serve` and the simulator.

pub mod chunk;
pub mod fifo;
pub mod offload;
pub mod options;
pub mod render_kernel;
pub mod report;
pub mod utility;

use crate::core::units::{ModelUnits, UnitsError, chunked, operators};
use crate::core::workload::Workload;
use crate::core::{Job, View};
use chunk::ChunkError;
use graph_ir::Graph;
use std::collections::HashMap;
use std::ops::Range;
use thiserror::Error;

pub use options::HeimdallOptions;

#[derive(Debug, Error)]
pub enum HeimdallError {
    #[error(transparent)]
    Chunk(#[from] ChunkError),
    #[error("model '{model}': {error}")]
    Units { model: String, error: UnitsError },
    #[error("model '{model}': {got} operator latencies for {processor}, the model has {want} operators")]
    Latencies {
        model: String,
        processor: String,
        got: usize,
        want: usize,
    },
}

/// Why a policy does not fit a workload's rendering task (or its absence).
#[derive(Debug, Error)]
pub enum RenderPolicyError {
    #[error("{file}: policy '{policy}' does not know the workload's render task; use one of {known}")]
    NotRender {
        file: String,
        policy: String,
        known: String,
    },
    #[error("{file}: policy '{policy}' needs a render task ([render] in the workload)")]
    NeedsRender { file: String, policy: String },
    #[error("{file}: policy '{policy}' needs render.offload_to, the processor to offload to")]
    NeedsOffload { file: String, policy: String },
}

/// Checks that a workload with a rendering task takes only the policies
/// that need one (`render_names`, [`crate::registry::Registry::render_names`]),
/// and a workload without one none of them.
pub fn check_policies(render_names: &[&str], w: &Workload, policies: &[String]) -> Result<(), RenderPolicyError> {
    for p in policies {
        let heimdall = render_names.contains(&p.as_str());
        let fail = |file: &str| (file.to_string(), p.clone());
        if w.render.is_some() && !heimdall {
            let (file, policy) = fail(&w.file);
            return Err(RenderPolicyError::NotRender {
                file,
                policy,
                known: render_names.join(", "),
            });
        }
        if w.render.is_none() && heimdall {
            let (file, policy) = fail(&w.file);
            return Err(RenderPolicyError::NeedsRender { file, policy });
        }
        if p.ends_with("-offload") && w.render.as_ref().is_some_and(|r| r.offload_to.is_none()) {
            let (file, policy) = fail(&w.file);
            return Err(RenderPolicyError::NeedsOffload { file, policy });
        }
    }
    Ok(())
}

/// How models are cut for the render processor (every other processor
/// runs a model whole).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ChunkMode {
    /// The whole model: a DNN holds the processor until it finishes.
    Whole,
    /// Model-agnostic chunks of this many operators.
    Ops(usize),
    /// Heimdall's chunks: the fewest that fit `1/fps − render_ms + margin`.
    Budget,
}

impl ChunkMode {
    /// The chunkings `policies` run on, each once, in the order first
    /// needed, after `first`.
    pub fn needed(first: &[ChunkMode], policies: &[String]) -> Vec<ChunkMode> {
        let mut modes = first.to_vec();
        for p in policies {
            if !modes.contains(&ChunkMode::for_policy(p)) {
                modes.push(ChunkMode::for_policy(p));
            }
        }
        modes
    }

    /// The chunking a render-workload policy runs on: `whole` whole
    /// models, `ops5` 5-operator chunks, the utility policies Heimdall's.
    pub fn for_policy(policy: &str) -> ChunkMode {
        match policy {
            "whole" => ChunkMode::Whole,
            "ops5" => ChunkMode::Ops(5),
            _ => ChunkMode::Budget,
        }
    }
}

/// The render task as the chunker needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RenderSpec {
    pub worker: usize,
    pub fps: f64,
    pub render_ms: f64,
    pub margin_ms: f64,
}

/// What the chunker did to one model on one processor.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ChunkReport {
    pub model: String,
    pub processor: String,
    pub operators: usize,
    pub chunks: usize,
    /// Chunks of the paper's greedy cut (the exact cut is used).
    pub greedy_chunks: usize,
    /// Estimated ms of the whole model (sum over its operators).
    pub total_ms: f64,
    /// Estimated ms of the longest chunk.
    pub longest_chunk_ms: f64,
    /// Operators longer than budget + margin alone: (name, ms).
    pub oversized: Vec<(String, f64)>,
}

/// Cuts `g` for every processor: `op_ms[p][i]` is operator `i`'s estimated
/// ms on processor `p` ([`operators`] order; empty where `p` runs nothing).
/// Returns the units (candidates = chunks) and a report per processor.
pub fn chunk_model(
    g: &Graph,
    names: &[String],
    op_ms: &[Vec<f64>],
    render: &RenderSpec,
    mode: ChunkMode,
) -> Result<(ModelUnits, Vec<ChunkReport>), HeimdallError> {
    let ops = operators(g).map_err(|error| HeimdallError::Units {
        model: g.name.clone(),
        error,
    })?;
    let budget = chunk::budget_ms(render.fps, render.render_ms)?;
    let mut cuts: Vec<Vec<Range<usize>>> = Vec::new();
    let mut reports = Vec::new();
    for (p, lat) in op_ms.iter().enumerate() {
        if lat.is_empty() {
            cuts.push(Vec::new());
            continue;
        }
        if lat.len() != ops.len() {
            return Err(HeimdallError::Latencies {
                model: g.name.clone(),
                processor: names[p].clone(),
                got: lat.len(),
                want: ops.len(),
            });
        }
        let whole: Vec<Range<usize>> = std::iter::once(0..ops.len()).collect();
        let (ranges, greedy_chunks, oversized) = if p != render.worker {
            (whole, 1, Vec::new())
        } else {
            match mode {
                ChunkMode::Whole => (whole, 1, Vec::new()),
                ChunkMode::Ops(k) => {
                    let r = chunk::fixed_size(ops.len(), k);
                    let n = r.len();
                    (r, n, Vec::new())
                }
                ChunkMode::Budget => {
                    let shortest = (0..lat.len()).min_by(|x, y| lat[*x].total_cmp(&lat[*y]));
                    if let Some(i) = shortest.filter(|i| lat[*i] > budget + render.margin_ms) {
                        return Err(ChunkError::NothingFits {
                            model: g.name.clone(),
                            op: g.node(ops[i]).name.clone(),
                            processor: names[p].clone(),
                            ms: lat[i],
                            budget_ms: budget,
                            margin_ms: render.margin_ms,
                            fps: render.fps,
                        }
                        .into());
                    }
                    let c = chunk::chunk(lat, budget, render.margin_ms)?;
                    (c.chunks, c.greedy_chunks, c.oversized)
                }
            }
        };
        let sums: Vec<f64> = ranges.iter().map(|r| lat[r.clone()].iter().sum()).collect();
        reports.push(ChunkReport {
            model: g.name.clone(),
            processor: names[p].clone(),
            operators: ops.len(),
            chunks: ranges.len(),
            greedy_chunks,
            total_ms: lat.iter().sum(),
            longest_chunk_ms: sums.iter().copied().fold(0.0, f64::max),
            oversized: oversized
                .iter()
                .map(|i| (g.node(ops[*i]).name.clone(), lat[*i]))
                .collect(),
        });
        cuts.push(ranges);
    }
    let units = chunked(g, &cuts).map_err(|error| HeimdallError::Units {
        model: g.name.clone(),
        error,
    })?;
    Ok((units, reports))
}

/// Estimated ms of each candidate (chunk) on each processor: the sum of its
/// operators' estimates; `table[candidate][processor]`, infinite where the
/// processor cannot run it.
pub fn chunk_estimates(m: &ModelUnits, op_ms: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let starts: Vec<usize> = m
        .units
        .iter()
        .scan(0, |at, u| {
            let s = *at;
            *at += u.nodes.len();
            Some(s)
        })
        .collect();
    m.candidates
        .iter()
        .map(|c| {
            let from = starts[c.first];
            let to = starts[c.last] + m.units[c.last].nodes.len();
            (0..op_ms.len())
                .map(|p| {
                    if c.support.contains(p) && op_ms[p].len() >= to {
                        op_ms[p][from..to].iter().sum()
                    } else {
                        f64::INFINITY
                    }
                })
                .collect()
        })
        .collect()
}

/// The chunk starting at unit `from` of `m` that `worker` runs, if any.
pub fn chunk_at(m: &ModelUnits, from: usize, worker: usize) -> Option<usize> {
    m.candidates_from(from)
        .iter()
        .filter(|c| **c != crate::core::units::NO_CANDIDATE)
        .map(|c| *c as usize)
        .find(|c| m.candidates[*c].support.contains(worker))
}

/// The chunks `worker` runs from unit `from` to the end of its region, in
/// order (`None` where one is missing).
pub fn chunks_on(m: &ModelUnits, from: usize, worker: usize) -> Option<Vec<usize>> {
    let end = m.regions.get(m.units.get(from)?.region)?.units.end;
    let mut out = Vec::new();
    let mut u = from;
    while u < end {
        let c = chunk_at(m, u, worker)?;
        out.push(c);
        u = m.candidates[c].last + 1;
    }
    Some(out)
}

/// The chunk of `job` starting at its next unit of `region` that `worker`
/// runs, if there is one.
pub fn chunk_from(view: &View, job: &Job, region: usize, worker: usize) -> Option<usize> {
    let m = &view.models[job.spec.model];
    chunk_at(m, job.next_unit(m, region), worker)
}

/// Estimated ms of the rest of `job` (all regions) chunk by chunk on
/// `worker` (infinite where a chunk is missing).
pub fn remaining_ms(view: &View, job: &Job, worker: usize) -> f64 {
    let m = &view.models[job.spec.model];
    let mut sum = 0.0;
    for (r, region) in m.regions.iter().enumerate() {
        let next = job.next_unit(m, r);
        if next >= region.units.end {
            continue;
        }
        let Some(chunks) = chunks_on(m, next, worker) else {
            return f64::INFINITY;
        };
        sum += chunks
            .iter()
            .map(|c| view.estimator.estimate(job.spec.model, *c, worker))
            .sum::<f64>();
    }
    sum
}

/// Which worker each model runs on (its home), and where each started job
/// stays until it completes.
#[derive(Clone, Debug)]
pub struct Placement {
    pub home: Vec<usize>,
    started: HashMap<u64, usize>,
}

impl Placement {
    pub fn new(home: Vec<usize>) -> Placement {
        Placement {
            home,
            started: HashMap::new(),
        }
    }

    /// The worker of `job`: where it started, else its model's home.
    pub fn of(&self, job: &Job) -> usize {
        self.started
            .get(&job.id)
            .copied()
            .unwrap_or_else(|| self.home.get(job.spec.model).copied().unwrap_or(0))
    }

    pub fn place(&mut self, job: u64, worker: usize) {
        self.started.entry(job).or_insert(worker);
    }

    pub fn forget(&mut self, job: u64) {
        self.started.remove(&job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::builder::Builder;
    use graph_ir::ops::UnaryOp;

    fn chain(n: usize) -> Graph {
        let mut b = Builder::new("chain");
        let mut y = b.input("x", &[1, 4, 8, 8]).unwrap();
        for i in 0..n {
            y = b.unary(&format!("op{i}"), y, UnaryOp::Relu).unwrap();
        }
        b.finish("y", y).unwrap()
    }

    fn names() -> Vec<String> {
        vec!["gpu".into(), "cpu".into()]
    }

    #[test]
    fn render_processor_gets_budget_chunks_the_cpu_the_whole_model() {
        let g = chain(8);
        let lat = vec![12.0, 12.0, 12.0, 12.0, 20.0, 3.0, 3.0, 3.0];
        let render = RenderSpec {
            worker: 0,
            fps: 30.0,
            render_ms: 2.7,
            margin_ms: 0.0,
        };
        let (m, rep) = chunk_model(&g, &names(), &[lat.clone(), vec![5.0; 8]], &render, ChunkMode::Budget).unwrap();
        assert_eq!(rep[0].chunks, 3, "{rep:?}");
        assert_eq!(rep[1].chunks, 1);
        let est = chunk_estimates(&m, &[lat, vec![5.0; 8]]);
        let gpu: Vec<f64> = est.iter().map(|e| e[0]).filter(|e| e.is_finite()).collect();
        assert_eq!(gpu, [24.0, 24.0, 29.0]);
        assert!(est.iter().any(|e| e[1] == 40.0));
        let (_, five) = chunk_model(&g, &names(), &[vec![1.0; 8], vec![1.0; 8]], &render, ChunkMode::Ops(5)).unwrap();
        assert_eq!(five[0].chunks, 2);
    }

    #[test]
    fn a_long_operator_is_its_own_chunk_and_a_model_that_cannot_fit_is_named() {
        let g = chain(3);
        let render = RenderSpec {
            worker: 0,
            fps: 30.0,
            render_ms: 2.7,
            margin_ms: 5.0,
        };
        let (_, rep) = chunk_model(
            &g,
            &names(),
            &[vec![1.0, 40.0, 1.0], vec![]],
            &render,
            ChunkMode::Budget,
        )
        .unwrap();
        assert_eq!(rep[0].chunks, 3);
        assert_eq!(rep[0].oversized, [("op1".to_string(), 40.0)]);
        let e = chunk_model(
            &g,
            &names(),
            &[vec![50.0, 40.0, 45.0], vec![]],
            &render,
            ChunkMode::Budget,
        )
        .unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("'op1'") && s.contains("40.00 ms") && s.contains("gpu"),
            "{s}"
        );
    }
}
