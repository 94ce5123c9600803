//! `stretch serve` of a workload with a rendering task (Heimdall): every
//! operator timed alone on every processor, models cut per policy, the
//! render kernel calibrated on its core, and the policies run in turn.

use super::Args;
use crate::multi_common as mc;
use crate::render_run as rr;
use anyhow::{Context, Result, bail};
use graph_ir::Graph;
use multi_dnn::core::report::RunLog;
use multi_dnn::core::workload::{Render, Workload};
use multi_dnn::experiment::{self, Sweep};
use multi_dnn::heimdall::{ChunkMode, RenderSpec};
use multi_dnn::serve::Server;
use multi_dnn::serve::render::{self as sr, Chunked};
use multi_dnn::serve::world::{ServeSetup, ServeWorld};
use multi_dnn::{OpSupport, PolicyOptions, Registry};
use scheduler_rt::ProcessorConfig;
use std::io::{IsTerminal, Write};

/// Timed runs per operator and processor.
const OPERATOR_RUNS: usize = 5;
/// Interleaved runs of whole model and chunks for the chunking overhead.
const OVERHEAD_RUNS: usize = 10;

/// Where a render workload is served: processors, what they support and
/// which are accelerators, their names.
pub struct Processors<'a> {
    pub procs: &'a [ProcessorConfig],
    pub support: &'a [OpSupport],
    pub accel: &'a [bool],
    pub names: &'a [String],
}

/// Writes progress over one line of a terminal's stderr.
fn say(msg: &str) {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K{msg}");
        let _ = std::io::stderr().flush();
    }
}

/// The chunk modes, one server per mode, and the render task as the
/// chunker sees it.
type Servers = (Vec<ChunkMode>, Vec<(Chunked, Server)>, RenderSpec);

/// One server per chunk mode the policies need (whole models first), each
/// with the render kernel calibrated once on its processor; returns the
/// modes, the servers and the render task as the chunker sees it.
fn servers(a: &Args, p: &Processors, r: &Render, policies: &[String], graphs: &[Graph]) -> Result<Servers> {
    let mut spec = sr::spec(r, p.names);
    let factory = scheduler_rt::factory(multi_dnn::splash::cloud::engines());
    let mut probe = Server::start(p.procs, &factory).context("cannot start the workers")?;
    spec.render_ms = probe.set_render(spec.worker, r.fps, r.render_ms)?;
    let budget = multi_dnn::heimdall::chunk::budget_ms(r.fps, spec.render_ms)?;
    eprintln!(
        "render kernel on {}: {:.2} ms per frame at {} fps (measured; asked for {:.2} ms): DNN budget {budget:.2} ms per frame",
        r.processor, spec.render_ms, r.fps, r.render_ms
    );
    let mut op_ms = Vec::new();
    for g in graphs {
        let ms = probe.measure_operators(g, OPERATOR_RUNS, &mut say);
        op_ms.push(ms.with_context(|| format!("cannot time the operators of '{}'", g.name))?);
    }
    say("");
    eprintln!(
        "operator latencies: each operator compiled alone and timed on each processor (median of {OPERATOR_RUNS}, measured)"
    );
    let modes = ChunkMode::needed(&[ChunkMode::Whole], policies);
    let mut setups = Vec::new();
    for mode in &modes {
        let chunked = sr::chunk_all(graphs, p.names, p.accel, &op_ms, &spec, *mode)?;
        eprint!(
            "{}",
            rr::chunk_lines(&chunked, budget, r.margin_ms, r.offload_to.as_deref())
        );
        let mut server = Server::start(p.procs, &factory)?;
        for (g, u) in graphs.iter().zip(&chunked.units) {
            server.add_model(g.clone(), u.clone(), &mut say)?;
        }
        say("");
        server.share_render(&probe);
        if !a.no_check {
            server.compute_references(&factory)?;
        }
        setups.push((chunked, server));
    }
    Ok((modes, setups, spec))
}

pub fn run(a: &Args, policies: &[String], p: &Processors, workload: Workload, graphs: Vec<Graph>) -> Result<()> {
    let r = workload.render.clone().context("no render task")?;
    if p.support.iter().any(|s| *s != OpSupport::All) {
        bail!(
            "{}: a render workload runs whole chunks on the render processor and whole models on the CPU: configure processors that run every operator (no supports/unsupported lists)",
            workload.file
        );
    }
    if a.rounds > 1 {
        bail!("{}: --rounds is not supported with a render task", workload.file);
    }
    let (modes, setups, spec) = servers(a, p, &r, policies, &graphs)?;
    let homes = sr::homes(&workload, &r, p.names);
    let measured = sr::isolated(&setups, &homes, spec.worker, OVERHEAD_RUNS)?;
    for ((app, i), home) in workload.apps.iter().zip(&measured).zip(&homes) {
        eprint!(
            "{}",
            rr::isolated_lines(&app.name, &r.processor, &p.names[*home], i, OVERHEAD_RUNS)
        );
    }
    let isolated: Vec<f64> = measured.iter().map(|i| i.p99_ms).collect();
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
            let mode = ChunkMode::for_policy(p);
            modes.iter().position(|m| *m == mode).unwrap_or(usize::MAX)
        })),
        thermal: None,
        progress: Box::new(|label: &str, t: f64, log: &RunLog, in_system: usize| {
            let (done, frames) = (log.completed.len(), log.frames.len());
            say(&format!(
                "[{label}] {t:.0}/{total_s:.0} s, {done} completed, {frames} frames, {in_system} in system"
            ));
        }),
        heat: Vec::new(),
    };
    let single = !a.sweep.json && multipliers.len() * policies.len() == 1;
    let sweep = Sweep {
        multipliers,
        policies: policies.to_vec(),
        rounds: 1,
        options: PolicyOptions::default(),
    };
    let names = p.names;
    let outcomes = experiment::run(
        &mut world,
        &Registry::builtin(),
        &workload,
        &isolated,
        &sweep,
        &mut |r| {
            say("");
            eprintln!("[{}] {}", r.config.policy, rr::overhead_line(r.log));
            if single {
                let report = r.report("measured", names);
                print!("{}", report.text());
            }
        },
    )?;
    let rows: Vec<_> = outcomes
        .iter()
        .map(|o| (o.multiplier, o.report("measured", names)))
        .collect();
    let last = outcomes.last().map(|o| o.log.clone());
    let footer = "(measured on this machine; render fps over the run and in its worst 1/3-s window; late = frame start after its tick)";
    mc::emit(
        &a.sweep,
        "measured",
        rr::table,
        footer,
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
