//! `stretch simulate --thermal`: a workload on a device that heats up
//! (Splash): the device profile's thermal emulator drives the simulated
//! processors, and each policy is compared by time to throttling, SLO
//! satisfaction and performance per temperature, with or without the
//! profile's cloud server as one more worker.

use super::simulate::Args;
use crate::multi_common as mc;
use anyhow::{Context, Result, bail};
use predictor::DeviceModel;
use scheduler_rt::multi::estimator::{Estimator, EstimatorParams};
use scheduler_rt::multi::policy::{PolicyOptions, THERMAL_POLICY_NAMES};
use scheduler_rt::multi::sim::{Latency, SimOptions, Truth, simulate_thermal};
use scheduler_rt::multi::thermal::driver::{ThermalDriver, WorkerHeat};
use scheduler_rt::multi::thermal::profile::{CLOUD, CloudSpec, cloud_spec, thermal_params};
use scheduler_rt::multi::workload::Workload;
use scheduler_rt::multi::{ModelUnits, OpSupport, POLICY_NAMES, ProcSet, Scheduler, policy_by_name};
use std::fmt::Write as _;

/// The paper's Person Finder at 30 fps on a Pixel 4 (§6.2): seconds to
/// throttling of Band (HEFT), Band+Cloud and Splash.
const PAPER_S: [(&str, f64); 3] = [("Band", 242.0), ("Band+Cloud", 203.0), ("Splash", 436.0)];

/// Every processor of the device, and the cloud worker when asked for.
struct Platform {
    names: Vec<String>,
    units: Vec<ModelUnits>,
    truth: Truth,
    accel: Vec<bool>,
}

fn platform(
    model: &DeviceModel,
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
    let cloud_column = |c: &scheduler_rt::multi::Candidate| match cloud {
        Some((spec, mbps)) => vec![Latency::exact(spec.latency_ms(c.io_bytes, c.flops, mbps))],
        None => Vec::new(),
    };
    let (units, table) = super::simulate::predicted(model, graphs, workload, &names, &support, &cloud_column)?;
    Ok(Platform {
        names,
        units,
        truth: Truth {
            table,
            ..Truth::default()
        },
        accel,
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
    let known = POLICY_NAMES.contains(&name) || THERMAL_POLICY_NAMES.contains(&name) || name == "rr";
    if !known {
        bail!(
            "unknown policy '{spec}' for a thermal run (known: {}, {}; add +cloud to offer the cloud worker)",
            POLICY_NAMES.join(", "),
            THERMAL_POLICY_NAMES.join(", ")
        );
    }
    Ok((name.to_string(), cloud))
}

fn run_one(
    a: &Args,
    model: &DeviceModel,
    graphs: &[graph_ir::Graph],
    w: &Workload,
    spec: &str,
    cloud: Option<&CloudSpec>,
) -> Result<Row> {
    let (name, with_cloud) = split(spec)?;
    let file = a.device.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    let cloud_arg = match (with_cloud, cloud) {
        (false, _) => None,
        (true, Some(c)) => Some((c, a.cloud_mbps)),
        (true, None) => bail!("{file}: policy '{spec}' needs the cloud worker, and the profile has no [cloud] section"),
    };
    let p = platform(model, graphs, w, cloud_arg)?;
    let params = thermal_params(&file, model.profile().thermal.as_ref(), &p.names)?;
    let mut est = Estimator::new(EstimatorParams::default(), &p.accel, &p.units);
    for (m, u) in p.units.iter().enumerate() {
        for wk in 0..p.names.len() {
            if let Some(c) = u.largest_on(wk) {
                est.set_base(m, c, wk, p.truth.table[m][c][wk].alone_ms);
            }
        }
    }
    let fastest: Vec<f64> = p
        .units
        .iter()
        .zip(&p.truth.table)
        .map(|(u, t)| {
            (0..p.names.len())
                .map(|wk| {
                    u.isolated_plan(wk, ProcSet::from_iter(0..p.names.len()))
                        .map_or(f64::INFINITY, |s| s.iter().map(|(c, q)| t[*c][*q].alone_ms).sum())
                })
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let slo = mc::slos(w, &fastest);
    let options = PolicyOptions {
        eta: a.eta,
        ..PolicyOptions::default()
    };
    let base = if name == "rr" { "round-robin" } else { name.as_str() };
    let policy = if base == "fixed" {
        mc::make_policy(base, w, &p.names)?
    } else {
        policy_by_name(base, &options).with_context(|| format!("unknown policy '{name}'"))?
    };
    let mut sched = Scheduler::new(p.units, &p.names, policy, est);
    let mut driver = ThermalDriver::new(params, 1000.0)?;
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
        policy: name,
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
fn sweep(
    a: &Args,
    model: &DeviceModel,
    graphs: &[graph_ir::Graph],
    w: &Workload,
    policies: &[String],
    cloud: Option<&CloudSpec>,
    fps: &[f64],
) -> Result<String> {
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
            wf.camera = Some(scheduler_rt::multi::workload::Camera {
                fps: f,
                slo_ms: cam.slo_ms * cam.fps / f,
            });
            let r = run_one(a, model, graphs, &wf, p, cloud)?;
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
                (Some((b, _)), Some((f, _))) if !bests.is_empty() => format!(", {:.2}x the first", f / b),
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
    let mut names: Vec<String> = model.profile().processors.keys().cloned().collect();
    thermal_params(&file, model.profile().thermal.as_ref(), &names)?;
    for p in &policies {
        if split(p)?.1 {
            if cloud.is_none() {
                bail!("{file}: policy '{p}' needs the cloud worker, and the profile has no [cloud] section");
            }
            if !names.iter().any(|n| n == CLOUD) {
                names.push(CLOUD.into());
            }
        }
    }
    let params_source = thermal_params(&file, model.profile().thermal.as_ref(), &names)?.source;
    let graphs = mc::load_graphs(&w)?;
    let mut rows = Vec::new();
    for p in &policies {
        let r = run_one(a, &model, &graphs, &w, p, cloud.as_ref())?;
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
        print!("{}", sweep(a, &model, &graphs, &w, &policies, cloud.as_ref(), &fps)?);
    }
    Ok(())
}
