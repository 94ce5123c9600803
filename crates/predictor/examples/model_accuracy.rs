//! End-to-end accuracy of a device model on whole CNNs measured on tract.
//!
//! Measures every model (the torchvision fixtures plus generated ResNet,
//! MobileNetV2 and RegNet-style variants with random depth and width, and
//! with `--wide N` N more of VGG-style (large fully connected heads) and
//! Inception-style (parallel 1x1/3x3/5x5/pool branches) families, none of
//! them seen by the predictor's fit) twice, independently (two compilations),
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
//! The device profile's in-model calibration, when it names one, is applied
//! (`--uncalibrated` ignores it; `--calibration FILE` applies another).
//! `--times FILE` keeps the measurements in FILE, or, when it exists,
//! judges the model on the measurements it keeps instead of timing again;
//! `--dump FILE` writes every model's measurements and whole prediction.
//!
//! `cargo run --release -p predictor --example model_accuracy -- --device configs/devices/host.toml --processor cpu0 --core 0`
//! (scripts/benchmarks/predictor_accuracy.sh runs it and keeps the output).

#[path = "common/models.rs"]
mod models;

use graph_ir::Graph;
use models::{Families, dump_predictions, fixtures, generated, measure_or_load, pinned_tract};
use predictor::profiler::Engine;
use predictor::{DeviceModel, LatencyModel};
use std::path::PathBuf;
use std::time::Instant;

struct Options {
    device: PathBuf,
    processor: String,
    core: usize,
    generated: usize,
    wide: usize,
    uncalibrated: bool,
    reps: usize,
    rounds: usize,
    seed: u64,
    fixtures: PathBuf,
    calibration: Option<PathBuf>,
    times: Option<PathBuf>,
    dump: Option<PathBuf>,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        device: "configs/devices/host.toml".into(),
        processor: "cpu0".into(),
        core: 0,
        generated: 30,
        wide: 0,
        uncalibrated: false,
        reps: 10,
        rounds: 5,
        seed: 1,
        fixtures: "fixtures/models".into(),
        calibration: None,
        times: None,
        dump: None,
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
            "--reps" => o.reps = num(value)?.max(1),
            "--rounds" => o.rounds = num(value)?.max(1),
            "--seed" => o.seed = num(value)? as u64,
            "--fixtures" => o.fixtures = value.into(),
            "--calibration" => o.calibration = Some(value.into()),
            "--times" => o.times = Some(value.into()),
            "--dump" => o.dump = Some(value.into()),
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
    let mut model = DeviceModel::load(&o.device).map_err(|e| e.to_string())?;
    if o.uncalibrated {
        model = model.without_calibration();
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
    let engine = pinned_tract(o.core)?;
    let mut list: Vec<(String, Graph)> = fixtures(&o.fixtures)?;
    list.extend(generated(o.generated, o.seed, Families::Original, "gen-")?);
    list.extend(generated(o.wide, o.seed + 1000, Families::Wide, "gen-")?);
    eprintln!(
        "{} models, tract {} on core {}, {} reps per measurement; predicting with {} / {}{}",
        list.len(),
        engine.version(),
        o.core,
        o.reps,
        o.device.display(),
        o.processor,
        if o.uncalibrated { " (calibration ignored)" } else { "" }
    );
    let measured = format!(
        "tract {} one thread on core {} of {}, {} reps in {} rounds",
        engine.version(),
        o.core,
        predictor::profiler::host::this_cpu_model(),
        o.reps,
        o.rounds
    );
    let (timed, stolen) = measure_or_load(&engine, &list, o.reps, o.rounds, o.times.as_deref(), &measured)?;
    println!(
        "{:<26} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "model", "meas1 ms", "meas2 ms", "pred ms", "err", "sources"
    );
    let (mut errs, mut sq, mut agree) = (Vec::new(), 0.0, 0);
    let (mut errs_p10, mut agree_p10) = (Vec::new(), 0);
    let mut predictions = Vec::new();
    for (i, (name, g)) in list.iter().enumerate() {
        let p = model.predict_graph(g, &o.processor).map_err(|e| e.to_string())?;
        let regress = p
            .kernels
            .iter()
            .filter(|k| {
                matches!(
                    k.source,
                    predictor::Source::Regressor { .. } | predictor::Source::Extrapolated { .. }
                )
            })
            .count();
        let [(m1, q1), (m2, q2)] = timed[i];
        let err = (p.total_ms - m1) / m1;
        errs.push(err.abs());
        errs_p10.push(((p.total_ms - q1) / q1).abs());
        sq += (p.total_ms - m1).powi(2);
        if ((m2 - m1) / m1).abs() <= 0.10 {
            agree += 1;
        }
        if ((q2 - q1) / q1).abs() <= 0.10 {
            agree_p10 += 1;
        }
        println!(
            "{name:<26} {:>10.3} {:>10.3} {:>10.3} {:>+7.1}% {:>4}/{:<4}",
            m1,
            m2,
            p.total_ms,
            100.0 * err,
            regress,
            p.kernels.len()
        );
        predictions.push(p);
    }
    if let Some(path) = &o.dump {
        dump_predictions(path, &list, &timed, &predictions)?;
    }
    let n = list.len() as f64;
    let within = |t: f64| 100.0 * errs.iter().filter(|e| **e <= t).count() as f64 / n;
    println!(
        "\n{} models: within ±5% {:.1}%, ±10% {:.1}%, ±15% {:.1}%; RMSE {:.3} ms; RMSPE {:.1}%",
        list.len(),
        within(0.05),
        within(0.10),
        within(0.15),
        (sq / n).sqrt(),
        100.0 * (errs.iter().map(|e| e * e).sum::<f64>() / n).sqrt()
    );
    println!(
        "repeatability: {agree}/{} models ({:.1}%) have two independent measurements within ±10% of each other",
        list.len(),
        100.0 * agree as f64 / n
    );
    let within_p10 = |t: f64| 100.0 * errs_p10.iter().filter(|e| **e <= t).count() as f64 / n;
    println!(
        "by the 10th percentile of the runs instead of the median: repeatability {agree_p10}/{} ({:.1}%); prediction within ±10% {:.1}%, ±15% {:.1}%",
        list.len(),
        100.0 * agree_p10 as f64 / n,
        within_p10(0.10),
        within_p10(0.15)
    );
    println!(
        "{} timed runs per measurement in {} interleaved rounds; {}",
        o.reps.div_ceil(o.rounds).max(1) * o.rounds,
        o.rounds,
        stolen
    );
    if let Some((_, g)) = list.iter().find(|(n, _)| n == "resnet50") {
        let mut times: Vec<f64> = (0..20)
            .map(|_| {
                let t = Instant::now();
                let _ = model.predict_graph(g, &o.processor);
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        times.sort_by(f64::total_cmp);
        println!("predict_graph(resnet50): median {:.2} ms over 20 runs", times[10]);
    }
    Ok(())
}
