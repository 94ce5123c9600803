//! Experiments: one workload swept over SLO multipliers × policies ×
//! rounds, in a [`World`] that runs each configuration: the simulator
//! ([`SimWorld`]), or real workers (`serve`'s world). The sweep resolves
//! every run's SLOs by the one rule ([`Workload::slos`]) and makes every
//! policy through a [`Registry`], so the commands that serve or simulate
//! only parse, call this, and print. A world of static plans is swept over
//! its groups' period multipliers ([`period_sweep`]); a thermal world over
//! its policies ([`crate::thermal_run::Platforms::run_all`]) and camera
//! rates ([`crate::thermal_run::Platforms::fps_sweep`]).

use crate::core::estimator::Estimator;
use crate::core::report::{Report, RunLog};
use crate::core::units::ModelUnits;
use crate::core::workload::{Workload, WorkloadError};
use crate::core::{SchedError, Scheduler};
use crate::policy::{Policy, PolicyOptions};
use crate::registry::{PolicyError, Registry};
use crate::sim::{SimOptions, Truth, simulate};
use scheduler_rt::RuntimeError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ExperimentError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Sched(#[from] SchedError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("{0}")]
    World(String),
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// SLO multipliers, each applied to every app ([`Workload::with_multiplier`]);
    /// `None`: the workload's own SLOs.
    pub multipliers: Vec<Option<f64>>,
    /// Policy names, as the registry knows them.
    pub policies: Vec<String>,
    /// Rounds over every configuration, interleaved; each round runs
    /// 1/rounds of the workload's duration and a configuration's rounds
    /// are appended into one log. At least 1.
    pub rounds: usize,
    /// Options beyond those the workload configures, set over them
    /// ([`PolicyOptions::overlaid`]).
    pub options: PolicyOptions,
}

/// One configuration of a sweep, as a world is asked to run it.
#[derive(Clone, Copy, Debug)]
pub struct Config<'a> {
    pub multiplier: Option<f64>,
    pub policy: &'a str,
    /// 0-based.
    pub round: usize,
    pub rounds: usize,
}

impl Config<'_> {
    /// `lst x2, round 1/3`, as progress lines name a run.
    pub fn label(&self) -> String {
        format!(
            "{}{}{}",
            self.policy,
            self.multiplier.map_or(String::new(), |m| format!(" x{m}")),
            if self.rounds > 1 {
                format!(", round {}/{}", self.round + 1, self.rounds)
            } else {
                String::new()
            }
        )
    }
}

/// Where a configuration runs.
pub trait World {
    /// Processor names, in worker order.
    fn names(&self) -> &[String];
    /// A scheduler for `policy`, called `name`: the units and the
    /// estimates that policy runs on.
    fn scheduler(&self, name: &str, policy: Box<dyn Policy>) -> Result<Scheduler, ExperimentError>;
    /// Runs `workload` with `slo_ms` under `sched`.
    fn run(
        &mut self,
        config: &Config,
        sched: &mut Scheduler,
        workload: &Workload,
        slo_ms: Vec<Option<f64>>,
    ) -> Result<RunLog, ExperimentError>;
}

/// One configuration's result.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub multiplier: Option<f64>,
    pub policy: String,
    /// The workload as run (multiplier applied, whole duration).
    pub workload: Workload,
    pub slo_ms: Vec<Option<f64>>,
    pub log: RunLog,
}

impl Outcome {
    /// This run's report on processors `names`, with every extension's
    /// sections ([`crate::run_report::report`]); `kind` is `measured` or
    /// `simulated`.
    pub fn report(&self, kind: &'static str, names: &[String]) -> Report {
        crate::run_report::report(kind, &self.policy, &self.workload, &self.slo_ms, names, &self.log)
    }
}

/// One run as it ends.
pub struct Ran<'a> {
    pub config: Config<'a>,
    /// The workload as this run ran it (this round's share of the duration).
    pub workload: &'a Workload,
    pub slo_ms: &'a [Option<f64>],
    pub log: &'a RunLog,
    /// Wall-clock seconds the world took to run it (measured).
    pub wall_s: f64,
}

impl Ran<'_> {
    /// This run's report on processors `names` ([`Outcome::report`]).
    pub fn report(&self, kind: &'static str, names: &[String]) -> Report {
        crate::run_report::report(kind, self.config.policy, self.workload, self.slo_ms, names, self.log)
    }
}

/// Runs every configuration of `sweep` on `workload` in `world`, SLOs from
/// `isolated_ms` (each app's isolated latency on its fastest processor),
/// policies from `registry`; one outcome per (multiplier, policy), in
/// sweep order. `after` hears each run as it ends.
pub fn run(
    world: &mut dyn World,
    registry: &Registry,
    workload: &Workload,
    isolated_ms: &[f64],
    sweep: &Sweep,
    after: &mut dyn FnMut(&Ran),
) -> Result<Vec<Outcome>, ExperimentError> {
    let rounds = sweep.rounds.max(1);
    let configs: Vec<(Option<f64>, &String)> = sweep
        .multipliers
        .iter()
        .flat_map(|m| sweep.policies.iter().map(move |p| (*m, p)))
        .collect();
    let mut logs: Vec<Option<RunLog>> = vec![None; configs.len()];
    for round in 0..rounds {
        for (i, (m, p)) in configs.iter().enumerate() {
            let mut w = m.map_or(workload.clone(), |m| workload.with_multiplier(m));
            w.duration_s = w.duration_s.map(|d| d / rounds as f64);
            let slo = w.slos(isolated_ms);
            let options = registry.options_for(&w, world.names()).overlaid(&sweep.options);
            let policy = registry.make(p, &options)?;
            let mut sched = world.scheduler(p, policy)?;
            let config = Config {
                multiplier: *m,
                policy: p,
                round,
                rounds,
            };
            let t0 = std::time::Instant::now();
            let log = world.run(&config, &mut sched, &w, slo.clone())?;
            after(&Ran {
                config,
                workload: &w,
                slo_ms: &slo,
                log: &log,
                wall_s: t0.elapsed().as_secs_f64(),
            });
            match &mut logs[i] {
                Some(all) => {
                    let total = w.duration_s.unwrap_or(0.0);
                    let offset = all.end_ms.max(round as f64 * total * 1e3);
                    all.append(log, offset);
                }
                None => logs[i] = Some(log),
            }
        }
    }
    Ok(configs
        .into_iter()
        .zip(logs)
        .filter_map(|((m, p), log)| {
            let w = m.map_or(workload.clone(), |m| workload.with_multiplier(m));
            let slo_ms = w.slos(isolated_ms);
            Some(Outcome {
                multiplier: m,
                policy: p.clone(),
                workload: w,
                slo_ms,
                log: log?,
            })
        })
        .collect())
}

/// One run of [`period_sweep`]: a multiplier and the workload it gives.
pub type PeriodRun<'a, T, E> = dyn FnMut(Option<f64>, &Workload) -> Result<T, E> + 'a;

/// Runs `run` once per period multiplier of `multipliers`, in order, on
/// `workload` with its groups' periods scaled by it
/// ([`Workload::with_period_multiplier`]; `None`: as written) and its
/// duration set to `duration_s` where given; the results in order. `run`
/// reports each as it ends (a static plan's world prints as it goes).
pub fn period_sweep<T, E: From<WorkloadError>>(
    workload: &Workload,
    multipliers: &[Option<f64>],
    duration_s: Option<f64>,
    run: &mut PeriodRun<T, E>,
) -> Result<Vec<T>, E> {
    let mut out = Vec::with_capacity(multipliers.len());
    for &m in multipliers {
        let mut w = match m {
            Some(m) => workload.with_period_multiplier(m),
            None => workload.clone(),
        };
        if let Some(d) = duration_s {
            w.set_duration_s(d, "--duration-s")?;
        }
        out.push(run(m, &w)?);
    }
    Ok(out)
}

/// The units, estimates and simulated latencies one group of policies
/// runs on.
#[derive(Clone, Debug)]
pub struct SimSetup {
    pub units: Vec<ModelUnits>,
    pub estimator: Estimator,
    pub truth: Truth,
}

/// Which setup a policy (by name) runs on.
pub type Choose = Box<dyn Fn(&str) -> usize>;

/// The simulator as a world.
pub struct SimWorld {
    pub names: Vec<String>,
    /// At least one.
    pub setups: Vec<SimSetup>,
    /// Which of `setups` each policy runs on (index, clamped); `None`: the
    /// first, for every policy.
    pub choose: Option<Choose>,
    pub options: SimOptions,
}

impl SimWorld {
    fn setup(&self, policy: &str) -> Result<&SimSetup, ExperimentError> {
        chosen(&self.setups, self.choose.as_ref(), policy, "simulated setup")
    }
}

/// The set-up `choose` picks for `policy` (the first without a choice);
/// fails naming the policy and `what` is missing.
pub fn chosen<'s, S>(
    setups: &'s [S],
    choose: Option<&Choose>,
    policy: &str,
    what: &str,
) -> Result<&'s S, ExperimentError> {
    let i = choose.map_or(0, |c| c(policy));
    setups
        .get(i)
        .ok_or_else(|| ExperimentError::World(format!("no {what} for policy '{policy}'")))
}

impl World for SimWorld {
    fn names(&self) -> &[String] {
        &self.names
    }

    fn scheduler(&self, name: &str, policy: Box<dyn Policy>) -> Result<Scheduler, ExperimentError> {
        let s = self.setup(name)?;
        Ok(Scheduler::new(
            s.units.clone(),
            &self.names,
            policy,
            s.estimator.clone(),
        ))
    }

    fn run(
        &mut self,
        config: &Config,
        sched: &mut Scheduler,
        workload: &Workload,
        slo_ms: Vec<Option<f64>>,
    ) -> Result<RunLog, ExperimentError> {
        let truth = &self.setup(config.policy)?.truth;
        Ok(simulate(sched, workload, slo_ms, truth, self.options)?)
    }
}
