//! `stretch serve --plan`: a static plan from `stretch analyze` run for
//! real, with Band's `lst` on the same workers' whole models in the same
//! session for comparison; each model group's makespans and score,
//! measured, beside what the analyzer predicted.

use super::Args;
use super::plan_report::{Gathered, Predicted, Report, RunReport};
use crate::multi_common as mc;
use crate::puzzle_setup::{self as ps, Scenario};
use anyhow::{Result, bail};
use multi_dnn::core::report::RunLog;
use multi_dnn::experiment;
use multi_dnn::puzzle::evaluate::Outcome;
use multi_dnn::puzzle::plan_file::PlanFile;
use multi_dnn::puzzle::served::{self, Options, Plan, Served, Setup};
use multi_dnn::serve::host::PoolReport;
use std::path::{Path, PathBuf};

/// Runs every plan of `plans` and `lst`, `a.rounds` times each in turn,
/// once per period multiplier of `--slo-multipliers` (else as written).
pub fn run(a: &Args, plans: &[PathBuf]) -> Result<()> {
    mc::refuse_with_plan(
        &[
            ("--policy", a.sweep.policy.is_some()),
            ("--compare", a.sweep.compare.is_some()),
            ("--plot", a.sweep.plot.is_some()),
            ("--save-latencies", a.save_latencies.is_some()),
        ],
        "the plans run as written, beside Band's lst, at the periods they were analysed for",
    )?;
    let multipliers = mc::multipliers(&a.sweep.slo_multipliers)?;
    let sc = ps::load_runtime(&a.workload, &a.runtime_config, &a.processors)?;
    let mut loaded = Vec::with_capacity(plans.len());
    let mut files = Vec::with_capacity(plans.len());
    let mut bases: Option<(String, Vec<f64>)> = None;
    for path in plans {
        let name = path.display().to_string();
        let file = PlanFile::load(path)?;
        let (pieces, rank) = file.resolve(&name, &sc.names, &sc.apps, &sc.graphs, &sc.layers)?;
        if let Some(b) = file.base_periods(&name, &sc.workload)? {
            match &bases {
                Some((first, was)) if !same_periods(was, &b) => bail!(
                    "{name} was analysed at group base periods {b:?} ms, {first} at {was:?} ms: serve plans analysed together"
                ),
                Some(_) => {}
                None => bases = Some((name.clone(), b)),
            }
        }
        loaded.push(Plan { name, pieces, rank });
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
        engines: scheduler_rt::factory(multi_dnn::splash::cloud::engines()),
    };
    let periods_from = match &bases {
        Some((file, _)) => format!("group periods as analysed ({file})"),
        None => "group periods from each model's fastest isolated p99, measured now (the plans record none)".into(),
    };
    let options = Options {
        rounds: a.rounds.max(1),
        isolated_runs: a.isolated_runs,
        check: !a.no_check,
        retime: a.retime,
        base_periods: bases.map(|b| b.1),
    };
    let mut mismatches = 0;
    let reports = experiment::period_sweep(&sc.workload, &multipliers, a.sweep.duration_s, &mut |m, workload| {
        let served = served::serve(&setup, &loaded, workload, &options, &mut |note| eprintln!("{note}"))?;
        let mut report = report(a, &sc, &files, &served, options.rounds);
        report.period_multiplier = m;
        report.periods_from = periods_from.clone();
        if let Some(path) = &a.sweep.trace {
            let logs = served.runs.iter().filter_map(|t| t.last_log.as_ref());
            let runs: Vec<(String, &RunLog)> = report.runs.iter().map(|r| r.name.clone()).zip(logs).collect();
            let trace = multi_dnn::core::trace::chrome_trace_runs(&runs, &sc.names, &sc.apps, "measured");
            mc::write(&traced(path, m), &serde_json::to_string(&trace)?)?;
        }
        if !a.sweep.json {
            print(&sc, &report, served.round.groups.len());
        }
        mismatches += served.runs.iter().map(|t| t.mismatches).sum::<usize>();
        Ok::<_, anyhow::Error>(report)
    })?;
    if a.sweep.json {
        let text = match a.sweep.slo_multipliers {
            None => serde_json::to_string_pretty(&reports[0])?,
            Some(_) => serde_json::to_string_pretty(&reports)?,
        };
        println!("{text}");
    }
    if mismatches > 0 {
        bail!("{mismatches} outputs differed from the whole-model reference");
    }
    if !a.no_check && !a.sweep.json {
        println!("every output of the plans equalled the whole-model reference (max |diff| <= 1e-4 x output scale)");
    }
    Ok(())
}

/// Base periods equal within rounding of their JSON text.
fn same_periods(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-9 * x.abs().max(y.abs()))
}

/// The trace file of multiplier `m`: `T.json` as given for the workload as
/// written, `T.x2.json` for multiplier 2.
fn traced(path: &Path, m: Option<f64>) -> PathBuf {
    let Some(m) = m else { return path.to_path_buf() };
    let stem = path
        .file_stem()
        .map_or("trace".into(), |s| s.to_string_lossy().into_owned());
    let ext = path
        .extension()
        .map_or(String::new(), |e| format!(".{}", e.to_string_lossy()));
    path.with_file_name(format!("{stem}.x{m}{ext}"))
}

/// The report of every served run: each plan (named by `files`, with what
/// the analyzer wrote into it), then `lst`.
fn report(a: &Args, sc: &Scenario, files: &[(String, PlanFile)], served: &Served, rounds: usize) -> Report {
    let groups: Vec<String> = served.round.groups.iter().map(|g| g.name.clone()).collect();
    let enabled = engine::pool::pool().enabled();
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
        period_multiplier: None,
        periods_from: String::new(),
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

fn print(sc: &Scenario, report: &Report, groups: usize) {
    for note in &report.retime_notes {
        println!("--retime: {note}");
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
    match report.period_multiplier {
        Some(m) => println!("period multiplier {m}: {}", report.periods_from),
        None => println!("{}", report.periods_from),
    }
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
