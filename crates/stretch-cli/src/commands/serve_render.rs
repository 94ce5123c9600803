//! `stretch serve` of a workload with a rendering task (Heimdall): every
//! operator timed alone on every processor, models cut per policy, the
//! render kernel calibrated on its core, and the policies run in turn.

use super::serve::Args;
use crate::multi_common as mc;
use crate::render_run as rr;
use anyhow::{Context, Result, bail};
use graph_ir::Graph;
use multi_dnn::OpSupport;
use multi_dnn::Registry;
use multi_dnn::core::report::RunLog;
use multi_dnn::core::report::quantile_or_zero;
use multi_dnn::core::workload::Workload;
use multi_dnn::experiment::{self, Sweep};
use multi_dnn::heimdall::{ChunkMode, chunks_on};
use multi_dnn::serve::Server;
use multi_dnn::serve::world::{ServeSetup, ServeWorld};
use scheduler_rt::ProcessorConfig;
use std::io::{IsTerminal, Write};

/// Timed runs per operator and processor.
const OPERATOR_RUNS: usize = 5;
/// Interleaved runs of whole model and chunks for the chunking overhead.
const OVERHEAD_RUNS: usize = 10;

/// The chunk sequence of a model on `worker` as (candidate, worker) steps.
fn steps_on(units: &multi_dnn::ModelUnits, worker: usize) -> Option<Vec<(usize, usize)>> {
    let chunks = chunks_on(units, 0, worker)?;
    Some(chunks.into_iter().map(|c| (c, worker)).collect())
}

#[allow(clippy::too_many_arguments)]
pub fn run(
    a: &Args,
    policies: &[String],
    procs: &[ProcessorConfig],
    support: &[OpSupport],
    accel: &[bool],
    names: &[String],
    workload: Workload,
    graphs: Vec<Graph>,
) -> Result<()> {
    let r = workload.render.clone().context("no render task")?;
    if support.iter().any(|s| *s != OpSupport::All) {
        bail!(
            "{}: a render workload runs whole chunks on the render processor and whole models on the CPU: configure processors that run every operator (no supports/unsupported lists)",
            workload.file
        );
    }
    if a.rounds > 1 {
        bail!("{}: --rounds is not supported with a render task", workload.file);
    }
    let mut spec = rr::spec(&r, names);
    let tty = std::io::stderr().is_terminal();
    let mut say = |msg: &str| {
        if tty {
            eprint!("\r\x1b[2K{msg}");
            let _ = std::io::stderr().flush();
        }
    };
    let factory = multi_dnn::splash::cloud::engines().factory();
    let mut probe = Server::start(procs, &factory).context("cannot start the workers")?;
    spec.render_ms = probe.set_render(spec.worker, r.fps, r.render_ms)?;
    let budget = multi_dnn::heimdall::chunk::budget_ms(r.fps, spec.render_ms)?;
    eprintln!(
        "render kernel on {}: {:.2} ms per frame at {} fps (measured; asked for {:.2} ms): DNN budget {budget:.2} ms per frame",
        r.processor, spec.render_ms, r.fps, r.render_ms
    );
    let mut op_ms = Vec::new();
    for g in &graphs {
        op_ms.push(
            probe
                .measure_operators(g, OPERATOR_RUNS, &mut say)
                .with_context(|| format!("cannot time the operators of '{}'", g.name))?,
        );
    }
    if tty {
        eprintln!();
    }
    eprintln!(
        "operator latencies: each operator compiled alone and timed on each processor (median of {OPERATOR_RUNS}, measured)"
    );
    let mut modes: Vec<ChunkMode> = vec![ChunkMode::Whole];
    for p in policies {
        if !modes.contains(&ChunkMode::for_policy(p)) {
            modes.push(ChunkMode::for_policy(p));
        }
    }
    let mut setups = Vec::new();
    for mode in &modes {
        let mode = *mode;
        let chunked = rr::chunk_all(&graphs, names, accel, &op_ms, &spec, mode)?;
        eprint!("{}", rr::chunk_lines(&chunked, budget, r.margin_ms));
        let mut server = Server::start(procs, &factory)?;
        for (g, u) in graphs.iter().zip(&chunked.units) {
            server.add_model(g.clone(), u.clone(), &mut say)?;
        }
        if tty {
            eprintln!();
        }
        server.share_render(&probe);
        if !a.no_check {
            server.compute_references(&factory)?;
        }
        setups.push((chunked, server));
    }
    drop(probe);
    let homes = rr::homes(&workload, &r, names);
    let mut isolated = Vec::new();
    for (m, app) in workload.apps.iter().enumerate() {
        let (whole_c, whole_s) = &setups[0];
        let steps = steps_on(&whole_c.units[m], homes[m]).context("no whole-model candidate")?;
        let t = whole_s.time_steps(m, &steps, OVERHEAD_RUNS)?;
        isolated.push(quantile_or_zero(&t, 0.99));
        if let Some((c, s)) = setups.iter().find(|(c, _)| c.mode == ChunkMode::Budget) {
            let chunk_steps = steps_on(&c.units[m], spec.worker).context("no chunk sequence")?;
            let whole_steps = steps_on(&whole_c.units[m], spec.worker).context("no whole-model candidate")?;
            let (mut whole, mut chunks) = (Vec::new(), Vec::new());
            for _ in 0..OVERHEAD_RUNS {
                whole.extend(whole_s.time_steps(m, &whole_steps, 1)?);
                chunks.extend(s.time_steps(m, &chunk_steps, 1)?);
            }
            let (w50, c50) = (quantile_or_zero(&whole, 0.5), quantile_or_zero(&chunks, 0.5));
            eprintln!(
                "{}: chunking overhead on {}: {} chunks back to back p50 {c50:.2} ms (min {:.2}) vs whole model p50 {w50:.2} ms (min {:.2}): {:+.1}% at p50 (measured, {OVERHEAD_RUNS} interleaved runs)",
                app.name,
                r.processor,
                chunk_steps.len(),
                chunks.iter().copied().fold(f64::INFINITY, f64::min),
                whole.iter().copied().fold(f64::INFINITY, f64::min),
                100.0 * (c50 / w50 - 1.0)
            );
        }
        eprintln!(
            "{}: isolated p99 on {} {:.2} ms (whole model, measured)",
            app.name, names[homes[m]], isolated[m]
        );
    }
    let multipliers = mc::multipliers(&a.sweep.slo_multipliers)?;
    let total_s = workload.duration_s.unwrap_or(0.0);
    let mut world = ServeWorld {
        setups: setups
            .iter()
            .map(|(c, server)| ServeSetup {
                server,
                units: c.units.clone(),
                estimator: c.estimator.clone(),
            })
            .collect(),
        choose: Some(Box::new(move |p: &str| {
            modes
                .iter()
                .position(|m| *m == ChunkMode::for_policy(p))
                .unwrap_or(usize::MAX)
        })),
        thermal: None,
        progress: Box::new(|label: &str, t: f64, log: &RunLog, in_system: usize| {
            if tty {
                eprint!(
                    "\r\x1b[2K[{label}] {t:.0}/{total_s:.0} s, {} completed, {} frames, {in_system} in system",
                    log.completed.len(),
                    log.frames.len()
                );
                let _ = std::io::stderr().flush();
            }
        }),
        heat: Vec::new(),
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
            if tty {
                eprint!("\r\x1b[2K");
            }
            eprintln!("[{}] {}", r.config.policy, rr::overhead_line(r.log));
            if single {
                print!(
                    "{}",
                    rr::report("measured", r.config.policy, r.workload, r.slo_ms, names, r.log).text()
                );
            }
        },
    )?;
    let rows: Vec<_> = outcomes
        .iter()
        .map(|o| {
            (
                o.multiplier,
                rr::report("measured", &o.policy, &o.workload, &o.slo_ms, names, &o.log),
            )
        })
        .collect();
    let last = outcomes.last().map(|o| o.log.clone());
    mc::emit(
        &a.sweep,
        "measured",
        rr::table,
        "(measured on this machine; render fps over the run and in its worst 1/3-s window; late = frame start after its tick)",
        &rows,
        last.as_ref(),
        names,
        &workload,
    )?;
    if rows.iter().any(|r| r.1.mismatches > 0) {
        bail!("outputs differed from the whole-model reference (see the reports)");
    }
    Ok(())
}
