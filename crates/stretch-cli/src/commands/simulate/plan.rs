//! `stretch simulate --plan`: a static plan from `stretch analyze` on the
//! simulated processors of a device profile, with the model groups'
//! makespans and the XRBench score.

use super::Args;
use crate::puzzle_setup as ps;
use anyhow::{Context, Result};
use multi_dnn::experiment;
use multi_dnn::puzzle::group_figures::group_lines;
use multi_dnn::puzzle::plan_file::PlanFile;

pub fn run(a: &Args, plan_path: &std::path::Path) -> Result<()> {
    let device = a.device.as_ref().context("--plan needs --device")?;
    crate::multi_common::refuse_with_plan(
        &[
            ("--policy", a.sweep.policy.is_some()),
            ("--compare", a.sweep.compare.is_some()),
            ("--trace", a.sweep.trace.is_some()),
            ("--plot", a.sweep.plot.is_some()),
            ("--noise", a.noise != 0.0),
            ("--contention", a.contention != 1.0),
            ("--thermal", a.thermal),
            ("--processor", !a.processors.is_empty()),
        ],
        "the plan runs as written on the --device profile's processors, with its predictor's costs and hand-offs",
    )?;
    let sc = ps::load(&a.workload, device)?;
    let plan = PlanFile::load(plan_path)?;
    let (pieces, rank) = plan.resolve(
        &plan_path.display().to_string(),
        &sc.names,
        &sc.apps,
        &sc.graphs,
        &sc.layers,
    )?;
    let mut costs = ps::predicted(&sc)?;
    let (mut problem, _) = ps::problem(&sc, &mut costs, 30)?;
    let bases = plan.base_periods(&plan_path.display().to_string(), &problem.workload)?;
    if let Some(b) = &bases {
        problem.workload.set_group_bases(b);
    }
    if let Some(d) = a.sweep.duration_s {
        problem.workload.clone().set_duration_s(d, "--duration-s")?;
        let longest = problem
            .workload
            .groups
            .iter()
            .filter_map(|g| g.period_ms)
            .fold(0.0, f64::max);
        problem.periods = ((d * 1e3 / longest).round() as usize).max(1);
    }
    let b = problem.build_pieces(pieces, rank)?;
    let groups: Vec<String> = problem.workload.groups.iter().map(|g| g.name.clone()).collect();
    let multipliers: Vec<Option<f64>> = crate::multi_common::multipliers(&a.sweep.slo_multipliers)?;
    let text = !a.sweep.json;
    let say = |line: String| {
        if text {
            println!("{line}");
        }
    };
    say(format!(
        "simulate --plan {}: {} apps in {} group(s) on {} (static plan; costs predicted by the {} profile; simulated)",
        plan_path.display(),
        sc.apps.len(),
        groups.len(),
        sc.names.join(", "),
        sc.device.as_ref().map_or("-", |d| d.profile().name.as_str())
    ));
    say(match bases {
        Some(_) => "group periods as analysed (from the plan)".into(),
        None => "group periods from the profile's fastest isolated latencies (the plan records none)".into(),
    });
    let base = problem.workload.clone();
    let rows = experiment::period_sweep(&base, &multipliers, None, &mut |m, w| {
        let o = problem.simulate(&b, w)?;
        say(format!(
            "period multiplier {}: score {:.3}",
            m.map_or("as written".into(), |m| format!("{m}")),
            o.score()
        ));
        for line in group_lines(&o, &groups) {
            say(line);
        }
        Ok::<_, anyhow::Error>(
            serde_json::json!({"multiplier": m, "score": o.score(), "makespans_ms": o.makespans, "periods_ms": o.periods_ms}),
        )
    })?;
    let sat = problem.saturation(&b, 4.0)?;
    say(format!(
        "saturation multiplier α*: {}",
        sat.map_or("above 4".into(), |s| format!("{s:.2}"))
    ));
    if a.sweep.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"kind": "simulated", "plan": plan_path.display().to_string(), "processors": sc.names, "runs": rows, "saturation_multiplier": sat})
            )?
        );
    }
    Ok(())
}
