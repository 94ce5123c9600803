//! `stretch simulate --thermal`: a workload on a device that heats up
//! (Splash): the device profile's thermal emulator drives the simulated
//! processors, and each policy is compared by time to throttling, SLO
//! satisfaction and performance per temperature, with or without the
//! profile's cloud server as one more worker.

use super::Args;
use crate::multi_common as mc;
use anyhow::{Context, Result, bail};
use multi_dnn::Registry;
use multi_dnn::core::workload::{Arrival, Workload};
use multi_dnn::sim::SimOptions;
use multi_dnn::splash::thermal::profile::{CloudSpec, cloud_spec, thermal_params};
use multi_dnn::thermal_run::{Platform, Platforms, Row, uses};
use predictor::DeviceModel;
use std::fmt::Write as _;

/// The paper's Person Finder at 30 fps on a Pixel 4 (§6.2): seconds to
/// throttling of Band (HEFT), Band+Cloud and Splash.
const PAPER_S: [(&str, f64); 3] = [("Band", 242.0), ("Band+Cloud", 203.0), ("Splash", 436.0)];

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
            r.label(),
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
        base.label(),
        base.duration_s
    );
    let t = |r: &Row| r.throttle_s.unwrap_or(r.duration_s);
    for r in rows {
        let _ = writeln!(
            out,
            "  {:<24} {:>8.1} s  {:>5.2}x{}",
            r.label(),
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
fn sweep(platforms: &Platforms, w: &Workload, policies: &[String], fps: &[f64]) -> Result<String> {
    let Some(bests) = platforms.fps_sweep(w, policies, fps)? else {
        bail!("{}: --fps-sweep needs a workload with a [camera]", w.file);
    };
    let mut out = format!(
        "highest camera fps that never throttles in {:.0} s (of {}; simulated):\n",
        w.duration_s.unwrap_or(0.0),
        fps.iter().map(|f| format!("{f}")).collect::<Vec<_>>().join(", ")
    );
    let first = bests.first().copied().flatten();
    for (k, (p, best)) in policies.iter().zip(&bests).enumerate() {
        let at = best.map_or("throttles at every rate".into(), |(f, met)| {
            format!("{f} fps (SLO met {:.1}% there)", 100.0 * met)
        });
        let ratio = match (first, best) {
            (Some((b, _)), Some((f, _))) if k > 0 => format!(", {:.2}x the first", f / b),
            _ => String::new(),
        };
        let _ = writeln!(out, "  {p:<24} {at}{ratio}");
    }
    let _ = writeln!(
        out,
        "  paper (Pixel 4, Person Finder): Splash 1.53x Band, up to 1.63x Band+Cloud (Fig. 6.2)"
    );
    Ok(out)
}

/// The policy specs asked for, each checked (a `+cloud` one needs the
/// profile's cloud), and whether any runs without and any with the cloud.
fn policies(a: &Args, file: &str, cloud: Option<&CloudSpec>) -> Result<(Vec<String>, [bool; 2])> {
    let policies: Vec<String> = a
        .sweep
        .compare
        .as_deref()
        .or(a.sweep.policy.as_deref())
        .unwrap_or(multi_dnn::thermal_run::DEFAULT_POLICIES)
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let uses = uses(&Registry::builtin(), &policies, cloud.is_some(), file)?;
    Ok((policies, uses))
}

/// `--fps-sweep`'s rates, each one a camera rate `w` accepts.
fn fps_list(a: &Args, w: &Workload) -> Result<Option<Vec<f64>>> {
    let Some(list) = &a.fps_sweep else { return Ok(None) };
    let rate = |s: &str| match s.trim().parse::<f64>() {
        Ok(f) if f > 0.0 && f.is_finite() => {
            w.clone()
                .set_camera_fps(f, "--fps-sweep")
                .map_err(|e| anyhow::anyhow!("--fps-sweep {}: {}", s.trim(), e.reason))?;
            Ok(f)
        }
        _ => Err(anyhow::anyhow!("--fps-sweep: '{s}' is not a positive number")),
    };
    Ok(Some(list.split(',').map(rate).collect::<Result<Vec<f64>>>()?))
}

/// The workload with `--duration-s`; no render task.
fn workload(a: &Args) -> Result<Workload> {
    let mut w = Workload::load(&a.workload)?;
    if w.render.is_some() {
        bail!("{}: a thermal run does not take a [render] task", w.file);
    }
    if let Some(i) = w.apps.iter().position(|x| matches!(x.arrival, Arrival::Group { .. })) {
        bail!(
            "{}: app[{i}] has arrival = \"group\", which --thermal does not simulate (model groups run under simulate --plan or without --thermal)",
            w.file
        );
    }
    if let Some(d) = a.sweep.duration_s {
        w.set_duration_s(d, "--duration-s")?;
    }
    Ok(w)
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
    if a.plan.is_some() {
        bail!("--thermal does not run a static --plan: give one or the other");
    }
    if let Some(eta) = a.eta
        && !(0.0..=1.0).contains(&eta)
    {
        bail!("--eta {eta}: η weighs latency against heat, from 0 to 1");
    }
    let w = workload(a)?;
    let fps = fps_list(a, &w)?;
    let names: Vec<String> = model.profile().processors.keys().cloned().collect();
    thermal_params(&file, model.profile().thermal.as_ref(), &names)?;
    let (policies, uses) = policies(a, &file, cloud.as_ref())?;
    let graphs = mc::load_graphs(&w)?;
    let build = |on: bool, c: Option<(&CloudSpec, Option<f64>)>| {
        on.then(|| Platform::new(&model, &file, &graphs, &w, c)).transpose()
    };
    let platforms = Platforms {
        local: build(uses[0], None)?,
        cloud: build(uses[1], cloud.as_ref().map(|c| (c, a.cloud_mbps)))?,
        options: SimOptions {
            noise: a.noise,
            contention: a.contention,
            seed: a.seed,
            ..SimOptions::default()
        },
        eta: a.eta,
        registry: Registry::builtin(),
    };
    let rows = platforms.run_all(&w, &policies, &mut |r| {
        let throttled = r.throttle_s.map_or("never".into(), |t| format!("at {t:.1} s"));
        eprintln!("[{}] simulated {:.0} s: throttled {throttled}", r.label(), r.duration_s);
    })?;
    if a.sweep.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_text(&w, &model, &platforms, &rows);
    }
    if let Some(fps) = fps {
        print!("{}", sweep(&platforms, &w, &policies, &fps)?);
    }
    Ok(())
}

fn print_text(w: &Workload, model: &DeviceModel, platforms: &Platforms, rows: &[Row]) {
    let params_source = platforms
        .cloud
        .as_ref()
        .or(platforms.local.as_ref())
        .map(|p| p.params.source.clone())
        .unwrap_or_default();
    let camera = w.camera.map_or("none".into(), |c| {
        format!("{} fps, SLO {:.1} ms per request", c.fps, c.slo_ms)
    });
    println!(
        "thermal simulation of {} on {} ({} s, camera {camera}; thermal figures: {params_source})",
        w.file,
        model.profile().name,
        w.duration_s.unwrap_or(0.0),
    );
    print!("{}", table(rows));
    print!("{}", ratios(rows));
    println!(
        "(simulated: latencies predicted by the profile, temperatures by its thermal emulator; throttle = first time any processor slowed or switched off; busy = share of the run; PPT = subgraphs per second / peak rise above ambient, FPS/°C)"
    );
}
