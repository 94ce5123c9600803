//! End-to-end accuracy of a device model on whole CNNs measured on tract.
//!
//! Measures every model (the torchvision fixtures plus generated ResNet,
//! MobileNetV2 and RegNet-style variants with random depth and width, and
//! with `--wide N` N more of VGG-style (large fully connected heads) and
//! Inception-style (parallel 1x1/3x3/5x5/pool branches) families, with
//! `--branch-widths N` N ResNet-style models whose stage widths are drawn as
//! a branched model's branches have them, none of them seen by the
//! predictor's fit) twice, independently (two compilations),
//! on one thread pinned to one core, and compares the median of the first
//! with the device model's prediction. The measurements are interleaved:
//! `--rounds` rounds each time every compilation of every model for a block
//! of runs (one untimed run first), so a change in the machine's speed over
//! the minutes of the benchmark falls on all models and both measurements
//! alike instead of on whichever ran then; the CPU time the hypervisor stole
//! meanwhile is printed. Prints ±5/±10/±15% accuracy, RMSE and RMSPE, and the share of
//! models whose two measurements agree within ±10% (repeatability), the same
//! two figures with each measurement taken as the 10th percentile of its runs
//! instead of the median (a statistic that noise from the rest of the
//! machine, which only adds time, disturbs less), plus the time
//! `predict_graph` takes on resnet50.
//!
//! Where the profile's forests were fitted to the 10th percentile of each
//! kernel's runs (`stretch fit --statistic p10`), the models are judged,
//! and a calibration fitted, on the 10th percentile of their runs too; the
//! report names the statistic first and gives the other beside it.
//!
//! The device profile's in-model calibration, when it names one, is applied
//! (`--uncalibrated` ignores it; `--calibration FILE` applies another).
//! `--times FILE` keeps the measurements in FILE, or, when it exists,
//! judges the model on the measurements it keeps instead of timing again;
//! `--dump FILE` writes every model's measurements and whole prediction.
//! With `--calibrate-with`, `--speed-probe K` (default 10) of those models,
//! evenly spaced among them, also give the machine's speed at the time:
//! one factor for every kernel, the median of measured / predicted
//! ([`Calibration::speed`]), and the held-out models are judged scaled by
//! it as well (a machine's speed drifts over minutes, which a profile
//! measured once cannot know), and by two factors fitted to the same
//! models, one for grouped and depthwise convolutions and one for the rest
//! ([`Calibration::speed_by_kind`]: a slower phase can slow the first
//! unlike the rest).
//!
//! `--calibrate-with N` also times N generated models (and N/3 VGG/Inception-
//! style ones) from seeds 5000/6000 in the same interleaved rounds, fits an
//! in-model calibration to them (`--ridge`, `--calibration-out FILE`) and
//! judges the held-out models with it beside the uncalibrated profile, so
//! that the machine's drift in speed over minutes falls on the fit and the
//! judgement alike.
//!
//! `cargo run --release -p predictor --example model_accuracy -- --device configs/devices/host.toml --processor cpu0 --core 0`
//! (scripts/benchmarks/predictor_accuracy.sh runs it; predictor_host.sh with
//! --calibrate-with on both cores).

#[path = "common/models.rs"]
mod models;

use engine::Engine;
use graph_ir::Graph;
use models::Timed;
use models::{Families, all_generated, dump_predictions, fixtures, generated, measure_or_load, pinned_tract};
use predictor::calibration::{Calibration, Observation};
use predictor::profiler::timing::Statistic;
use predictor::{DeviceModel, LatencyModel, Prediction};
use std::path::PathBuf;
use std::time::Instant;

struct Options {
    device: PathBuf,
    processor: String,
    core: usize,
    generated: usize,
    wide: usize,
    branch_widths: usize,
    uncalibrated: bool,
    reps: usize,
    rounds: usize,
    seed: u64,
    fixtures: PathBuf,
    calibration: Option<PathBuf>,
    times: Option<PathBuf>,
    dump: Option<PathBuf>,
    calibrate_with: usize,
    ridge: f64,
    calibration_out: Option<PathBuf>,
    speed_probe: usize,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        device: "configs/devices/host.toml".into(),
        processor: "cpu0".into(),
        core: 0,
        generated: 30,
        wide: 0,
        branch_widths: 0,
        uncalibrated: false,
        reps: 10,
        rounds: 5,
        seed: 1,
        fixtures: "fixtures/models".into(),
        calibration: None,
        times: None,
        dump: None,
        calibrate_with: 0,
        ridge: 0.05,
        calibration_out: None,
        speed_probe: 10,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--uncalibrated" {
            o.uncalibrated = true;
            continue;
        }
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<usize>().map_err(|_| format!("{flag}: `{v}` is not a number"));
        match flag.as_str() {
            "--device" => o.device = value.into(),
            "--processor" => o.processor = value.clone(),
            "--core" => o.core = num(value)?,
            "--generated" => o.generated = num(value)?,
            "--wide" => o.wide = num(value)?,
            "--branch-widths" => o.branch_widths = num(value)?,
            "--reps" => o.reps = num(value)?.max(1),
            "--rounds" => o.rounds = num(value)?.max(1),
            "--seed" => o.seed = num(value)? as u64,
            "--fixtures" => o.fixtures = value.into(),
            "--calibration" => o.calibration = Some(value.into()),
            "--times" => o.times = Some(value.into()),
            "--dump" => o.dump = Some(value.into()),
            "--calibrate-with" => o.calibrate_with = num(value)?,
            "--calibration-out" => o.calibration_out = Some(value.into()),
            "--speed-probe" => o.speed_probe = num(value)?.max(1),
            "--ridge" => {
                o.ridge = value
                    .parse::<f64>()
                    .ok()
                    .filter(|r| *r >= 0.0)
                    .ok_or(format!("--ridge: `{value}` is not a non-negative number"))?
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(o)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let o = options()?;
    let mut model = load_model(&o)?;
    let engine = pinned_tract(o.core)?;
    let mut list: Vec<(String, Graph)> = fixtures(&o.fixtures)?;
    list.extend(all_generated(o.generated, o.wide, o.branch_widths, o.seed)?);
    let held = list.len();
    if o.calibrate_with > 0 {
        model = model.without_calibration();
        list.extend(generated(o.calibrate_with, CAL_SEED, Families::Original, "cal-")?);
        list.extend(generated(
            o.calibrate_with.div_ceil(3),
            CAL_SEED + 1000,
            Families::Wide,
            "cal-",
        )?);
    }
    eprintln!(
        "{} models ({} held out), tract {} on core {}, {} reps per measurement; predicting with {} / {}{}",
        list.len(),
        held,
        engine.version(),
        o.core,
        o.reps,
        o.device.display(),
        o.processor,
        if o.uncalibrated || o.calibrate_with > 0 {
            " (the profile's calibration ignored)"
        } else {
            ""
        }
    );
    let measured = format!(
        "tract {} one thread on core {} of {}, {} reps in {} rounds",
        engine.version(),
        o.core,
        predictor::profiler::host::this_cpu_model(),
        o.reps,
        o.rounds
    );
    let stat = model.statistic(&o.processor);
    let (mut timed, stolen) = measure_or_load(&engine, &list, o.reps, o.rounds, o.times.as_deref(), &measured)?;
    let mut predictions = list
        .iter()
        .map(|(name, g)| model.predict_graph(g, &o.processor).map_err(|e| format!("{name}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let fitted = if o.calibrate_with > 0 {
        let observed: Vec<Observation> = (held..list.len())
            .map(|i| Observation {
                prediction: predictions[i].clone(),
                measured_ms: 0.5 * (pick(stat, timed[i][0]) + pick(stat, timed[i][1])),
            })
            .collect();
        Some(fit_calibrations(&o, &observed, stat, &measured)?)
    } else {
        None
    };
    list.truncate(held);
    timed.truncate(held);
    predictions.truncate(held);
    let calibrated: Option<Vec<Prediction>> = fitted.as_ref().map(|(c, _, _)| applied(&predictions, c));
    let (agree, agree_p10) = table(&list, &predictions, &timed, calibrated.as_deref(), stat);
    if let Some(path) = &o.dump {
        dump_predictions(path, &list, &timed, &predictions)?;
    }
    let n = list.len() as f64;
    println!();
    summary("as the profile predicts", &predictions, &timed, stat);
    if let Some(c) = &calibrated {
        summary("calibrated on the models timed with them", c, &timed, stat);
    }
    if let Some((_, speed, by_kind)) = &fitted {
        let sped = applied(&predictions, speed);
        summary("scaled by the machine's speed now", &sped, &timed, stat);
        let sped = applied(&predictions, by_kind);
        summary("scaled by the machine's speed now by kind", &sped, &timed, stat);
    }
    println!(
        "repeatability: {agree}/{} models ({:.1}%) have two independent measurements within ±10% of each other; by the 10th percentile of the runs instead of the median: {agree_p10}/{} ({:.1}%)",
        list.len(),
        100.0 * agree as f64 / n,
        list.len(),
        100.0 * agree_p10 as f64 / n
    );
    println!(
        "{} timed runs per measurement in {} interleaved rounds; {}",
        o.reps.div_ceil(o.rounds).max(1) * o.rounds,
        o.rounds,
        stolen
    );
    if let Some((_, g)) = list.iter().find(|(n, _)| n == "resnet50") {
        time_prediction(&model, g, &o.processor);
    }
    Ok(())
}

/// `predictions` with calibration `c` applied.
fn applied(predictions: &[Prediction], c: &Calibration) -> Vec<Prediction> {
    predictions
        .iter()
        .map(|p| {
            let mut p = p.clone();
            c.apply(&mut p);
            p
        })
        .collect()
}

/// The device model with the calibration the options ask for.
fn load_model(o: &Options) -> Result<DeviceModel, String> {
    let mut model = DeviceModel::load(&o.device).map_err(|e| e.to_string())?;
    if o.uncalibrated {
        model = model.without_calibration();
    }
    if o.calibration.is_some() && o.calibrate_with > 0 {
        return Err("--calibration and --calibrate-with exclude each other: the second fits its own".into());
    }
    if let Some(file) = &o.calibration {
        model.calibrate(&o.processor, file).map_err(|e| e.to_string())?;
    }
    if let Some(w) = model
        .profile()
        .measured_elsewhere(&predictor::profiler::host::this_cpu_model())
    {
        eprintln!("warning: {w}");
    }
    Ok(model)
}

/// The in-model calibration fitted to the calibration models `observed`
/// (written to `--calibration-out`), and the machine's speed now from
/// `--speed-probe` of them: one factor, and one per kind.
fn fit_calibrations(
    o: &Options,
    observed: &[Observation],
    stat: Statistic,
    measured: &str,
) -> Result<(Calibration, Calibration, Calibration), String> {
    let fitted_on = format!(
        "{} generated models (seeds {CAL_SEED} and {}) timed in the same interleaved rounds as the held-out ones, {measured}, mean of two {}s",
        observed.len(),
        CAL_SEED + 1000,
        stat.name()
    );
    let c = Calibration::fit(observed, o.ridge, &fitted_on).map_err(|e| e.to_string())?;
    println!(
        "calibration fitted on {} models timed with them: {}; per kernel {:+.1} us; fit RMSPE {:.1}% -> {:.1}%",
        observed.len(),
        c.factors
            .iter()
            .map(|(k, v)| format!("{k} {v:.3}"))
            .collect::<Vec<_>>()
            .join(", "),
        c.per_kernel_us,
        100.0 * c.fit_rmspe_before,
        100.0 * c.fit_rmspe_after
    );
    if let Some(out) = &o.calibration_out {
        let text = serde_json::to_string_pretty(&c).map_err(|e| e.to_string())? + "\n";
        std::fs::write(out, text).map_err(|e| format!("{}: {e}", out.display()))?;
        println!("wrote {}", out.display());
    }
    let k = o.speed_probe.min(observed.len());
    let probe: Vec<Observation> = (0..k).map(|j| observed[j * observed.len() / k].clone()).collect();
    let speed = Calibration::speed(
        &probe,
        &format!("{k} of the {fitted_on}: the median of measured / predicted"),
    )
    .map_err(|e| e.to_string())?;
    println!(
        "machine speed now: x{:.3} (median of measured / predicted over {k} of the models timed with them)",
        speed.factors.get("conv").copied().unwrap_or(1.0)
    );
    let by_kind = Calibration::speed_by_kind(
        &probe,
        &format!("{k} of the {fitted_on}: least squares, grouped and depthwise convolutions apart"),
    )
    .map_err(|e| e.to_string())?;
    println!(
        "machine speed now by kind: x{:.3} dense and the rest, x{:.3} grouped and depthwise convolutions (the same {k} models)",
        by_kind.factors.get("conv").copied().unwrap_or(1.0),
        by_kind.factors.get("dwconv").copied().unwrap_or(1.0)
    );
    Ok((c, speed, by_kind))
}

/// Prints one line per model (measurements, prediction, calibrated
/// prediction, kernels predicted by a regressor); returns how many models'
/// two measurements agree within ±10%, by the median and by the 10th
/// percentile.
fn table(
    list: &[(String, Graph)],
    predictions: &[Prediction],
    timed: &Timed,
    calibrated: Option<&[Prediction]>,
    stat: Statistic,
) -> (usize, usize) {
    println!(
        "predictions estimate the {} of runs (the statistic the forests were fitted to); measurements below are that statistic of each measurement's runs",
        stat.name()
    );
    println!(
        "{:<26} {:>10} {:>10} {:>10} {:>8} {:>10} {:>8} {:>8}",
        "model", "meas1 ms", "meas2 ms", "pred ms", "err", "calib ms", "err", "sources"
    );
    let (mut agree, mut agree_p10) = (0, 0);
    for (i, (name, _)) in list.iter().enumerate() {
        let p = &predictions[i];
        let regress = p
            .kernels
            .iter()
            .filter(|k| {
                matches!(
                    k.source,
                    predictor::Source::Regressor { .. }
                        | predictor::Source::Extrapolated { .. }
                        | predictor::Source::Scaled { .. }
                )
            })
            .count();
        let [(m1, q1), (m2, q2)] = timed[i];
        let (s1, s2) = (pick(stat, timed[i][0]), pick(stat, timed[i][1]));
        if ((m2 - m1) / m1).abs() <= 0.10 {
            agree += 1;
        }
        if ((q2 - q1) / q1).abs() <= 0.10 {
            agree_p10 += 1;
        }
        let cal = calibrated.map_or_else(
            || format!("{:>10} {:>8}", "-", "-"),
            |c| format!("{:>10.3} {:>+7.1}%", c[i].total_ms, 100.0 * (c[i].total_ms - s1) / s1),
        );
        println!(
            "{name:<26} {s1:>10.3} {s2:>10.3} {:>10.3} {:>+7.1}% {cal} {:>4}/{:<4}",
            p.total_ms,
            100.0 * (p.total_ms - s1) / s1,
            regress,
            p.kernels.len()
        );
    }
    (agree, agree_p10)
}

/// Prints the median time of 20 predictions of `g`.
fn time_prediction(model: &DeviceModel, g: &Graph, processor: &str) {
    let mut times: Vec<f64> = (0..20)
        .map(|_| {
            let t = Instant::now();
            let _ = model.predict_graph(g, processor);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    println!("predict_graph(resnet50): median {:.2} ms over 20 runs", times[10]);
}

/// Seeds of the calibration models (`--calibrate-with`): none of them is
/// held out.
const CAL_SEED: u64 = 5000;

/// `stat` of one measurement (its median and 10th percentile).
fn pick(stat: Statistic, m: (f64, f64)) -> f64 {
    stat.pick(m.0, m.1)
}

/// Prints ±5/±10/±15% accuracy, RMSE and RMSPE of `predictions` against the
/// first measurement's `stat`, and ±10/±15% against its other statistic.
fn summary(label: &str, predictions: &[Prediction], timed: &Timed, stat: Statistic) {
    let other = stat.other();
    let n = predictions.len() as f64;
    let errs_by = |s: Statistic| -> Vec<f64> {
        predictions
            .iter()
            .zip(timed)
            .map(|(p, t)| (p.total_ms - pick(s, t[0])) / pick(s, t[0]))
            .collect()
    };
    let (errs, errs_other) = (errs_by(stat), errs_by(other));
    let within = |e: &[f64], t: f64| 100.0 * e.iter().filter(|e| e.abs() <= t).count() as f64 / n;
    let rmse = (predictions
        .iter()
        .zip(timed)
        .map(|(p, t)| (p.total_ms - pick(stat, t[0])).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    let rmspe = 100.0 * (errs.iter().map(|e| e * e).sum::<f64>() / n).sqrt();
    println!(
        "{label}: {} models within ±5% {:.1}%, ±10% {:.1}%, ±15% {:.1}% (by the {}); RMSE {rmse:.3} ms; RMSPE {rmspe:.1}%; by the {} within ±10% {:.1}%, ±15% {:.1}%",
        predictions.len(),
        within(&errs, 0.05),
        within(&errs, 0.10),
        within(&errs, 0.15),
        stat.name(),
        other.name(),
        within(&errs_other, 0.10),
        within(&errs_other, 0.15)
    );
}
