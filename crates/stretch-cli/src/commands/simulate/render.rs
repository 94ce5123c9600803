//! `stretch simulate` of a workload with a rendering task (Heimdall) on a
//! device profile: per-operator latencies from the profile's predictor,
//! scaled to the profile's whole-model figures (`[models.APP]`) where it has
//! them; chunks, estimates and the simulated truth all come from them.

use super::Args;
use crate::multi_common as mc;
use crate::render_run as rr;
use anyhow::{Context, Result};
use graph_ir::Graph;
use multi_dnn::core::workload::{Render, Workload};
use multi_dnn::experiment::{self, SimSetup, SimWorld, Sweep};
use multi_dnn::heimdall::ChunkMode;
use multi_dnn::serve::render as sr;
use multi_dnn::sim::{Latency, SimOptions, Truth};
use multi_dnn::{PolicyOptions, Registry, predicted};
use predictor::DeviceModel;

/// One simulated set-up per chunk mode the policies need: models cut on
/// per-operator latencies `op_ms`, the simulated truth their estimates.
fn setups(
    policies: &[String],
    graphs: &[Graph],
    names: &[String],
    accel: &[bool],
    op_ms: &[Vec<Vec<f64>>],
    r: &Render,
) -> Result<(Vec<ChunkMode>, Vec<SimSetup>)> {
    let spec = sr::spec(r, names);
    let budget = multi_dnn::heimdall::chunk::budget_ms(r.fps, r.render_ms)?;
    let modes = ChunkMode::needed(&[], policies);
    let mut setups = Vec::new();
    for mode in &modes {
        let c = sr::chunk_all(graphs, names, accel, op_ms, &spec, *mode)?;
        eprint!("{}", rr::chunk_lines(&c, budget, r.margin_ms, r.offload_to.as_deref()));
        let exact = |row: &Vec<f64>| row.iter().map(|ms| Latency::exact(*ms)).collect();
        let table = c.estimates.iter().map(|m| m.iter().map(exact).collect()).collect();
        setups.push(SimSetup {
            units: c.units,
            estimator: c.estimator,
            truth: Truth {
                table,
                ..Truth::default()
            },
        });
    }
    Ok((modes, setups))
}

pub fn run(a: &Args, policies: &[String], workload: Workload, graphs: Vec<Graph>) -> Result<()> {
    let path = a
        .device
        .as_ref()
        .context("a render workload is simulated on a device profile: give --device")?;
    let model = DeviceModel::load(path).with_context(|| format!("cannot load {}", path.display()))?;
    let (names, _, accel) = predicted::processors(&model);
    workload.check_processors(&names)?;
    let r = workload.render.clone().context("no render task")?;
    let mut op_ms = Vec::new();
    for g in &graphs {
        let (ms, notes) = predicted::operator_ms(&model, g, &names)?;
        for n in notes {
            eprintln!("{n}");
        }
        op_ms.push(ms);
    }
    let homes = sr::homes(&workload, &r, &names);
    let isolated: Vec<f64> = op_ms.iter().zip(&homes).map(|(ms, h)| ms[*h].iter().sum()).collect();
    let (modes, setups) = setups(policies, &graphs, &names, &accel, &op_ms, &r)?;
    let profile = &model.profile().name;
    eprintln!(
        "simulated processors: {} ({profile}); rendering {:.1} ms at {} fps on {}",
        names.join(", "),
        r.render_ms,
        r.fps,
        r.processor
    );
    let multipliers = mc::multipliers(&a.sweep.slo_multipliers)?;
    let mut world = SimWorld {
        names: names.clone(),
        setups,
        choose: Some(Box::new(move |p: &str| {
            let mode = ChunkMode::for_policy(p);
            modes.iter().position(|m| *m == mode).unwrap_or(usize::MAX)
        })),
        options: SimOptions {
            noise: a.noise,
            contention: a.contention,
            seed: a.seed,
            drift: false,
            stop_at_first_miss: false,
        },
    };
    let single = !a.sweep.json && multipliers.len() * policies.len() == 1;
    let sweep = Sweep {
        multipliers,
        policies: policies.to_vec(),
        rounds: 1,
        options: PolicyOptions::default(),
    };
    let outcomes = experiment::run(
        &mut world,
        &Registry::builtin(),
        &workload,
        &isolated,
        &sweep,
        &mut |r| {
            if single {
                let report = r.report("simulated", &names);
                print!("{}", report.text());
            }
        },
    )?;
    let rows: Vec<_> = outcomes
        .iter()
        .map(|o| (o.multiplier, o.report("simulated", &names)))
        .collect();
    let last = outcomes.last().map(|o| o.log.clone());
    let footer = format!(
        "(simulated on the {profile} profile: operator latencies predicted, scaled to its [models] figures where given)"
    );
    mc::emit(
        &a.sweep,
        "simulated",
        rr::table,
        &footer,
        &rows,
        last.as_ref(),
        &names,
        &workload,
    )
}
