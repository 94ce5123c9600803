//! The analyzer's evaluator: a decoded plan run through the multi-DNN
//! simulator (the same scheduler, static-plan policy and event loop as
//! `stretch simulate --plan`) over the workload's model groups.

use crate::core::Scheduler;
use crate::core::estimator::{Estimator, EstimatorParams};
use crate::core::report::RunLog;
use crate::core::units::{ModelUnits, from_pieces};
use crate::core::workload::{Arrival, Workload};
use crate::predicted::costs::{Costs, Wanted};
use crate::puzzle::PuzzleError;
use crate::puzzle::chromosome::{Chromosome, LayerGraph, Piece};
use crate::puzzle::score;
use crate::puzzle::static_plan::StaticPlan;
use crate::sim::{Latency, SimOptions, Truth, simulate};
use crate::{ProcSet, policy::Policy};
use graph_ir::{Graph, NodeId};
use std::collections::HashMap;

/// Makespans of one run, per group (ms from the group's tick to its last
/// member's finish, in tick order), and each group's period.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub makespans: Vec<Vec<f64>>,
    pub periods_ms: Vec<f64>,
}

impl Outcome {
    /// The GA's objectives, all minimised: per group, mean then p90 makespan.
    pub fn objectives(&self) -> Vec<f64> {
        self.makespans
            .iter()
            .flat_map(|m| {
                let mean = if m.is_empty() {
                    f64::INFINITY
                } else {
                    m.iter().sum::<f64>() / m.len() as f64
                };
                [mean, graph_ir::stats::quantile(m, 0.9).unwrap_or(f64::NAN)]
            })
            .collect()
    }

    /// The scenario score (Puzzle §6.2).
    pub fn score(&self) -> f64 {
        let groups: Vec<(Vec<f64>, f64)> = self
            .makespans
            .iter()
            .cloned()
            .zip(self.periods_ms.iter().copied())
            .collect();
        score::score(&groups)
    }
}

/// The makespans of a run of `w` (resolved groups): a group request is
/// the set of its members' jobs that arrived at the same tick; one whose
/// members did not all finish counts as infinitely late.
pub fn outcome_from_log(log: &RunLog, w: &Workload) -> Outcome {
    let mut ticks: HashMap<(usize, u64), (usize, f64)> = HashMap::new();
    for c in &log.completed {
        if let crate::core::workload::Arrival::Group { group } = w.apps[c.spec.app].arrival {
            let e = ticks.entry((group, c.spec.arrival_ms.to_bits())).or_insert((0, 0.0));
            e.0 += 1;
            e.1 = e.1.max(c.finish_ms - c.spec.arrival_ms);
        }
    }
    let members: Vec<usize> = (0..w.groups.len()).map(|g| w.group_members(g).len()).collect();
    let mut makespans: Vec<Vec<(f64, f64)>> = vec![Vec::new(); w.groups.len()];
    for ((g, at), (n, ms)) in ticks {
        makespans[g].push((f64::from_bits(at), if n == members[g] { ms } else { f64::INFINITY }));
    }
    for m in &mut makespans {
        m.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    Outcome {
        makespans: makespans
            .into_iter()
            .map(|m| m.into_iter().map(|x| x.1).collect())
            .collect(),
        periods_ms: w.groups.iter().map(|g| g.period_ms.unwrap_or(f64::NAN)).collect(),
    }
}

/// The units of one model's plan: one region per piece, runnable only on
/// the piece's processor ([`from_pieces`]).
pub fn plan_units(g: &Graph, lg: &LayerGraph, pieces: &[Piece]) -> Result<ModelUnits, PuzzleError> {
    let nodes: Vec<(Vec<NodeId>, ProcSet)> = pieces
        .iter()
        .map(|p| {
            (
                p.layers.iter().map(|l| lg.layers[*l]).collect(),
                ProcSet::single(p.processor),
            )
        })
        .collect();
    from_pieces(g, &nodes).map_err(|e| PuzzleError::Model {
        model: g.name.clone(),
        reason: e.to_string(),
    })
}

/// A decoded plan ready to simulate.
#[derive(Clone, Debug)]
pub struct Built {
    pub pieces: Vec<Vec<Piece>>,
    pub units: Vec<ModelUnits>,
    pub truth: Truth,
    /// Per model: its rank (0 first).
    pub rank: Vec<usize>,
}

/// The models, processors, costs and workload a search works on. App `i`
/// of the workload runs model `i`.
pub struct Problem<'a> {
    pub graphs: &'a [Graph],
    pub layers: &'a [LayerGraph],
    pub names: Vec<String>,
    pub costs: &'a mut dyn Costs,
    /// Groups resolved ([`Workload::resolve_groups`]).
    pub workload: Workload,
    /// Ticks of the slowest group simulated per run.
    pub periods: usize,
    /// Simulated runs so far.
    pub simulations: usize,
}

impl Problem<'_> {
    /// The plan's units (one region per piece) and each piece's time on its
    /// processor: compute plus the hand-off of every value read from a
    /// piece on another processor (the model's own inputs are taken as
    /// already where they are needed), spread as the costs' [`Costs::spread`].
    pub fn build(&mut self, c: &Chromosome) -> Result<Built, PuzzleError> {
        let pieces = c.decode(self.layers);
        self.build_pieces(pieces, c.priority.clone())
    }

    /// [`Problem::build`] from decoded pieces and ranks.
    pub fn build_pieces(&mut self, pieces: Vec<Vec<Piece>>, rank: Vec<usize>) -> Result<Built, PuzzleError> {
        let n = self.names.len();
        let wanted: Vec<Wanted> = pieces
            .iter()
            .enumerate()
            .flat_map(|(m, ps)| {
                let period_ms = self.period_ms(m);
                ps.iter().map(move |p| Wanted {
                    model: m,
                    layers: p.layers.clone(),
                    processor: p.processor,
                    period_ms,
                })
            })
            .collect();
        self.costs.prefetch(&wanted)?;
        let mut units = Vec::with_capacity(pieces.len());
        let mut table = Vec::with_capacity(pieces.len());
        for (m, ps) in pieces.iter().enumerate() {
            let g = &self.graphs[m];
            let lg = &self.layers[m];
            let u = plan_units(g, lg, ps)?;
            let mut home: HashMap<NodeId, usize> = HashMap::new();
            for p in ps {
                for l in &p.layers {
                    home.insert(lg.layers[*l], p.processor);
                }
            }
            let mut rows = Vec::with_capacity(ps.len());
            for (p, cand) in ps.iter().zip(&u.candidates) {
                let mut ms = self.costs.compute_ms(m, &p.layers, p.processor)?;
                for o in &cand.subgraph.inputs {
                    if let Some(from) = home.get(&o.node).filter(|f| **f != p.processor) {
                        let bytes = g.fact(*o).map_or(0, |f| f.bytes() as u64);
                        ms += self.costs.comm_ms(*from, p.processor, bytes)?;
                    }
                }
                let shared = ms * self.costs.shared_factor(p.processor);
                let (alone_shape, shared_shape) = self.costs.spread(p.processor);
                rows.push(
                    (0..n)
                        .map(|w| {
                            if w == p.processor {
                                Latency {
                                    shared_ms: shared,
                                    alone_shape: alone_shape.clone(),
                                    shared_shape: shared_shape.clone(),
                                    ..Latency::exact(ms)
                                }
                            } else {
                                Latency::exact(f64::INFINITY)
                            }
                        })
                        .collect(),
                );
            }
            units.push(u);
            table.push(rows);
        }
        Ok(Built {
            pieces,
            units,
            truth: Truth {
                table,
                overhead_ms: self.costs.dispatch_ms(),
                arrival_lag_quantiles: self.costs.arrival_lag_ms(),
                spread_correlation: (0..n).map(|p| self.costs.spread_correlation(p)).collect(),
                ..Truth::default()
            },
            rank,
        })
    }

    /// How often model `m`'s requests come (its group's period, or its
    /// frame rate's), if periodically.
    fn period_ms(&self, m: usize) -> Option<f64> {
        match self.workload.apps.get(m).map(|a| &a.arrival) {
            Some(Arrival::Group { group }) => self.workload.groups.get(*group).and_then(|g| g.period_ms),
            Some(Arrival::Periodic { fps }) if *fps > 0.0 => Some(1e3 / fps),
            _ => None,
        }
    }

    /// Runs `b` on the workload `w` (groups resolved) under its static plan.
    pub fn simulate(&mut self, b: &Built, w: &Workload) -> Result<Outcome, PuzzleError> {
        let policy = Box::new(StaticPlan::new(b.rank.clone()));
        let units = b.units.clone();
        let truth = &b.truth;
        self.run_policy(units, truth, policy, w)
    }

    /// The simulated run of `b` on `w` (groups resolved), whole.
    pub fn simulate_log(&mut self, b: &Built, w: &Workload) -> Result<RunLog, PuzzleError> {
        let policy = Box::new(StaticPlan::new(b.rank.clone()));
        self.run_log(b.units.clone(), &b.truth, policy, w, false)
    }

    /// Runs `units` with `truth` under `policy` on `w` (groups resolved):
    /// each candidate's estimate is its true time on each processor.
    pub fn run_policy(
        &mut self,
        units: Vec<ModelUnits>,
        truth: &Truth,
        policy: Box<dyn Policy>,
        w: &Workload,
    ) -> Result<Outcome, PuzzleError> {
        self.run(units, truth, policy, w, false).map(|(o, _)| o)
    }

    /// Whether `policy` saturates `w`: every group request within its
    /// period and the score at least [`score::SATURATED`]. The run stops at
    /// the first late request.
    pub fn saturates(
        &mut self,
        units: Vec<ModelUnits>,
        truth: &Truth,
        policy: Box<dyn Policy>,
        w: &Workload,
    ) -> Result<bool, PuzzleError> {
        let (o, missed) = self.run(units, truth, policy, w, true)?;
        Ok(!missed && o.score() >= score::SATURATED)
    }

    fn run(
        &mut self,
        units: Vec<ModelUnits>,
        truth: &Truth,
        policy: Box<dyn Policy>,
        w: &Workload,
        stop_at_first_miss: bool,
    ) -> Result<(Outcome, bool), PuzzleError> {
        let log = self.run_log(units, truth, policy, w, stop_at_first_miss)?;
        let missed = log.completed.iter().any(|c| !c.met_slo());
        Ok((outcome_from_log(&log, w), missed))
    }

    /// `w` simulated for [`Self::periods`] ticks of its slowest group.
    fn horizon(&self, w: &Workload) -> Workload {
        let longest = w.groups.iter().filter_map(|g| g.period_ms).fold(0.0, f64::max);
        let mut w = w.clone();
        if longest > 0.0 {
            w.duration_s = Some(self.periods as f64 * longest / 1e3);
            w.requests = None;
        }
        w
    }

    fn run_log(
        &mut self,
        units: Vec<ModelUnits>,
        truth: &Truth,
        policy: Box<dyn Policy>,
        w: &Workload,
        stop_at_first_miss: bool,
    ) -> Result<RunLog, PuzzleError> {
        let n = self.names.len();
        let mut est = Estimator::new(EstimatorParams::default(), &vec![false; n], &units);
        for (m, u) in units.iter().enumerate() {
            for c in 0..u.candidates.len() {
                for p in u.candidates[c].support.iter().filter(|p| *p < n) {
                    est.set_base(m, c, p, truth.table[m][c][p].alone_ms);
                }
            }
        }
        let slo: Vec<Option<f64>> = (0..w.apps.len()).map(|a| w.group_deadline_ms(a)).collect();
        let w = &self.horizon(w);
        let mut sched = Scheduler::new(units, &self.names, policy, est);
        let options = SimOptions {
            stop_at_first_miss,
            ..SimOptions::default()
        };
        let log = simulate(&mut sched, w, slo, truth, options).map_err(|e| PuzzleError::Model {
            model: "-".into(),
            reason: e.to_string(),
        })?;
        self.simulations += 1;
        Ok(log)
    }

    /// The plan's outcome on the problem's workload.
    pub fn evaluate(&mut self, c: &Chromosome) -> Result<Outcome, PuzzleError> {
        let b = self.build(c)?;
        let w = self.workload.clone();
        self.simulate(&b, &w)
    }

    /// The saturation multiplier of `b` (Puzzle §6.2) to 0.01 up to `max`
    /// ([`score::saturation_coarse_fine`]).
    pub fn saturation(&mut self, b: &Built, max: f64) -> Result<Option<f64>, PuzzleError> {
        self.saturation_with(&b.units, &b.truth, || Box::new(StaticPlan::new(b.rank.clone())), max)
    }

    /// The saturation multiplier of `units` with `truth` under the policy
    /// `policy` makes (a fresh one per trial run).
    pub fn saturation_with(
        &mut self,
        units: &[ModelUnits],
        truth: &Truth,
        policy: impl Fn() -> Box<dyn Policy>,
        max: f64,
    ) -> Result<Option<f64>, PuzzleError> {
        let base = self.workload.clone();
        let mut failed = None;
        let sat = score::saturation_coarse_fine(max, |m| {
            let w = base.with_period_multiplier(m);
            match self.saturates(units.to_vec(), truth, policy(), &w) {
                Ok(yes) => f64::from(u8::from(yes)),
                Err(e) => {
                    failed.get_or_insert(e);
                    0.0
                }
            }
        });
        match failed {
            Some(e) => Err(e),
            None => Ok(sat),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predicted::CostError;
    use crate::predicted::costs::candidate_rows;
    use graph_ir::builder::Builder;
    use graph_ir::ops::UnaryOp;
    use scheduler_rt::support::OpSupport;

    /// Every piece takes 1 ms a layer; processor 0 has a spread, 1 none.
    struct Spread;

    impl Costs for Spread {
        fn compute_ms(&mut self, _model: usize, layers: &[usize], _p: usize) -> Result<f64, CostError> {
            Ok(layers.len() as f64)
        }
        fn comm_ms(&mut self, _from: usize, _to: usize, _bytes: u64) -> Result<f64, CostError> {
            Ok(0.0)
        }
        fn spread(&self, p: usize) -> (Vec<f64>, Vec<f64>) {
            if p == 0 {
                (vec![0.5, 1.5], vec![2.0])
            } else {
                (Vec::new(), Vec::new())
            }
        }
        fn spread_correlation(&self, p: usize) -> f64 {
            if p == 0 { 0.4 } else { 0.0 }
        }
    }

    /// A chain of unary layers named l0, l1, ..., its layer graph on
    /// processors "a" and "b" (both run everything), and their names.
    fn chain(ops: &[UnaryOp]) -> (Graph, LayerGraph, Vec<String>) {
        let mut b = Builder::new("chain");
        let mut x = b.input("x", &[1, 4, 4, 4]).unwrap();
        for (i, op) in ops.iter().enumerate() {
            x = b.unary(&format!("l{i}"), x, *op).unwrap();
        }
        let g = b.finish("y", x).unwrap();
        let names: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        let lg = LayerGraph::new(&g, &names, &[OpSupport::All, OpSupport::All]).unwrap();
        (g, lg, names)
    }

    /// One app "chain" with arrival lines `arrival`, one request.
    fn workload(arrival: &str) -> Workload {
        let text = format!("requests = 1\n[[app]]\nname = \"chain\"\nmodel = \"resnet18.onnx\"\n{arrival}\n");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models");
        crate::core::workload_file::parse(&text, &dir, "w.toml").unwrap()
    }

    /// A problem over `graphs` simulated for one period of its slowest group.
    fn test_problem<'a>(
        graphs: &'a [Graph],
        layers: &'a [LayerGraph],
        names: &[String],
        costs: &'a mut dyn Costs,
        workload: Workload,
    ) -> Problem<'a> {
        Problem {
            graphs,
            layers,
            names: names.to_vec(),
            costs,
            workload,
            periods: 1,
            simulations: 0,
        }
    }

    #[test]
    fn pieces_and_candidates_take_their_processors_spread() {
        let (g, lg, names) = chain(&[UnaryOp::Relu, UnaryOp::Sigmoid, UnaryOp::Tanh]);
        let w = workload("arrival = \"closed\"");
        let (graphs, layers) = (vec![g], vec![lg]);
        let mut costs = Spread;
        let mut problem = test_problem(&graphs, &layers, &names, &mut costs, w);
        let pieces = vec![vec![
            Piece {
                layers: vec![0, 1],
                processor: 0,
            },
            Piece {
                layers: vec![2],
                processor: 1,
            },
        ]];
        let built = problem.build_pieces(pieces, vec![0]).unwrap();
        let on0 = &built.truth.table[0][0][0];
        assert_eq!(
            (on0.alone_ms, &on0.alone_shape, &on0.shared_shape),
            (2.0, &vec![0.5, 1.5], &vec![2.0])
        );
        assert_eq!(built.truth.spread_correlation, [0.4, 0.0]);
        let on1 = &built.truth.table[0][1][1];
        assert!(on1.alone_shape.is_empty() && on1.shared_shape.is_empty(), "{on1:?}");

        let rows = candidate_rows(&mut Spread, 0, &layers[0], &built.units[0], 2).unwrap();
        assert_eq!(rows[0][0].alone_shape, [0.5, 1.5]);
        assert!(rows[1][1].alone_shape.is_empty());
    }

    /// Records what it is asked to prefetch; every piece 1 ms.
    #[derive(Default)]
    struct Asked(Vec<Vec<Wanted>>);

    impl Costs for Asked {
        fn compute_ms(&mut self, _model: usize, _layers: &[usize], _p: usize) -> Result<f64, CostError> {
            Ok(1.0)
        }
        fn comm_ms(&mut self, _from: usize, _to: usize, _bytes: u64) -> Result<f64, CostError> {
            Ok(0.0)
        }
        fn prefetch(&mut self, wanted: &[Wanted]) -> Result<(), CostError> {
            self.0.push(wanted.to_vec());
            Ok(())
        }
    }

    #[test]
    fn a_plan_asks_for_all_its_pieces_at_once_with_its_models_period() {
        let (g, lg, names) = chain(&[UnaryOp::Relu, UnaryOp::Sigmoid]);
        for (arrival, period) in [
            ("arrival = \"periodic\"\nfps = 50", Some(20.0)),
            ("arrival = \"closed\"", None),
        ] {
            let w = workload(arrival);
            let (graphs, layers) = (vec![g.clone()], vec![lg.clone()]);
            let mut costs = Asked::default();
            let mut problem = test_problem(&graphs, &layers, &names, &mut costs, w);
            let pieces = vec![vec![
                Piece {
                    layers: vec![0],
                    processor: 0,
                },
                Piece {
                    layers: vec![1],
                    processor: 1,
                },
            ]];
            problem.build_pieces(pieces, vec![0]).unwrap();
            let want = |layers: Vec<usize>, processor| Wanted {
                model: 0,
                layers,
                processor,
                period_ms: period,
            };
            assert_eq!(costs.0, [vec![want(vec![0], 0), want(vec![1], 1)]], "{arrival}");
        }
    }
}
