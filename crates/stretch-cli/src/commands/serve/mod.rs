//! `stretch serve`: several models' requests on real workers (Band).

mod plan;
mod plan_report;
mod render;

use crate::multi_common as mc;
use anyhow::{Context, Result, bail};
use clap::Args as ClapArgs;
use multi_dnn::core::estimator::{Estimator, EstimatorParams};
use multi_dnn::core::report::RunLog;
use multi_dnn::core::workload::Workload;
use multi_dnn::experiment::{self, Outcome, Sweep};
use multi_dnn::serve::world::{ServeSetup, ServeWorld, ThermalSetup};
use multi_dnn::serve::{Server, scheduling_line};
use multi_dnn::sim::measured::Recorder;
use multi_dnn::{OpSupport, PolicyOptions, Registry};
use scheduler_rt::{ProcessorConfig, RuntimeConfig};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

/// Serve a multi-DNN workload for real: each app's requests (periodic,
/// Poisson, closed-loop or per camera frame) are jobs in one queue; the
/// policy picks which job's next subgraph runs on which processor (Band,
/// MobiSys '22). Models are cut into units by what each processor supports
/// and every candidate subgraph is compiled once per processor that can run
/// it. Reports per app: requests, completed, SLO satisfaction, p50/p99
/// latency; in total: throughput, frames/s for frame-driven apps,
/// utilisation per processor, scheduler decision time. All figures are
/// measured on this machine.
///
/// A workload with a `[render]` task (Heimdall, MobiCom '20) runs a
/// calibrated rendering kernel at its fps on its processor, first at every
/// frame; each operator is timed alone on every processor and models are
/// cut into chunks as each render policy asks (whole models, a few
/// operators, or chunks that fit between two frames; --policy lists them),
/// and the report adds rendering fps (mean and worst 1/3-s window), dropped
/// frames and per-app mean and max latency.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Workload (TOML): apps with model, SLO and arrivals, and outages; see configs/workloads/.
    #[arg(long, value_name = "W.toml")]
    pub workload: PathBuf,

    /// Runtime configuration (TOML) with the processors, their engines and
    /// the operators each supports (`supports` / `unsupported`); see
    /// configs/runtime/hetero.toml. Default: one tract worker per core, all operators.
    #[arg(long = "runtime-config", value_name = "C.toml")]
    pub runtime_config: Option<PathBuf>,

    /// A processor `NAME=KIND[:CORES][,threads=N][,engine=E]`, replacing the
    /// configuration's processor of that name or adding one (all operators).
    /// A cloud worker: `cloud=pool,remote=HOST:PORT[,mbps=249][,rtt_ms=4][,timeout_ms=2000]`
    /// offloads to a `stretch worker --listen HOST:PORT` over a link shaped
    /// to that bandwidth and round trip; one that refuses connections is
    /// left out with a warning, and one that fails mid-run is taken out of
    /// the run with its subgraph re-run on another processor.
    #[arg(long = "processor", value_name = "SPEC")]
    pub processors: Vec<ProcessorConfig>,

    #[command(flatten)]
    pub sweep: mc::SweepArgs,

    /// Isolated runs per model and processor for the SLO base (p99).
    #[arg(long = "isolated-runs", default_value_t = 20)]
    pub isolated_runs: usize,

    /// Skip comparing every output with the whole-model onnxruntime reference.
    #[arg(long = "no-check")]
    pub no_check: bool,

    /// Save the measured latency of every (model, candidate, processor)
    /// for `stretch simulate --latencies`.
    #[arg(long = "save-latencies", value_name = "L.json")]
    pub save_latencies: Option<PathBuf>,

    /// Split each run into this many rounds of duration/N seconds, every
    /// policy and multiplier taking its turn in each round, so that drift of
    /// the machine over the sweep affects all alike; the rounds' results
    /// are pooled. At least 1; not with outages.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,

    // Its help names the registry's thermal policies.
    #[arg(long, requires = "runtime_config", help = thermal_help())]
    pub thermal: bool,

    /// Run static plans from `stretch analyze --runtime-config -o` (Puzzle;
    /// give it several times to compare plans) and Band's `lst` in turn on
    /// a workload of model groups, reporting each group's makespans and score.
    #[arg(long, value_name = "plan.json")]
    pub plan: Vec<PathBuf>,

    /// With --plan: before each round, time every plan's pieces again on
    /// these processors (as `analyze --runtime-config` does, hand-offs and
    /// contention measured once at start-up) and print the simulator's
    /// makespan with those costs beside the analyzer's and the measured
    /// one, so the simulator's error shows apart from the machine's change
    /// of speed since the analysis.
    #[arg(long, requires = "plan")]
    pub retime: bool,

    /// The tensor pool (Puzzle §5): `on` hands inputs to onnxruntime in
    /// place and takes its outputs' tensors from buffers kept from earlier
    /// requests (given back when a request is served); `off` copies every
    /// input into a fresh buffer and every output into a fresh tensor. The
    /// report counts engine-boundary allocations and bytes copied either way.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = ["on", "off"])]
    pub tensor_pool: String,

    /// Who hands work to the processors: `self` lets workers pinned to
    /// cores of their own (every processor with `cores`, none shared; not
    /// with --thermal) schedule themselves: the worker that finishes a
    /// piece takes the policy's next decision and starts its own next piece
    /// at once, and idle workers poll for work, so no hand-off waits for a
    /// thread to wake (their cores stay busy polling). `thread` has one
    /// scheduling thread hand work over and wait for results, as it always
    /// does where workers share cores.
    #[arg(long, value_name = "self|thread", default_value = "self", value_parser = ["self", "thread"])]
    pub scheduling: String,
}

/// The runtime configuration (`config`, else one tract worker per core),
/// `flags` replacing or adding processors, less any cloud worker that
/// refuses connections (with a warning).
pub fn processors(config: &Option<PathBuf>, flags: &[ProcessorConfig]) -> Result<RuntimeConfig> {
    let config = match config {
        Some(p) => RuntimeConfig::load(p).context("cannot load the runtime configuration")?,
        None => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let processors: Vec<ProcessorConfig> = (0..cores)
                .map(|i| format!("cpu{i}=pool:core{i}").parse())
                .collect::<Result<_, _>>()?;
            RuntimeConfig {
                support: vec![OpSupport::All; processors.len()],
                accelerator: vec![false; processors.len()],
                processors,
                adaptive: None,
                thermal: None,
            }
        }
    };
    let mut c = config.with_overrides(flags);
    for (i, p) in c.processors.iter().enumerate() {
        if c.processors[..i].iter().any(|q| q.name == p.name) {
            bail!("processor '{}' is configured twice", p.name);
        }
    }
    let mut i = 0;
    while i < c.processors.len() {
        let p = &c.processors[i];
        let unreachable = p.remote.as_ref().and_then(|r| {
            multi_dnn::splash::cloud::RemoteEngine::from_config(r)
                .and_then(|e| e.reachable())
                .err()
        });
        if let Some(reason) = unreachable {
            eprintln!(
                "warning: leaving out processor '{}': {reason}; the run continues on the others",
                p.name
            );
            c.processors.remove(i);
            c.support.remove(i);
            c.accelerator.remove(i);
            if c.processors.is_empty() {
                bail!("no processor left to run on");
            }
            continue;
        }
        i += 1;
    }
    Ok(c)
}

/// The thermal set-up of `--thermal`: the configuration's `[thermal]`
/// table for its processors, its sensor if it names one, and the cloud
/// workers' link rates.
fn thermal_setup(a: &Args, config: &RuntimeConfig) -> Result<Option<ThermalSetup>> {
    let (true, Some(path)) = (a.thermal, &a.runtime_config) else {
        return Ok(None);
    };
    let (table, procs) = (config.thermal.as_ref(), &config.processors);
    let names: Vec<String> = procs.iter().map(|p| p.name.clone()).collect();
    let file = path.display().to_string();
    let params = multi_dnn::splash::thermal::profile::thermal_params(&file, table, &names)?;
    let sensor = multi_dnn::splash::thermal::profile::sensor_spec(&file, table, &names)?
        .map(|spec| {
            multi_dnn::splash::thermal::sensor::SysfsSensor::for_workers(&spec)
                .map_err(|e| anyhow::anyhow!("{file}: [thermal.sensor]: {e}"))
        })
        .transpose()?;
    let cloud = procs
        .iter()
        .enumerate()
        .filter_map(|(w, p)| p.remote.as_ref().map(|r| (w, r.kbps.map_or(0.0, |k| k as f64 / 1e3))))
        .collect();
    Ok(Some(ThermalSetup { params, sensor, cloud }))
}

/// Refuses `--rounds` that would repeat outages or have no duration to split.
fn check_rounds(rounds: usize, workload: &Workload) -> Result<()> {
    if rounds > 1 && !workload.outages.is_empty() {
        bail!(
            "{}: --rounds {rounds} would repeat the workload's outages; use --rounds 1",
            workload.file
        );
    }
    if rounds > 1 && workload.duration_s.is_none() {
        bail!(
            "{}: --rounds {rounds} needs a duration (duration_s or --duration-s)",
            workload.file
        );
    }
    Ok(())
}

/// Loads the workload's models on the processors, checks their outputs'
/// references unless `--no-check`, and registers them (timing each model's
/// largest subgraph per processor).
fn load_server(
    a: &Args,
    workload: &Workload,
    procs: &[ProcessorConfig],
    support: &[OpSupport],
    accel: &[bool],
) -> Result<(Server, Estimator)> {
    let graphs = mc::load_runnable_graphs(workload)?;
    let tty = std::io::stderr().is_terminal();
    let mut say = |msg: &str| {
        if tty {
            eprint!("\r\x1b[2K{msg}");
        }
    };
    let factory = scheduler_rt::factory(multi_dnn::splash::cloud::engines());
    let mut server = Server::load(procs, support, graphs, factory.clone(), &mut say)
        .with_context(|| format!("cannot load the models of {}", workload.file))?;
    if tty {
        eprintln!();
    }
    for (m, model) in server.models.iter().enumerate() {
        let u = &model.units;
        let (units, candidates, regions) = (u.units.len(), u.candidates.len(), u.regions.len());
        let app = &workload.apps[m].name;
        eprintln!("{app}: {units} units, {candidates} candidate subgraphs, {regions} regions");
    }
    eprintln!("{}", scheduling_line(procs, a.thermal));
    if !a.no_check {
        let engine = server
            .compute_references(&factory)
            .context("cannot compute the reference outputs")?;
        eprintln!("every output is compared with the whole model run by {engine} (max |diff| <= 1e-4 x output scale)");
    }
    let units: Vec<_> = server.models.iter().map(|m| m.units.clone()).collect();
    let mut base = Estimator::new(EstimatorParams::default(), accel, &units);
    server
        .register(&mut base)
        .context("registration (timing each model's largest subgraph per processor)")?;
    Ok((server, base))
}

pub fn run(a: Args) -> Result<()> {
    engine::pool::pool().set_enabled(a.tensor_pool == "on");
    multi_dnn::serve::set_thread_scheduling(a.scheduling == "thread");
    if a.rounds == 0 {
        bail!("--rounds 0: a run needs at least 1 round");
    }
    if a.thermal && (a.rounds > 1 || !a.plan.is_empty()) {
        bail!("--thermal runs each policy once in one piece: no --rounds or --plan");
    }
    if !a.plan.is_empty() {
        return plan::run(&a, &a.plan);
    }
    let multipliers = mc::multipliers(&a.sweep.slo_multipliers)?;
    let config = processors(&a.runtime_config, &a.processors)?;
    let (procs, support, accel) = (&config.processors, &config.support, &config.accelerator);
    let names: Vec<String> = procs.iter().map(|p| p.name.clone()).collect();
    let mut workload = mc::load_workload(&a.workload, &names, a.sweep.duration_s)?;
    let policies = a.sweep.policies_for(workload.render.is_some())?;
    crate::render_run::check_policies(&workload, &policies)?;
    if workload.render.is_some() {
        let graphs = mc::load_runnable_graphs(&workload)?;
        let on = render::Processors {
            procs,
            support,
            accel,
            names: &names,
        };
        return render::run(&a, &policies, &on, workload, graphs);
    }
    let options = Registry::builtin().options_for(&workload, &names);
    Registry::builtin().check(&policies, &options, a.thermal)?;
    let thermal = thermal_setup(&a, &config)?;
    let rounds = a.rounds.max(1);
    check_rounds(rounds, &workload)?;
    let (server, base) = load_server(&a, &workload, procs, support, accel)?;
    let units: Vec<_> = server.models.iter().map(|m| m.units.clone()).collect();
    let apps: Vec<String> = workload.apps.iter().map(|x| x.name.clone()).collect();
    let isolated = server.fastest_isolated_p99(&apps, a.isolated_runs, &mut |note| eprintln!("{note}"))?;
    workload.resolve_groups(&isolated)?;
    let total_s = workload.duration_s.map_or(0.0, |d| d / rounds as f64);
    let tty = std::io::stderr().is_terminal();
    let mut world = ServeWorld {
        setups: vec![ServeSetup {
            server: &server,
            units: units.clone(),
            estimator: base.clone(),
        }],
        choose: None,
        thermal,
        progress: Box::new(|label: &str, t: f64, log: &RunLog, in_system: usize| {
            if tty {
                let done = log.completed.len();
                eprint!("\r\x1b[2K[{label}] {t:.0}/{total_s:.0} s, {done} completed, {in_system} in system");
                let _ = std::io::stderr().flush();
            }
        }),
        heat: Vec::new(),
    };
    let sweep = Sweep {
        multipliers,
        policies,
        rounds,
        options: PolicyOptions::default(),
    };
    let mut recorder = Recorder::new(&units, names.len());
    let mut warned_priority = false;
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
            if let Some(e) = r.log.priority_error.as_ref().filter(|_| !warned_priority) {
                warned_priority = true;
                eprintln!(
                    "warning: {e}; the scheduler runs at normal priority, so its wake-ups may wait behind engine threads"
                );
            }
            recorder.add(r.log);
        },
    )?;
    let heat: Vec<String> = world.heat.iter().map(|(label, d)| d.summary(label)).collect();
    let mismatched = emit(&a, &outcomes, &names, &workload, &heat)?;
    if let Some(path) = &a.save_latencies {
        let saved = recorder.measured(&units, &base, names.clone(), apps, isolated.clone());
        mc::write(path, &serde_json::to_string(&saved)?)?;
    }
    if mismatched {
        bail!("outputs differed from the whole-model reference (see the reports)");
    }
    Ok(())
}

/// Prints the reports (one, or a comparison) and the thermal lines; says
/// whether an output differed from the reference.
fn emit(a: &Args, outcomes: &[Outcome], names: &[String], workload: &Workload, heat: &[String]) -> Result<bool> {
    let mut rows = Vec::new();
    for o in outcomes {
        let report = o.report("measured", names);
        if !a.sweep.json && outcomes.len() == 1 {
            print!("{}", report.text());
            print!("{}", multi_dnn::puzzle::group_figures::group_text(&o.workload, &o.log));
        }
        rows.push((o.multiplier, report));
    }
    let last_log = outcomes.last().map(|o| o.log.clone());
    let footer = "(measured on this machine; SLO met = share of completed and dropped requests that finished within their SLO; late requests still ran unless the workload sets drop_late)";
    mc::emit(
        &a.sweep,
        "measured",
        mc::compare_table,
        footer,
        &rows,
        last_log.as_ref(),
        names,
        workload,
    )?;
    for line in heat {
        if a.sweep.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
    Ok(rows.iter().any(|r| r.1.mismatches > 0))
}

/// `--thermal`'s help, its policies from the registry.
fn thermal_help() -> String {
    format!(
        "Emulate the device's heat beside the real run (Splash): the --runtime-config's [thermal] section gives each processor's thermal node (the format of a device profile's; see configs/runtime/splash_host.toml). The emulator is fed by the workers' real busy times; a processor that throttles is slowed for real (each of its results is held back as a duty-cycled core would be), one that switches off is an outage until it cools. Reports time to throttling and each processor's peak temperature; with the thermal policies {}",
        Registry::builtin().thermal_prose()
    )
}
