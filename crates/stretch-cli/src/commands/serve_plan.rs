//! `stretch serve --plan`: a static plan from `stretch analyze` run for
//! real, with Band's `lst` on the same workers' whole models in the same
//! session for comparison; each model group's makespans and score,
//! measured, beside what the analyzer predicted.

use super::serve::Args;
use super::serve_plan_report::{Gathered, Predicted, Report, RunReport};
use crate::multi_common as mc;
use crate::puzzle_setup::{self as ps, Scenario};
use anyhow::{Result, bail};
use multi_dnn::core::report::{PoolReport, RunLog};
use multi_dnn::puzzle::evaluate::Outcome;
use multi_dnn::puzzle::plan_file::PlanFile;
use multi_dnn::puzzle::served::{self, Options, Plan, Served, Setup};
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
    let mut loaded = Vec::with_capacity(plans.len());
    let mut files = Vec::with_capacity(plans.len());
    for path in plans {
        let file = PlanFile::load(path)?;
        let (pieces, rank) = file.resolve(&path.display().to_string(), &sc.names, &sc.apps, &sc.graphs, &sc.layers)?;
        loaded.push(Plan {
            name: path.display().to_string(),
            pieces,
            rank,
        });
        files.push((short(path), file));
    }
    let setup = Setup {
        procs: &sc.procs,
        support: &sc.support,
        accel: &sc.accel,
        names: &sc.names,
        apps: &sc.apps,
        graphs: &sc.graphs,
        layers: &sc.layers,
        engines: multi_dnn::splash::cloud::engines().factory(),
    };
    let options = Options {
        rounds: a.rounds.max(1),
        isolated_runs: a.isolated_runs,
        check: !a.no_check,
        retime: a.retime,
    };
    let mut workload = sc.workload.clone();
    if let Some(d) = a.sweep.duration_s {
        workload.duration_s = Some(d);
    }
    let served = served::serve(&setup, &loaded, &workload, &options, &mut |note| eprintln!("{note}"))?;
    let report = report(a, &sc, &files, &served, options.rounds);
    if let Some(path) = &a.sweep.trace {
        let logs = served.runs.iter().filter_map(|t| t.last_log.as_ref());
        let runs: Vec<(String, &RunLog)> = report.runs.iter().map(|r| r.name.clone()).zip(logs).collect();
        let trace = multi_dnn::core::trace::chrome_trace_runs(&runs, &sc.names, &sc.apps, "measured");
        mc::write(path, &serde_json::to_string(&trace)?)?;
    }
    print(a, &sc, &report, served.round.groups.len());
    let mismatches: usize = served.runs.iter().map(|t| t.mismatches).sum();
    if mismatches > 0 {
        bail!("{mismatches} outputs differed from the whole-model reference");
    }
    if !a.no_check && !a.sweep.json {
        println!("every output of the plans equalled the whole-model reference (max |diff| <= 1e-4 x output scale)");
    }
    Ok(())
}

/// The report of every served run: each plan (named by `files`, with what
/// the analyzer wrote into it), then `lst`.
fn report(a: &Args, sc: &Scenario, files: &[(String, PlanFile)], served: &Served, rounds: usize) -> Report {
    let groups: Vec<String> = served.round.groups.iter().map(|g| g.name.clone()).collect();
    let enabled = scheduler_rt::pool::pool().enabled();
    let predicted: Vec<Option<Vec<Predicted>>> = files.iter().map(|(_, f)| predicted_groups(f)).collect();
    let predicted_apps: Vec<_> = files
        .iter()
        .map(|(_, f)| ps::app_figures(&f.figures["apps"], &sc.apps))
        .collect();
    let runs = served
        .runs
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let plan = files.get(k);
            let empty = Outcome {
                makespans: Vec::new(),
                periods_ms: Vec::new(),
            };
            let gathered = Gathered {
                name: plan.map_or("Band lst (online)".into(), |(name, _)| name.clone()),
                static_plan: plan.is_some(),
                outcome: t.outcome.as_ref().unwrap_or(&empty),
                boundary: PoolReport::new(enabled, t.boundary.0, t.boundary.1),
                breakdown: &t.breakdown,
                steal: t.steal.clone(),
                predicted: predicted.get(k).and_then(|p| p.as_deref()),
                predicted_apps: predicted_apps.get(k).map_or(&[], |p| p.as_slice()),
                retimed: t.retimed(),
            };
            RunReport::new(gathered, &groups, &sc.apps)
        })
        .collect();
    Report {
        kind: "measured",
        scheduling: multi_dnn::serve::scheduling_line(&sc.procs, false),
        processors: sc.names.clone(),
        rounds,
        round_s: served.round.duration_s.unwrap_or(0.0),
        runs,
        outputs_checked: !a.no_check,
        retime_notes: served.retime_notes.clone(),
    }
}

/// Per group, the makespans the analyzer wrote into the plan.
fn predicted_groups(plan: &PlanFile) -> Option<Vec<Predicted>> {
    let groups = plan.figures["groups"].as_array()?;
    let one = |x: &serde_json::Value| Predicted {
        mean_ms: x["mean_makespan_ms"].as_f64().unwrap_or(f64::NAN),
        p50_ms: x["p50_makespan_ms"].as_f64(),
    };
    Some(groups.iter().map(one).collect())
}

fn print(a: &Args, sc: &Scenario, report: &Report, groups: usize) {
    for note in &report.retime_notes {
        if a.sweep.json {
            eprintln!("--retime: {note}");
        } else {
            println!("--retime: {note}");
        }
    }
    if a.sweep.json {
        println!("{}", serde_json::to_string_pretty(report).unwrap_or_default());
        return;
    }
    println!("{}", report.scheduling);
    println!(
        "serve --plan: {} apps in {} group(s) on {} ({} round(s) of {:.1} s each, plans and lst in turn; measured)",
        sc.apps.len(),
        groups,
        sc.names.join(", "),
        report.rounds,
        report.round_s
    );
    for r in &report.runs {
        for line in r.lines() {
            println!("{line}");
        }
    }
}

fn short(p: &Path) -> String {
    p.file_name()
        .map_or(p.display().to_string(), |f| f.to_string_lossy().into_owned())
}
