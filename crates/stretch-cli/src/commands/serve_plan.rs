//! `stretch serve --plan`: a static plan from `stretch analyze` run for
//! real, with Band's `lst` on the same workers' whole models in the same
//! session for comparison; each model group's makespans and score,
//! measured, beside what the analyzer predicted.

use super::serve::Args;
use super::serve_plan_report::{Gathered, Predicted, Report, RunReport};
use crate::multi_common as mc;
use crate::puzzle_setup as ps;
use anyhow::{Context, Result, bail};
use multi_dnn::ModelUnits;
use multi_dnn::core::estimator::{Estimator, EstimatorParams};
use multi_dnn::core::report::{PoolReport, RunLog};
use multi_dnn::policy::Lst;
use multi_dnn::puzzle::breakdown::{AppFigures, Breakdown};
use multi_dnn::puzzle::chromosome::Piece;
use multi_dnn::puzzle::costs::Costs;
use multi_dnn::puzzle::evaluate::{Outcome, outcome_from_log, plan_units};
use multi_dnn::puzzle::plan_file::PlanFile;
use multi_dnn::puzzle::static_plan::StaticPlan;
use multi_dnn::serve::Server;
use multi_dnn::{Policy, Scheduler};
use predictor::profiler::steal::Steal;
use scheduler_rt::pool::PoolCounters;
use std::path::{Path, PathBuf};

/// Runs every plan of `plans` and `lst`, `a.rounds` times each in turn.
pub fn run(a: &Args, plans: &[PathBuf]) -> Result<()> {
    mc::refuse_with_plan(
        &[
            ("--policy", a.sweep.policy.is_some()),
            ("--compare", a.sweep.compare.is_some()),
            ("--slo-multipliers", a.sweep.slo_multipliers.is_some()),
            ("--plot", a.sweep.plot.is_some()),
            ("--save-latencies", a.save_latencies.is_some()),
        ],
        "the plans run as written, beside Band's lst, at the workload's group periods",
    )?;
    let sc = ps::load_runtime(&a.workload, &a.runtime_config, &a.processors)?;
    let loaded = plans
        .iter()
        .map(|path| {
            let plan = PlanFile::load(path)?;
            let (pieces, rank) =
                plan.resolve(&path.display().to_string(), &sc.names, &sc.apps, &sc.graphs, &sc.layers)?;
            Ok((path, plan, pieces, rank))
        })
        .collect::<Result<Vec<_>>>()?;
    let factory = multi_dnn::splash::cloud::engines().factory();
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
    for (path, plan, pieces, rank) in loaded {
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
                .map(|x| Predicted {
                    mean_ms: x["mean_makespan_ms"].as_f64().unwrap_or(f64::NAN),
                    p50_ms: x["p50_makespan_ms"].as_f64(),
                })
                .collect::<Vec<Predicted>>()
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
    let slo = w.slos(&[]);
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut boundary = vec![(PoolCounters::default(), 0usize); served.len() + 1];
    let mut mismatches = 0;
    let mut breakdown: Vec<Breakdown> = (0..=served.len()).map(|_| Breakdown::default()).collect();
    let mut stolen: Vec<Option<Steal>> = vec![None; served.len() + 1];
    let mut retime_notes = Vec::new();
    let mut retimer = if a.retime {
        eprintln!("measuring hand-offs and contention for --retime...");
        let m = crate::puzzle_measure::Measured::new(&sc.graphs, &sc.layers, &sc.procs, None)?;
        retime_notes = m.notes().into_iter().filter(|n| !n.starts_with("pieces:")).collect();
        for note in &retime_notes {
            if a.sweep.json {
                eprintln!("--retime: {note}");
            } else {
                println!("--retime: {note}");
            }
        }
        Some(m)
    } else {
        None
    };
    let mut retimed: Vec<Breakdown> = (0..served.len()).map(|_| Breakdown::default()).collect();
    let mut retimed_outcomes: Vec<Outcome> = Vec::new();
    let mut last_logs: Vec<RunLog> = Vec::new();
    for _ in 0..rounds {
        last_logs.clear();
        if let Some(costs) = retimer.as_mut() {
            costs.forget_pieces();
            let (mut problem, _) = ps::problem(&sc, costs, RETIME_TICKS)?;
            problem.costs.retime();
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
            last_logs.push(log);
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
        last_logs.push(log);
    }
    let groups: Vec<String> = w.groups.iter().map(|g| g.name.clone()).collect();
    let enabled = scheduler_rt::pool::pool().enabled();
    let mut runs = Vec::new();
    for (k, p) in served.iter().enumerate() {
        runs.push(RunReport::new(
            Gathered {
                name: short(&p.path),
                static_plan: true,
                outcome: &outcomes[k],
                boundary: PoolReport::new(enabled, boundary[k].0, boundary[k].1),
                breakdown: &breakdown[k],
                steal: stolen[k].clone(),
                predicted: p.predicted.as_deref(),
                predicted_apps: &p.predicted_apps,
                retimed: retimed_outcomes.get(k).map(|o| (o, &retimed[k])),
            },
            &groups,
            &sc.apps,
        ));
    }
    let n = served.len();
    runs.push(RunReport::new(
        Gathered {
            name: "Band lst (online)".into(),
            static_plan: false,
            outcome: &outcomes[n],
            boundary: PoolReport::new(enabled, boundary[n].0, boundary[n].1),
            breakdown: &breakdown[n],
            steal: stolen[n].clone(),
            predicted: None,
            predicted_apps: &[],
            retimed: None,
        },
        &groups,
        &sc.apps,
    ));
    let report = Report {
        kind: "measured",
        scheduling: super::serve::scheduling_line(&sc.procs, false),
        processors: sc.names.clone(),
        rounds,
        round_s: w.duration_s.unwrap_or(0.0),
        runs,
        outputs_checked: !a.no_check,
        retime_notes,
    };
    if let Some(path) = &a.sweep.trace {
        let runs: Vec<(String, &RunLog)> = report
            .runs
            .iter()
            .map(|r| r.name.clone())
            .zip(last_logs.iter())
            .collect();
        mc::write(
            path,
            &serde_json::to_string(&mc::chrome_trace_runs(&runs, &sc.names, &sc.apps, "measured"))?,
        )?;
    }
    if a.sweep.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", report.scheduling);
        println!(
            "serve --plan: {} apps in {} group(s) on {} ({} round(s) of {:.1} s each, plans and lst in turn; measured)",
            sc.apps.len(),
            groups.len(),
            sc.names.join(", "),
            rounds,
            report.round_s
        );
        for r in &report.runs {
            for line in r.lines() {
                println!("{line}");
            }
        }
    }
    if mismatches > 0 {
        bail!("{mismatches} outputs differed from the whole-model reference");
    }
    if !a.no_check && !a.sweep.json {
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

/// A plan served for real, with what the analyzer predicted for it.
struct Served {
    path: PathBuf,
    server: Server,
    units: Vec<ModelUnits>,
    est: Estimator,
    rank: Vec<usize>,
    pieces: Vec<Vec<Piece>>,
    /// Per group, the analyzer's makespans.
    predicted: Option<Vec<Predicted>>,
    /// Per app, the analyzer's simulated figures.
    predicted_apps: Vec<Option<AppFigures>>,
}
