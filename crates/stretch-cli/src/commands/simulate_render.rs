//! `stretch simulate` of a workload with a rendering task (Heimdall) on a
//! device profile: per-operator latencies from the profile's predictor,
//! scaled to the profile's whole-model figures (`[models.APP]`) where it has
//! them; chunks, estimates and the simulated truth all come from them.

use super::simulate::Args;
use crate::multi_common as mc;
use crate::render_run as rr;
use anyhow::{Context, Result};
use graph_ir::Graph;
use multi_dnn::Registry;
use multi_dnn::core::units::operators;
use multi_dnn::core::workload::Workload;
use multi_dnn::experiment::{self, SimSetup, SimWorld, Sweep};
use multi_dnn::heimdall::ChunkMode;
use multi_dnn::sim::{Latency, SimOptions, Truth};
use predictor::{DeviceModel, LatencyModel};

/// `op_ms[processor][op]` of `g`, and how the figures were made.
fn operator_ms(model: &DeviceModel, g: &Graph, names: &[String]) -> Result<(Vec<Vec<f64>>, Vec<String>)> {
    let ops = operators(g).with_context(|| format!("model '{}'", g.name))?;
    let profile = model.profile();
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for n in names {
        let mut per = Vec::with_capacity(ops.len());
        for id in &ops {
            per.push(
                model
                    .predict(g, &[*id], n)
                    .with_context(|| format!("cannot predict '{}' of '{}' on {n}", g.node(*id).name, g.name))?
                    .total_ms,
            );
        }
        let predicted: f64 = per.iter().sum();
        if let Some(f) = profile.models.get(&g.name).and_then(|m| m.get(n)) {
            let k = f.value / predicted.max(1e-12);
            per.iter_mut().for_each(|x| *x *= k);
            notes.push(format!(
                "{} on {n}: {:.1} ms ({}; operators in the predictor's proportions)",
                g.name, f.value, f.source
            ));
        } else if let Some((other, f)) = profile
            .models
            .get(&g.name)
            .and_then(|m| m.iter().find(|(p, _)| *p != n).map(|(p, f)| (p.clone(), f.value)))
        {
            let there: f64 = ops
                .iter()
                .map(|id| model.predict(g, &[*id], &other).map(|p| p.total_ms).unwrap_or(0.0))
                .sum();
            let k = f / there.max(1e-12);
            per.iter_mut().for_each(|x| *x *= k);
            notes.push(format!(
                "{} on {n}: {:.1} ms (predicted: the {other} figure times the profile's predicted {n}/{other} ratio {:.2})",
                g.name,
                predicted * k,
                predicted / there.max(1e-12)
            ));
        } else {
            notes.push(format!(
                "{} on {n}: {predicted:.1} ms (predicted by the profile)",
                g.name
            ));
        }
        out.push(per);
    }
    Ok((out, notes))
}

pub fn run(a: &Args, policies: &[String], workload: Workload, graphs: Vec<Graph>) -> Result<()> {
    let path = a
        .device
        .as_ref()
        .context("a render workload is simulated on a device profile: give --device")?;
    let model = DeviceModel::load(path).with_context(|| format!("cannot load {}", path.display()))?;
    let profile = model.profile().clone();
    let names: Vec<String> = profile.processors.keys().cloned().collect();
    workload.check_processors(&names)?;
    let r = workload.render.clone().context("no render task")?;
    let accel: Vec<bool> = profile
        .processors
        .values()
        .map(|p| p.kind != predictor::profile::ProcessorKind::Cpu)
        .collect();
    let spec = rr::spec(&r, &names);
    let budget = multi_dnn::heimdall::chunk::budget_ms(r.fps, r.render_ms)?;
    let mut op_ms = Vec::new();
    for g in &graphs {
        let (ms, notes) = operator_ms(&model, g, &names)?;
        for n in notes {
            eprintln!("{n}");
        }
        op_ms.push(ms);
    }
    let homes = rr::homes(&workload, &r, &names);
    let isolated: Vec<f64> = op_ms.iter().zip(&homes).map(|(ms, h)| ms[*h].iter().sum()).collect();
    let options = SimOptions {
        noise: a.noise,
        contention: a.contention,
        seed: a.seed,
        drift: false,
        stop_at_first_miss: false,
    };
    let mut modes: Vec<ChunkMode> = Vec::new();
    for p in policies {
        if !modes.contains(&ChunkMode::for_policy(p)) {
            modes.push(ChunkMode::for_policy(p));
        }
    }
    let mut setups = Vec::new();
    for mode in &modes {
        let mode = *mode;
        let c = rr::chunk_all(&graphs, &names, &accel, &op_ms, &spec, mode)?;
        eprint!("{}", rr::chunk_lines(&c, budget, r.margin_ms));
        let truth = Truth {
            table: c
                .estimates
                .iter()
                .map(|m| {
                    m.iter()
                        .map(|row| row.iter().map(|ms| Latency::exact(*ms)).collect())
                        .collect()
                })
                .collect(),
            ..Truth::default()
        };
        setups.push((c, truth));
    }
    eprintln!(
        "simulated processors: {} ({}); rendering {:.1} ms at {} fps on {}",
        names.join(", "),
        profile.name,
        r.render_ms,
        r.fps,
        r.processor
    );
    let multipliers = mc::multipliers(&a.sweep.slo_multipliers)?;
    let mut world = SimWorld {
        names: names.clone(),
        setups: setups
            .into_iter()
            .map(|(c, truth)| SimSetup {
                units: c.units,
                estimator: c.estimator,
                truth,
            })
            .collect(),
        choose: Some(Box::new(move |p: &str| {
            modes
                .iter()
                .position(|m| *m == ChunkMode::for_policy(p))
                .unwrap_or(usize::MAX)
        })),
        options,
    };
    let sweep = Sweep {
        multipliers: multipliers.clone(),
        policies: policies.to_vec(),
        rounds: 1,
        eta: None,
    };
    let single = !a.sweep.json && multipliers.len() * policies.len() == 1;
    let outcomes = experiment::run(
        &mut world,
        &Registry::builtin(),
        &workload,
        &isolated,
        &sweep,
        &mut |r| {
            if single {
                print!(
                    "{}",
                    rr::report("simulated", r.config.policy, r.workload, r.slo_ms, &names, r.log).text()
                );
            }
        },
    )?;
    let rows: Vec<_> = outcomes
        .iter()
        .map(|o| {
            (
                o.multiplier,
                rr::report("simulated", &o.policy, &o.workload, &o.slo_ms, &names, &o.log),
            )
        })
        .collect();
    let last = outcomes.last().map(|o| o.log.clone());
    let footer = format!(
        "(simulated on the {} profile: operator latencies predicted, scaled to its [models] figures where given)",
        profile.name
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
    )?;
    Ok(())
}
