//! `stretch simulate --thermal`: a workload on a device that heats up
//! (Splash): the device profile's thermal emulator drives the simulated
//! processors, and each policy is compared by time to throttling, SLO
//! satisfaction and performance per temperature, with or without the
//! profile's cloud server as one more worker.

use super::simulate::Args;
use crate::multi_common as mc;
use anyhow::{Context, Result, bail};
use multi_dnn::core::estimator::{Estimator, EstimatorParams};
use multi_dnn::core::workload::Workload;
use multi_dnn::policy::PolicyOptions;
use multi_dnn::sim::{Latency, SimOptions, Truth, simulate_thermal};
use multi_dnn::splash::thermal::ThermalParams;
use multi_dnn::splash::thermal::driver::{ThermalDriver, WorkerHeat};
use multi_dnn::splash::thermal::profile::{CLOUD, CloudSpec, cloud_spec, thermal_params};
use multi_dnn::{ModelUnits, OpSupport, Registry, Scheduler};
use predictor::DeviceModel;
use std::fmt::Write as _;

/// The paper's Person Finder at 30 fps on a Pixel 4 (§6.2): seconds to
/// throttling of Band (HEFT), Band+Cloud and Splash.
const PAPER_S: [(&str, f64); 3] = [("Band", 242.0), ("Band+Cloud", 203.0), ("Splash", 436.0)];

/// Every processor of the device, and the cloud worker when asked for:
/// what each run on it starts from.
struct Platform {
    names: Vec<String>,
    units: Vec<ModelUnits>,
    truth: Truth,
    params: ThermalParams,
    /// The estimator with each model's largest subgraph registered.
    base: Estimator,
    /// Per model, its simulated isolated latency on its fastest processor.
    fastest: Vec<f64>,
    /// The cloud worker's index and link (Mbit/s), when it is offered.
    cloud: Option<(usize, f64)>,
}

fn platform(
    model: &DeviceModel,
    file: &str,
    graphs: &[graph_ir::Graph],
    workload: &Workload,
    cloud: Option<(&CloudSpec, Option<f64>)>,
) -> Result<Platform> {
    let profile = model.profile();
    let (mut names, mut support) = crate::puzzle_setup::profile_processors(profile);
    let mut accel: Vec<bool> = profile
        .processors
        .values()
        .map(|p| p.kind != predictor::profile::ProcessorKind::Cpu)
        .collect();
    if cloud.is_some() {
        names.push(CLOUD.into());
        support.push(OpSupport::All);
        accel.push(true);
    }
    let cloud_column = |c: &multi_dnn::Candidate| match cloud {
        Some((spec, mbps)) => vec![Latency::exact(spec.latency_ms(c.io_bytes, c.flops, mbps))],
        None => Vec::new(),
    };
    let (units, table) = super::simulate::predicted(model, graphs, workload, &names, &support, &cloud_column)?;
    let params = thermal_params(file, profile.thermal.as_ref(), &names)?;
    let n = names.len();
    let truth = Truth {
        table,
        ..Truth::default()
    };
    let mut base = Estimator::new(EstimatorParams::default(), &accel, &units);
    super::simulate::register(&mut base, &units, &truth, n);
    let fastest = super::simulate::fastest_isolated_ms(&units, &truth, n);
    Ok(Platform {
        cloud: cloud.map(|(spec, mbps)| (n - 1, mbps.unwrap_or(spec.bandwidth_mbps.value))),
        names,
        units,
        truth,
        params,
        base,
        fastest,
    })
}

/// One run's outcome.
#[derive(serde::Serialize)]
struct Row {
    policy: String,
    cloud: bool,
    camera_fps: f64,
    duration_s: f64,
    /// Seconds until a processor first throttled (slowed or switched
    /// off); `None`: not within the run.
    throttle_s: Option<f64>,
    slo_met: f64,
    completed: usize,
    submitted: usize,
    frames_done: u64,
    workers: Vec<WorkerHeat>,
    /// Per worker: subgraphs per second over its peak rise (FPS/°C).
    ppt: Vec<Option<f64>>,
    policy_notes: Vec<String>,
}

/// A policy name with an optional `+cloud`.
fn split(spec: &str) -> Result<(String, bool)> {
    let (name, cloud) = match spec.strip_suffix("+cloud") {
        Some(n) => (n, true),
        None => (spec, false),
    };
    let registry = Registry::builtin();
    if registry.get(name).is_none_or(|e| e.needs.render) {
        bail!(
            "unknown policy '{spec}' for a thermal run (known: {}; add +cloud to offer the cloud worker)",
            registry.names_where(|e| !e.needs.render).join(", ")
        );
    }
    Ok((name.to_string(), cloud))
}

fn run_one(a: &Args, p: &Platform, w: &Workload, name: &str, with_cloud: bool) -> Result<Row> {
    let slo = w.slos(&p.fastest);
    let options = PolicyOptions {
        eta: a.eta,
        ..PolicyOptions::for_workload(w, &p.names)
    };
    let policy = mc::make_policy_with(name, &options)?;
    let mut sched = Scheduler::new(p.units.clone(), &p.names, policy, p.base.clone());
    let mut driver = ThermalDriver::new(p.params.clone())?;
    if let Some((w, mbps)) = p.cloud {
        driver.set_cloud(w, mbps);
    }
    let sim = SimOptions {
        noise: a.noise,
        contention: a.contention,
        seed: a.seed,
        ..SimOptions::default()
    };
    let log = simulate_thermal(&mut sched, w, slo, &p.truth, sim, Some(&mut driver))?;
    let met = log.completed.iter().filter(|c| c.met_slo()).count();
    let run_ms = log.end_ms.max(w.duration_s.unwrap_or(0.0) * 1e3);
    Ok(Row {
        ppt: driver.heat.iter().map(|h| h.ppt(run_ms, driver.ambient_c())).collect(),
        policy: name.to_string(),
        cloud: with_cloud,
        camera_fps: w.camera.map_or(0.0, |c| c.fps),
        duration_s: w.duration_s.unwrap_or(log.end_ms / 1e3),
        throttle_s: driver.first_throttle_ms().map(|t| t / 1e3),
        slo_met: met as f64 / log.completed.len().max(1) as f64,
        completed: log.completed.len(),
        submitted: log.submitted.iter().sum(),
        frames_done: log.frames_done,
        workers: driver.heat.clone(),
        policy_notes: sched.policy_notes(),
    })
}

/// The platforms the runs use, each built once: without and with the cloud.
struct Platforms {
    local: Option<Platform>,
    cloud: Option<Platform>,
}

impl Platforms {
    /// A run of policy `spec` (`NAME` or `NAME+cloud`) on `w`.
    fn run(&self, a: &Args, w: &Workload, spec: &str) -> Result<Row> {
        let (name, with_cloud) = split(spec)?;
        let p = if with_cloud { &self.cloud } else { &self.local };
        let p = p
            .as_ref()
            .with_context(|| format!("no platform built for policy '{spec}'"))?;
        run_one(a, p, w, &name, with_cloud)
    }
}

fn label(r: &Row) -> String {
    format!("{}{}", r.policy, if r.cloud { "+cloud" } else { "" })
}

fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let workers: Vec<String> = rows
        .iter()
        .max_by_key(|r| r.workers.len())
        .map(|r| r.workers.iter().map(|h| h.name.clone()).collect())
        .unwrap_or_default();
    let _ = write!(
        out,
        "{:<24} {:>10} {:>8} {:>9}",
        "policy", "throttle", "SLO met", "frames"
    );
    for n in &workers {
        let _ = write!(out, "  {:>22}", format!("{n}: busy/peak/PPT"));
    }
    out.push('\n');
    for r in rows {
        let throttle = r.throttle_s.map_or("never".to_string(), |t| format!("{t:.1} s"));
        let _ = write!(
            out,
            "{:<24} {:>10} {:>7.1}% {:>9}",
            label(r),
            throttle,
            100.0 * r.slo_met,
            r.frames_done
        );
        for n in &workers {
            let cell = match r.workers.iter().position(|h| h.name == *n) {
                Some(k) => format!(
                    "{:.0}%/{:.1}°C/{}",
                    100.0 * r.workers[k].busy_ms / (r.duration_s * 1e3),
                    r.workers[k].peak_c,
                    r.ppt[k].map_or("-".into(), |p| format!("{p:.1}"))
                ),
                None => "-".into(),
            };
            let _ = write!(out, "  {cell:>22}");
        }
        out.push('\n');
        for note in &r.policy_notes {
            let _ = writeln!(out, "    {note}");
        }
    }
    out
}

/// Time to throttle of each run against the first (`base`), beside the
/// paper's ratios to Band.
fn ratios(rows: &[Row]) -> String {
    let Some(base) = rows.first() else {
        return String::new();
    };
    let mut out = format!(
        "time to throttle against {} (simulated; a run that never throttled counts its whole {:.0} s, a lower bound):\n",
        label(base),
        base.duration_s
    );
    let t = |r: &Row| r.throttle_s.unwrap_or(r.duration_s);
    for r in rows {
        let _ = writeln!(
            out,
            "  {:<24} {:>8.1} s  {:>5.2}x{}",
            label(r),
            t(r),
            t(r) / t(base),
            if r.throttle_s.is_none() {
                " (never throttled)"
            } else {
                ""
            }
        );
    }
    let band = PAPER_S[0].1;
    let _ = writeln!(
        out,
        "  paper (Pixel 4, Person Finder 30 fps): {}",
        PAPER_S
            .iter()
            .map(|(n, s)| format!("{n} {s:.0} s ({:.2}x)", s / band))
            .collect::<Vec<_>>()
            .join(", ")
    );
    out
}

/// The highest camera rate in `fps` at which each policy never throttled.
fn sweep(a: &Args, platforms: &Platforms, w: &Workload, policies: &[String], fps: &[f64]) -> Result<String> {
    let Some(cam) = w.camera else {
        bail!("{}: --fps-sweep needs a workload with a [camera]", w.file);
    };
    let mut out = format!(
        "highest camera fps that never throttles in {:.0} s (of {}; simulated):\n",
        w.duration_s.unwrap_or(0.0),
        fps.iter().map(|f| format!("{f}")).collect::<Vec<_>>().join(", ")
    );
    let mut bests = Vec::new();
    for p in policies {
        let mut best = None;
        for &f in fps {
            let mut wf = w.clone();
            wf.camera = Some(multi_dnn::core::workload::Camera {
                fps: f,
                slo_ms: cam.slo_ms * cam.fps / f,
            });
            let r = platforms.run(a, &wf, p)?;
            if r.throttle_s.is_none() {
                best = Some((f, r.slo_met));
            }
        }
        let _ = writeln!(
            out,
            "  {p:<24} {}{}",
            best.map_or("throttles at every rate".into(), |(f, met)| format!(
                "{f} fps (SLO met {:.1}% there)",
                100.0 * met
            )),
            match (bests.first().copied().flatten(), best) {
                (Some((b, _)), Some((f, _))) => format!(", {:.2}x the first", f / b),
                _ => String::new(),
            }
        );
        bests.push(best);
    }
    let _ = writeln!(
        out,
        "  paper (Pixel 4, Person Finder): Splash 1.53x Band, up to 1.63x Band+Cloud (Fig. 6.2)"
    );
    Ok(out)
}

pub fn run(a: &Args) -> Result<()> {
    let path = a
        .device
        .as_ref()
        .context("--thermal needs --device D.toml (a profile with a [thermal] section)")?;
    let model = DeviceModel::load(path).with_context(|| format!("cannot load {}", path.display()))?;
    let file = path.display().to_string();
    let cloud = cloud_spec(&file, model.profile().cloud.as_ref())?;
    if let Some(m) = a.cloud_mbps
        && !(m > 0.0 && m.is_finite())
    {
        bail!("--cloud-mbps must be positive, got {m}");
    }
    let mut w = Workload::load(&a.workload)?;
    if w.render.is_some() {
        bail!("{}: a thermal run does not take a [render] task", w.file);
    }
    if let Some(d) = a.sweep.duration_s {
        if !(d.is_finite() && d > 0.0) {
            bail!("--duration-s must be positive, got {d}");
        }
        w.duration_s = Some(d);
    }
    let policies: Vec<String> = a
        .sweep
        .compare
        .as_deref()
        .or(a.sweep.policy.as_deref())
        .unwrap_or("heft,heft+cloud,min-heat+cloud,max-weighted-ppt+cloud")
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let names: Vec<String> = model.profile().processors.keys().cloned().collect();
    thermal_params(&file, model.profile().thermal.as_ref(), &names)?;
    let mut uses = [false; 2];
    for p in &policies {
        let with_cloud = split(p)?.1;
        if with_cloud && cloud.is_none() {
            bail!("{file}: policy '{p}' needs the cloud worker, and the profile has no [cloud] section");
        }
        uses[usize::from(with_cloud)] = true;
    }
    let graphs = mc::load_graphs(&w)?;
    let build = |on: bool, c: Option<(&CloudSpec, Option<f64>)>| {
        on.then(|| platform(&model, &file, &graphs, &w, c)).transpose()
    };
    let platforms = Platforms {
        local: build(uses[0], None)?,
        cloud: build(uses[1], cloud.as_ref().map(|c| (c, a.cloud_mbps)))?,
    };
    let params_source = platforms
        .cloud
        .as_ref()
        .or(platforms.local.as_ref())
        .map(|p| p.params.source.clone())
        .unwrap_or_default();
    let mut rows = Vec::new();
    for p in &policies {
        let r = platforms.run(a, &w, p)?;
        eprintln!(
            "[{}] simulated {:.0} s: throttled {}",
            label(&r),
            r.duration_s,
            r.throttle_s.map_or("never".into(), |t| format!("at {t:.1} s"))
        );
        rows.push(r);
    }
    let fps = match &a.fps_sweep {
        Some(list) => Some(
            list.split(',')
                .map(|s| match s.trim().parse::<f64>() {
                    Ok(f) if f > 0.0 && f.is_finite() => Ok(f),
                    _ => Err(anyhow::anyhow!("--fps-sweep: '{s}' is not a positive number")),
                })
                .collect::<Result<Vec<f64>>>()?,
        ),
        None => None,
    };
    if a.sweep.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!(
            "thermal simulation of {} on {} ({} s, camera {}; thermal figures: {})",
            w.file,
            model.profile().name,
            w.duration_s.unwrap_or(0.0),
            w.camera.map_or("none".into(), |c| format!(
                "{} fps, SLO {:.1} ms per request",
                c.fps, c.slo_ms
            )),
            params_source
        );
        print!("{}", table(&rows));
        print!("{}", ratios(&rows));
        println!(
            "(simulated: latencies predicted by the profile, temperatures by its thermal emulator; throttle = first time any processor slowed or switched off; busy = share of the run; PPT = subgraphs per second / peak rise above ambient, FPS/°C)"
        );
    }
    if let Some(fps) = fps {
        print!("{}", sweep(a, &platforms, &w, &policies, &fps)?);
    }
    Ok(())
}
