//! `stretch serve --plan`: a static plan from `stretch analyze` run for
//! real, with Band's `lst` on the same workers' whole models in the same
//! session for comparison; each model group's makespans and score,
//! measured, beside what the analyzer predicted.

use super::serve::Args;
use crate::multi_common::group_lines;
use crate::puzzle_setup as ps;
use anyhow::{Context, Result, bail};
use predictor::profiler::steal::Steal;
use scheduler_rt::default_factory;
use scheduler_rt::multi::ModelUnits;
use scheduler_rt::multi::estimator::{Estimator, EstimatorParams};
use scheduler_rt::multi::policy::Lst;
use scheduler_rt::multi::policy::static_plan::StaticPlan;
use scheduler_rt::multi::puzzle::breakdown::{AppFigures, Breakdown};
use scheduler_rt::multi::puzzle::chromosome::Piece;
use scheduler_rt::multi::puzzle::costs::Costs;
use scheduler_rt::multi::puzzle::evaluate::{Outcome, outcome_from_log, plan_units};
use scheduler_rt::multi::puzzle::plan_file::PlanFile;
use scheduler_rt::multi::report::{PoolReport, RunLog};
use scheduler_rt::multi::serve::Server;
use scheduler_rt::multi::{Policy, Scheduler};
use scheduler_rt::pool::PoolCounters;
use std::path::{Path, PathBuf};

/// Runs every plan of `plans` and `lst`, `a.rounds` times each in turn.
pub fn run(a: &Args, plans: &[PathBuf]) -> Result<()> {
    let sc = ps::load_runtime(&a.workload, &a.runtime_config, &a.processors)?;
    let factory = default_factory();
    let mut say = |_: &str| {};
    let band = Server::load(&sc.procs, &sc.support, sc.graphs.clone(), factory.clone(), &mut say)
        .with_context(|| format!("cannot load the models of {}", sc.workload.file))?;
    let band_units: Vec<_> = band.models.iter().map(|m| m.units.clone()).collect();
    let accel = &sc.accel;
    let fastest = super::serve::fastest_isolated_p99(&band, &sc.apps, a.isolated_runs)?;
    let mut workload = sc.workload.clone();
    workload.resolve_groups(&fastest)?;
    if let Some(d) = a.sweep.duration_s {
        workload.duration_s = Some(d);
    }
    let mut band_est = Estimator::new(EstimatorParams::default(), accel, &band_units);
    band.register(&mut band_est).context("registration")?;

    let mut served = Vec::new();
    for path in plans {
        let plan = PlanFile::load(path)?;
        let (pieces, rank) = plan.resolve(&path.display().to_string(), &sc.names, &sc.apps, &sc.graphs, &sc.layers)?;
        let mut server = Server::start(&sc.procs, &factory)?;
        let mut units = Vec::new();
        for (m, g) in sc.graphs.iter().enumerate() {
            let u = plan_units(g, &sc.layers[m], &pieces[m])
                .with_context(|| format!("{}: app {}", path.display(), sc.apps[m]))?;
            units.push(u.clone());
            server.add_model(g.clone(), u, &mut say)?;
        }
        if !a.no_check {
            server
                .compute_references(&factory)
                .context("cannot compute the reference outputs")?;
        }
        let mut est = Estimator::new(EstimatorParams::default(), accel, &units);
        server.register(&mut est).context("registration")?;
        let predicted = plan.figures["groups"].as_array().map(|g| {
            g.iter()
                .map(|x| x["mean_makespan_ms"].as_f64().unwrap_or(f64::NAN))
                .collect::<Vec<f64>>()
        });
        served.push(Served {
            path: path.clone(),
            server,
            units,
            est,
            rank,
            pieces,
            predicted,
            predicted_apps: ps::app_figures(&plan.figures["apps"], &sc.apps),
        });
    }
    let rounds = a.rounds.max(1);
    let mut w = workload.clone();
    w.duration_s = w.duration_s.map(|d| d / rounds as f64);
    let slo: Vec<Option<f64>> = (0..w.apps.len()).map(|i| w.group_deadline_ms(i)).collect();
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut boundary = vec![(PoolCounters::default(), 0usize); served.len() + 1];
    let mut mismatches = 0;
    let mut breakdown: Vec<Breakdown> = (0..=served.len()).map(|_| Breakdown::default()).collect();
    let mut stolen: Vec<Option<Steal>> = vec![None; served.len() + 1];
    let mut retimer = if a.retime {
        eprintln!("measuring hand-offs and contention for --retime...");
        let m = crate::puzzle_measure::Measured::new(&sc.graphs, &sc.layers, &sc.procs, None)?;
        for note in m.notes().iter().filter(|n| !n.starts_with("pieces:")) {
            println!("--retime: {note}");
        }
        Some(m)
    } else {
        None
    };
    let mut retimed: Vec<Breakdown> = (0..served.len()).map(|_| Breakdown::default()).collect();
    let mut retimed_outcomes: Vec<Outcome> = Vec::new();
    for _ in 0..rounds {
        if let Some(costs) = retimer.as_mut() {
            costs.forget_pieces();
            let (mut problem, _) = ps::problem(&sc, costs, RETIME_TICKS)?;
            for (k, p) in served.iter().enumerate() {
                let b = problem.build_pieces(p.pieces.clone(), p.rank.clone())?;
                let log = problem.simulate_log(&b, &w)?;
                retimed[k].add(&log);
                merge(&mut retimed_outcomes, k, outcome_from_log(&log, &w));
            }
        }
        for (k, p) in served.iter().enumerate() {
            let policy: Box<dyn Policy> = Box::new(StaticPlan::new(p.rank.clone()));
            let mut sched = Scheduler::new(p.units.clone(), &sc.names, policy, p.est.clone());
            let log = p.server.run(&mut sched, &w, slo.clone(), &mut |_, _, _| {})?;
            add_steal(&mut stolen[k], &log);
            mismatches += log.mismatches;
            add_boundary(&mut boundary[k], &log);
            breakdown[k].add(&log);
            merge(&mut outcomes, k, outcome_from_log(&log, &w));
        }
        let mut sched = Scheduler::new(
            band_units.clone(),
            &sc.names,
            Box::new(Lst::new(false)),
            band_est.clone(),
        );
        let log = band.run(&mut sched, &w, slo.clone(), &mut |_, _, _| {})?;
        add_steal(&mut stolen[served.len()], &log);
        add_boundary(&mut boundary[served.len()], &log);
        breakdown[served.len()].add(&log);
        merge(&mut outcomes, served.len(), outcome_from_log(&log, &w));
    }
    let groups: Vec<String> = w.groups.iter().map(|g| g.name.clone()).collect();
    println!("{}", super::serve::scheduling_line(&sc.procs, false));
    println!(
        "serve --plan: {} apps in {} group(s) on {} ({} round(s) of {:.1} s each, plans and lst in turn; measured)",
        sc.apps.len(),
        groups.len(),
        sc.names.join(", "),
        rounds,
        w.duration_s.unwrap_or(0.0)
    );
    for (k, p) in served.iter().enumerate() {
        println!("plan {} (static): score {:.3}", short(&p.path), outcomes[k].score());
        for line in group_lines(&outcomes[k], &groups) {
            println!("{line}");
        }
        println!("{}", boundary_line(&boundary[k]));
        for line in breakdown_lines(&breakdown[k], &sc.apps, &p.predicted_apps) {
            println!("{line}");
        }
        if retimer.is_some() {
            let now: Vec<Option<AppFigures>> = (0..sc.apps.len()).map(|a| retimed[k].app(a)).collect();
            for line in breakdown_lines(&breakdown[k], &sc.apps, &now).into_iter().skip(1) {
                println!("{line} (brackets: simulated with the pieces re-timed now)");
            }
        }
        if let Some(s) = &stolen[k] {
            println!("  {}", s.line());
        }
        if let Some(predicted) = &p.predicted {
            for (g, pred) in predicted.iter().enumerate() {
                let m = &outcomes[k].makespans[g];
                let mean = m.iter().sum::<f64>() / m.len().max(1) as f64;
                let p50 = scheduler_rt::multi::puzzle::score::median(m);
                println!(
                    "  {:<12} predicted by analyze {pred:.2} ms; measured mean {mean:.2} ms ({:+.1}%), p50 {p50:.2} ms ({:+.1}%)",
                    groups[g],
                    100.0 * (mean / pred - 1.0),
                    100.0 * (p50 / pred - 1.0)
                );
                if let Some(r) = retimed_outcomes
                    .get(k)
                    .map(|o| &o.makespans[g])
                    .filter(|r| !r.is_empty())
                {
                    let now = r.iter().sum::<f64>() / r.len() as f64;
                    println!(
                        "  {:<12} simulated with the pieces re-timed before each round {now:.2} ms at the served period; measured mean {:+.1}%, p50 {:+.1}%",
                        groups[g],
                        100.0 * (mean / now - 1.0),
                        100.0 * (p50 / now - 1.0)
                    );
                }
            }
        }
    }
    println!("Band lst (online): score {:.3}", outcomes[served.len()].score());
    for line in group_lines(&outcomes[served.len()], &groups) {
        println!("{line}");
    }
    println!("{}", boundary_line(&boundary[served.len()]));
    for line in breakdown_lines(&breakdown[served.len()], &sc.apps, &[]) {
        println!("{line}");
    }
    if let Some(s) = &stolen[served.len()] {
        println!("  {}", s.line());
    }
    if mismatches > 0 {
        bail!("{mismatches} outputs differed from the whole-model reference");
    }
    if !a.no_check {
        println!("every output of the plans equalled the whole-model reference (max |diff| <= 1e-4 x output scale)");
    }
    Ok(())
}

/// Ticks of the slowest group simulated per re-timed prediction.
const RETIME_TICKS: usize = 50;

/// Adds a run's steal to `acc`.
fn add_steal(acc: &mut Option<Steal>, log: &RunLog) {
    if let Some(s) = &log.steal {
        match acc {
            Some(a) => a.merge(s),
            None => *acc = Some(s.clone()),
        }
    }
}

/// Adds a run's engine-boundary counters and completed requests.
fn add_boundary(acc: &mut (PoolCounters, usize), log: &RunLog) {
    if let Some((_, c)) = log.pool {
        acc.0 += c;
    }
    acc.1 += log.completed.len();
}

fn boundary_line(&(c, n): &(PoolCounters, usize)) -> String {
    format!(
        "  {}",
        PoolReport::new(scheduler_rt::pool::pool().enabled(), c, n).line()
    )
}

fn short(p: &Path) -> String {
    p.file_name()
        .map_or(p.display().to_string(), |f| f.to_string_lossy().into_owned())
}

fn merge(all: &mut Vec<Outcome>, k: usize, o: Outcome) {
    if all.len() <= k {
        all.push(o);
        return;
    }
    for (acc, more) in all[k].makespans.iter_mut().zip(o.makespans) {
        acc.extend(more);
    }
}

/// Where the measured time went, per app, beside `predicted` (per app,
/// the simulated figures; empty or `None` where there are none).
fn breakdown_lines(b: &Breakdown, apps: &[String], predicted: &[Option<AppFigures>]) -> Vec<String> {
    let (lag, over) = b.driver_ms();
    let mut lines = vec![format!(
        "  where the time went (medians; measured, predicted in brackets): arrival lag {lag:.3} ms, driver overhead {over:.3} ms per subgraph"
    )];
    for (a, name) in apps.iter().enumerate() {
        let Some(f) = b.app(a) else { continue };
        let pred = predicted.get(a).copied().flatten();
        let show = |v: Option<f64>| v.map_or(String::new(), |v| format!(" ({v:.3})"));
        lines.push(format!(
            "    {name:<12} latency {:.3}{} ms: running {:.3}{} ms, waiting and hand-offs {:.3}{} ms",
            f.latency_ms,
            show(pred.map(|p| p.latency_ms)),
            f.running_ms,
            show(pred.map(|p| p.running_ms)),
            f.waiting_ms,
            show(pred.map(|p| p.waiting_ms))
        ));
    }
    lines
}

/// A plan served for real, with what the analyzer predicted for it.
struct Served {
    path: PathBuf,
    server: Server,
    units: Vec<ModelUnits>,
    est: Estimator,
    rank: Vec<usize>,
    pieces: Vec<Vec<Piece>>,
    /// Per group, the analyzer's mean makespan (ms).
    predicted: Option<Vec<f64>>,
    /// Per app, the analyzer's simulated figures.
    predicted_apps: Vec<Option<AppFigures>>,
}
