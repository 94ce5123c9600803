//! Static plans served for real (`serve --plan`, Puzzle §5): each plan's
//! pieces on their processors in the plan's priority order, with Band's
//! `lst` on the same processors' whole models in the same session for
//! comparison, round after round in turn; with re-timing, each round's
//! plans are also simulated on pieces timed afresh just before it.

use super::PuzzleError;
use super::breakdown::Breakdown;
use super::chromosome::{LayerGraph, Piece};
use super::evaluate::{Outcome, Problem, outcome_from_log, plan_units};
use super::mapping::resolve_groups;
use super::measured::Measured;
use super::static_plan::StaticPlan;
use crate::core::estimator::{Estimator, EstimatorParams};
use crate::core::report::RunLog;
use crate::core::workload::Workload;
use crate::policy::Lst;
use crate::serve::Server;
use crate::serve::host::HostLog;
use crate::{ModelUnits, Policy, Scheduler};
use engine::host::Steal;
use engine::pool::PoolCounters;
use graph_ir::Graph;
use scheduler_rt::support::OpSupport;
use scheduler_rt::{EngineFactory, ProcessorConfig};
use std::sync::Arc;

/// Ticks of the slowest group simulated per re-timed prediction.
pub const RETIME_TICKS: usize = 50;

/// A plan to serve: its pieces per model and each model's rank.
pub struct Plan {
    pub name: String,
    pub pieces: Vec<Vec<Piece>>,
    pub rank: Vec<usize>,
}

/// The processors and models plans are served on. App `i` runs model `i`.
pub struct Setup<'a> {
    pub procs: &'a [ProcessorConfig],
    pub support: &'a [OpSupport],
    pub accel: &'a [bool],
    pub names: &'a [String],
    pub apps: &'a [String],
    pub graphs: &'a [Graph],
    pub layers: &'a [LayerGraph],
    pub engines: Arc<EngineFactory>,
}

/// How to serve.
pub struct Options {
    /// Rounds; the workload's duration is split among them.
    pub rounds: usize,
    /// Runs of each model alone when measuring its fastest isolated p99.
    pub isolated_runs: usize,
    /// Compare every output with the whole model's.
    pub check: bool,
    /// Simulate each round's plans on pieces timed afresh just before it.
    pub retime: bool,
    /// The groups' base periods the plans were analysed for (ms, in group
    /// order); `None` measures them from each model's fastest isolated p99.
    pub base_periods: Option<Vec<f64>>,
}

/// What one served configuration gathered over the rounds.
#[derive(Default)]
pub struct Totals {
    /// Group makespans pooled over the rounds.
    pub outcome: Option<Outcome>,
    /// Engine-boundary counters and completed requests.
    pub boundary: (PoolCounters, usize),
    pub breakdown: Breakdown,
    pub steal: Option<Steal>,
    /// With re-timing: the simulation's outcome and breakdown.
    pub retimed_outcome: Option<Outcome>,
    pub retimed_breakdown: Option<Breakdown>,
    pub mismatches: usize,
    pub last_log: Option<RunLog>,
}

impl Totals {
    /// With re-timing: the simulation's outcome and breakdown.
    pub fn retimed(&self) -> Option<(&Outcome, &Breakdown)> {
        self.retimed_outcome.as_ref().zip(self.retimed_breakdown.as_ref())
    }

    fn add(&mut self, log: RunLog, w: &Workload) {
        let host = log.section::<HostLog>();
        if let Some(s) = host.and_then(|h| h.steal.as_ref()) {
            match &mut self.steal {
                Some(a) => a.merge(s),
                None => self.steal = Some(s.clone()),
            }
        }
        if let Some((_, c)) = host.and_then(|h| h.pool) {
            self.boundary.0 += c;
        }
        self.boundary.1 += log.completed.len();
        self.mismatches += log.mismatches;
        self.breakdown.add(&log);
        merge(&mut self.outcome, outcome_from_log(&log, w));
        self.last_log = Some(log);
    }
}

fn merge(acc: &mut Option<Outcome>, o: Outcome) {
    match acc {
        None => *acc = Some(o),
        Some(a) => {
            for (m, more) in a.makespans.iter_mut().zip(o.makespans) {
                m.extend(more);
            }
        }
    }
}

/// Every plan and `lst`, served.
pub struct Served {
    /// One per plan, in order, then `lst`'s.
    pub runs: Vec<Totals>,
    /// The workload of one round, groups resolved.
    pub round: Workload,
    /// With re-timing: how hand-offs, contention and spread were measured.
    pub retime_notes: Vec<String>,
}

/// Serves `plans` and `lst` on `setup`, `options.rounds` rounds each in
/// turn, on `workload` (its groups' periods from `options.base_periods`,
/// else from each model's fastest isolated p99, measured now). `note` hears measurements and
/// steps as they happen.
pub fn serve(
    setup: &Setup,
    plans: &[Plan],
    workload: &Workload,
    options: &Options,
    note: &mut dyn FnMut(&str),
) -> Result<Served, PuzzleError> {
    let failed = |step: &str| {
        let step = step.to_string();
        move |e: scheduler_rt::RuntimeError| PuzzleError::Measure {
            step: step.clone(),
            reason: e.to_string(),
        }
    };
    let mut quiet = |_: &str| {};
    let load = format!("cannot load the models of {}", workload.file);
    let band = Server::load(
        setup.procs,
        setup.support,
        setup.graphs.to_vec(),
        setup.engines.clone(),
        &mut quiet,
    )
    .map_err(failed(&load))?;
    let band_units: Vec<ModelUnits> = band.models.iter().map(|m| m.units.clone()).collect();
    let mut round = workload.clone();
    match &options.base_periods {
        Some(bases) => round.set_group_bases(bases),
        None => {
            let fastest = band
                .fastest_isolated_p99(setup.apps, options.isolated_runs, note)
                .map_err(failed(&load))?;
            round.resolve_groups(&fastest)?;
        }
    }
    let mut band_est = Estimator::new(EstimatorParams::default(), setup.accel, &band_units);
    band.register(&mut band_est).map_err(failed("registration"))?;
    let mut servers = Vec::with_capacity(plans.len());
    for plan in plans {
        servers.push(start(setup, plan, options.check)?);
    }
    let rounds = options.rounds.max(1);
    round.duration_s = round.duration_s.map(|d| d / rounds as f64);
    let slo = round.slos(&[]);
    let mut retimer = match options.retime {
        true => {
            note("measuring hand-offs and contention for --retime...");
            let m = Measured::new(setup.graphs, setup.layers, setup.procs, setup.engines.clone(), None)?;
            Some(m)
        }
        false => None,
    };
    let retime_notes: Vec<String> = retimer.as_ref().map_or(Vec::new(), |m| {
        use crate::predicted::costs::Costs;
        m.notes().into_iter().filter(|n| !n.starts_with("pieces:")).collect()
    });
    let mut runs: Vec<Totals> = (0..=plans.len()).map(|_| Totals::default()).collect();
    for _ in 0..rounds {
        if let Some(costs) = retimer.as_mut() {
            retime_round(setup, plans, costs, &round, &mut runs)?;
        }
        for (k, (plan, (server, units, est))) in plans.iter().zip(&servers).enumerate() {
            let policy: Box<dyn Policy> = Box::new(StaticPlan::new(plan.rank.clone()));
            let mut sched = Scheduler::new(units.clone(), setup.names, policy, est.clone());
            let log = server
                .run(&mut sched, &round, slo.clone(), &mut |_, _, _| {})
                .map_err(failed(&plan.name))?;
            runs[k].add(log, &round);
        }
        let lst: Box<dyn Policy> = Box::new(Lst::new(false));
        let mut sched = Scheduler::new(band_units.clone(), setup.names, lst, band_est.clone());
        let log = band
            .run(&mut sched, &round, slo.clone(), &mut |_, _, _| {})
            .map_err(failed("lst"))?;
        runs[plans.len()].add(log, &round);
    }
    Ok(Served {
        runs,
        round,
        retime_notes,
    })
}

/// A plan's server: its pieces compiled on their processors, references
/// computed when checking, and its estimator registered.
fn start(setup: &Setup, plan: &Plan, check: bool) -> Result<(Server, Vec<ModelUnits>, Estimator), PuzzleError> {
    let failed = |e: scheduler_rt::RuntimeError| PuzzleError::Plan {
        file: plan.name.clone(),
        reason: e.to_string(),
    };
    let mut server = Server::start(setup.procs, &setup.engines).map_err(failed)?;
    let mut units = Vec::new();
    for (m, g) in setup.graphs.iter().enumerate() {
        let u = plan_units(g, &setup.layers[m], &plan.pieces[m]).map_err(|e| PuzzleError::Plan {
            file: plan.name.clone(),
            reason: format!("app {}: {e}", setup.apps[m]),
        })?;
        units.push(u.clone());
        server.add_model(g.clone(), u, &mut |_| {}).map_err(failed)?;
    }
    if check {
        server
            .compute_references(&setup.engines)
            .map_err(|e| PuzzleError::Plan {
                file: plan.name.clone(),
                reason: format!("cannot compute the reference outputs: {e}"),
            })?;
    }
    let mut est = Estimator::new(EstimatorParams::default(), setup.accel, &units);
    server.register(&mut est).map_err(failed)?;
    Ok((server, units, est))
}

/// Simulates every plan on pieces timed afresh, into each run's `retimed`.
fn retime_round(
    setup: &Setup,
    plans: &[Plan],
    costs: &mut Measured,
    round: &Workload,
    runs: &mut [Totals],
) -> Result<(), PuzzleError> {
    costs.forget_pieces();
    let mut problem = Problem {
        graphs: setup.graphs,
        layers: setup.layers,
        names: setup.names.to_vec(),
        costs,
        workload: round.clone(),
        periods: RETIME_TICKS,
        simulations: 0,
    };
    resolve_groups(&mut problem)?;
    problem.costs.retime();
    for (k, p) in plans.iter().enumerate() {
        let b = problem.build_pieces(p.pieces.clone(), p.rank.clone())?;
        let log = problem.simulate_log(&b, round)?;
        runs[k]
            .retimed_breakdown
            .get_or_insert_with(Breakdown::default)
            .add(&log);
        merge(&mut runs[k].retimed_outcome, outcome_from_log(&log, round));
    }
    Ok(())
}
