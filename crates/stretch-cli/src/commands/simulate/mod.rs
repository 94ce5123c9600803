//! `stretch simulate`: the multi-DNN scheduler on simulated processors.

mod plan;
mod render;
mod thermal;

use crate::commands::serve::processors;
use crate::multi_common as mc;
use anyhow::{Context, Result, bail};
use clap::Args as ClapArgs;
use multi_dnn::core::estimator::{Estimator, EstimatorParams};
use multi_dnn::core::workload::Workload;
use multi_dnn::experiment::{self, SimSetup, SimWorld, Sweep};
use multi_dnn::predicted;
use multi_dnn::sim::measured::Measured;
use multi_dnn::sim::{SimOptions, Truth};
use multi_dnn::{ModelUnits, PolicyOptions, Registry, analyze};
use predictor::DeviceModel;
use scheduler_rt::ProcessorConfig;
use std::path::PathBuf;

/// Simulate a multi-DNN workload: the same scheduler and policy objects as
/// `stretch serve`, on a simulated clock with processors whose latencies
/// come from a device profile's predictor (`--device`) or from a `serve`
/// run's measurements (`--latencies`). Every figure it prints is simulated.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Workload (TOML); see configs/workloads/.
    #[arg(long, value_name = "W.toml")]
    pub workload: PathBuf,

    /// Device profile: processors, their operator support and the predictor
    /// of every subgraph's latency.
    #[arg(long, value_name = "D.toml", conflicts_with = "latencies")]
    pub device: Option<PathBuf>,

    /// Latencies measured by `stretch serve --save-latencies` (use the same
    /// --runtime-config as that run).
    #[arg(long, value_name = "L.json", requires = "runtime_config")]
    pub latencies: Option<PathBuf>,

    /// Runtime configuration giving processors and operator support (with --latencies).
    #[arg(long = "runtime-config", value_name = "C.toml")]
    pub runtime_config: Option<PathBuf>,

    /// Processor specs added to or replacing the configuration's (with --latencies).
    #[arg(long = "processor", value_name = "SPEC")]
    pub processors: Vec<ProcessorConfig>,

    /// Run a static plan from `stretch analyze -o` (Puzzle) on the
    /// --device profile's simulated processors and report each model
    /// group's makespans and score; --slo-multipliers then lists period
    /// multipliers.
    #[arg(long, value_name = "plan.json", requires = "device")]
    pub plan: Option<PathBuf>,

    #[command(flatten)]
    pub sweep: mc::SweepArgs,

    /// Relative spread of each run's latency (log-normal), e.g. 0.05; with
    /// --latencies each entry's measured spread is used unless this is set.
    #[arg(long, default_value_t = 0.0)]
    pub noise: f64,

    /// Latency factor of a subgraph started while another processor is busy
    /// (Band Table 1: 1.4-2x for two models on one processor); with
    /// --latencies the measured busy-neighbour latencies already include it.
    #[arg(long, default_value_t = 1.0)]
    pub contention: f64,

    /// Seed of the noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    // Its help lists the registry's policies a thermal run takes.
    #[arg(long, requires = "device", help = thermal_help())]
    pub thermal: bool,

    /// With --thermal: the cloud link's bandwidth in Mbit/s, replacing the
    /// profile's (Splash measured 249; try 128 or 13).
    #[arg(long = "cloud-mbps", requires = "thermal")]
    pub cloud_mbps: Option<f64>,

    /// With --thermal: η of max-weighted-ppt, minimising η·latency +
    /// (1 − η)·temperature rise, each over its largest value among the
    /// options; from 0 to 1: 1 is latency only, 0 heat only. Default 0.5.
    #[arg(long, requires = "thermal", allow_negative_numbers = true)]
    pub eta: Option<f64>,

    /// With --thermal and a [camera] workload: also run every policy at
    /// each of these camera rates and report the highest that never
    /// throttles. Each rate is held to the workload's limits: at most
    /// 10000 frames and frame requests per second, at most 5000000
    /// requests over the duration.
    #[arg(long = "fps-sweep", value_name = "F1,F2,...", requires = "thermal")]
    pub fps_sweep: Option<String>,

    /// With --latencies: also scale every run by the machine speed of a
    /// randomly drawn 250 ms window of the measured run (off by default:
    /// drawn at random, the windows' speeds can widen the simulated latency
    /// tail beyond serve's).
    #[arg(long)]
    pub drift: bool,
}

struct Setup {
    names: Vec<String>,
    accel: Vec<bool>,
    units: Vec<ModelUnits>,
    truth: Truth,
    isolated: Option<Vec<f64>>,
    /// The estimator's registration state of the measured run.
    registration: Option<multi_dnn::core::estimator::SavedEstimates>,
    source: String,
}

fn from_device(a: &Args, graphs: &[graph_ir::Graph], workload: &Workload) -> Result<Setup> {
    let path = a.device.as_ref().context("give --device or --latencies")?;
    let model = DeviceModel::load(path).with_context(|| format!("cannot load {}", path.display()))?;
    let profile = model.profile().clone();
    let (names, support, accel) = predicted::processors(&model);
    let (units, truth) = predicted::table(&model, graphs, workload, &names, &support, &|_| Vec::new())?;
    let scaled = graphs.iter().filter(|g| profile.models.contains_key(&g.name)).count();
    Ok(Setup {
        names,
        accel,
        units,
        truth: Truth {
            table: truth,
            overhead_ms: 0.0,
            overhead_quantiles: Vec::new(),
            speed: Vec::new(),
            speed_window_ms: 0.0,
            arrival_lag_quantiles: Vec::new(),
            spread_correlation: Vec::new(),
        },
        isolated: None,
        registration: None,
        source: format!(
            "predicted by the {} device profile{}",
            profile.name,
            if scaled > 0 {
                format!(", {scaled} app(s) scaled to its measured whole-model latencies")
            } else {
                String::new()
            }
        ),
    })
}

fn from_measured(a: &Args, graphs: &[graph_ir::Graph]) -> Result<Setup> {
    let path = a.latencies.as_ref().context("give --device or --latencies")?;
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let m: Measured = serde_json::from_str(&text).with_context(|| format!("{}: not a latency file", path.display()))?;
    let scheduler_rt::RuntimeConfig {
        processors: procs,
        support,
        accelerator: accel,
        ..
    } = processors(&a.runtime_config, &a.processors)?;
    let names: Vec<String> = procs.iter().map(|p| p.name.clone()).collect();
    if names != m.processors {
        bail!(
            "{}: measured on processors {:?}, configured {:?}",
            path.display(),
            m.processors,
            names
        );
    }
    let mut units = Vec::new();
    for g in graphs {
        units.push(analyze(g, &names, &support).with_context(|| format!("model '{}'", g.name))?);
    }
    let shape_ok =
        m.truth.len() == units.len() && m.truth.iter().zip(&units).all(|(t, u)| t.len() == u.candidates.len());
    if !shape_ok {
        bail!(
            "{}: measured for other models or operator support than this workload",
            path.display()
        );
    }
    let truth = m.truth();
    Ok(Setup {
        names,
        accel,
        units,
        truth,
        isolated: Some(m.isolated_ms.clone()),
        registration: Some(m.registration.clone()),
        source: format!("latencies measured by stretch serve ({})", path.display()),
    })
}

/// A render-task workload, simulated (Heimdall).
fn run_render(a: &Args, mut w: Workload, graphs: Vec<graph_ir::Graph>) -> Result<()> {
    if let Some(d) = a.sweep.duration_s {
        w.set_duration_s(d, "--duration-s")?;
    }
    let policies = a.sweep.policies_for(true)?;
    crate::render_run::check_policies(&w, &policies)?;
    render::run(a, &policies, w, graphs)
}

/// The workload on `setup`'s processors with its groups resolved, each
/// app's isolated latency, and the estimator registered as `serve` would.
fn prepare(a: &Args, setup: &Setup) -> Result<(Workload, Vec<f64>, Estimator)> {
    let mut workload = mc::load_workload(&a.workload, &setup.names, a.sweep.duration_s)?;
    let n = setup.names.len();
    let isolated: Vec<f64> = match &setup.isolated {
        Some(v) => v.clone(),
        None => predicted::fastest_isolated_ms(&setup.units, &setup.truth, n),
    };
    workload.resolve_groups(&isolated)?;
    let mut base = Estimator::new(EstimatorParams::default(), &setup.accel, &setup.units);
    let registered = setup.registration.as_ref().is_some_and(|r| base.load(r));
    if !registered {
        predicted::register(&mut base, &setup.units, &setup.truth, n);
    }
    Ok((workload, isolated, base))
}

pub fn run(a: Args) -> Result<()> {
    if a.thermal {
        return thermal::run(&a);
    }
    if let Some(plan) = &a.plan {
        return plan::run(&a, plan);
    }
    let multipliers = mc::multipliers(&a.sweep.slo_multipliers)?;
    if !(a.noise >= 0.0 && a.noise.is_finite() && a.contention >= 1.0 && a.contention.is_finite()) {
        bail!("--noise must be >= 0 and --contention >= 1");
    }
    let probe = Workload::load(&a.workload)?;
    let graphs = mc::load_graphs(&probe)?;
    if probe.render.is_some() {
        return run_render(&a, probe, graphs);
    }
    let policies = a.sweep.policies_for(false)?;
    crate::render_run::check_policies(&probe, &policies)?;
    let setup = if a.latencies.is_some() {
        from_measured(&a, &graphs)?
    } else {
        from_device(&a, &graphs, &probe)?
    };
    let (workload, isolated, base) = prepare(&a, &setup)?;
    eprintln!("simulated processors: {} ({})", setup.names.join(", "), setup.source);
    let options = SimOptions {
        noise: a.noise,
        contention: a.contention,
        seed: a.seed,
        drift: a.drift,
        stop_at_first_miss: false,
    };
    let mut world = SimWorld {
        names: setup.names.clone(),
        setups: vec![SimSetup {
            units: setup.units.clone(),
            estimator: base,
            truth: setup.truth.clone(),
        }],
        choose: None,
        options,
    };
    let single = !a.sweep.json && multipliers.len() * policies.len() == 1;
    let sweep = Sweep {
        multipliers,
        policies,
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
            let report = r.report("simulated", &setup.names);
            if single {
                print!("{}", report.text());
                print!("{}", multi_dnn::puzzle::group_figures::group_text(r.workload, r.log));
            }
            let label = r.config.label();
            eprintln!("[{label}] simulated {:.1} s in {:.3} s", report.duration_s, r.wall_s);
        },
    )?;
    let rows: Vec<_> = outcomes
        .iter()
        .map(|o| {
            let report = o.report("simulated", &setup.names);
            (o.multiplier, report)
        })
        .collect();
    let last = outcomes.last().map(|o| o.log.clone());
    let footer = format!(
        "(simulated: {}; SLO met = share of completed and dropped requests that finished within their SLO)",
        setup.source
    );
    mc::emit(
        &a.sweep,
        "simulated",
        mc::compare_table,
        &footer,
        &rows,
        last.as_ref(),
        &setup.names,
        &workload,
    )
}

/// `--thermal`'s help, its policies from the registry.
fn thermal_help() -> String {
    format!(
        "Model the device's heat (Splash): the --device profile's [thermal] emulator drives the simulated processors (CPU/GPU slow down, DSP/NPU switch off when hot) and each policy is reported by time to throttling, SLO satisfaction and performance per temperature. Policies: {}, each with +cloud to add the profile's [cloud] server as a worker; default --compare {}",
        Registry::builtin().thermal_run_list(),
        multi_dnn::thermal_run::DEFAULT_POLICIES
    )
}
