//! Fits a processor's in-model calibration ([`predictor::calibration`]) to
//! whole models measured on this machine: generated models of the same
//! families as the held-out set of `model_accuracy` but drawn from another
//! seed (so none of them is judged later), timed on tract with one thread
//! pinned to one core, in interleaved rounds. Writes the calibration file
//! that a device profile names with `calibration = "..."`. `--times FILE`
//! keeps the measurements in FILE, or fits to the ones it keeps when it
//! exists; `--dump FILE` writes every model's measurements and whole
//! prediction.
//!
//! `cargo run --release -p predictor --example calibrate_models -- --device configs/devices/host.toml --processor cpu0 --core 0 -o data/profiles/host/cpu0/calibration.json`
//! (scripts/benchmarks/predictor_host.sh runs it for both cores).

#[path = "common/models.rs"]
#[allow(dead_code)]
mod models;

use graph_ir::Graph;
use models::{Families, dump_predictions, generated, measure_or_load, pinned_tract};
use predictor::calibration::{Calibration, Observation};
use predictor::profiler::Engine;
use predictor::{DeviceModel, LatencyModel};
use std::path::PathBuf;

struct Options {
    device: PathBuf,
    processor: String,
    core: usize,
    count: usize,
    wide: usize,
    seed: u64,
    reps: usize,
    rounds: usize,
    ridge: f64,
    out: Option<PathBuf>,
    times: Option<PathBuf>,
    dump: Option<PathBuf>,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        device: "configs/devices/host.toml".into(),
        processor: "cpu0".into(),
        core: 0,
        count: 60,
        wide: 20,
        seed: 5000,
        reps: 10,
        rounds: 5,
        ridge: 0.05,
        out: None,
        times: None,
        dump: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<usize>().map_err(|_| format!("{flag}: `{v}` is not a number"));
        match flag.as_str() {
            "--device" => o.device = value.into(),
            "--processor" => o.processor = value.clone(),
            "--core" => o.core = num(value)?,
            "--count" => o.count = num(value)?,
            "--wide" => o.wide = num(value)?,
            "--seed" => o.seed = num(value)? as u64,
            "--reps" => o.reps = num(value)?.max(1),
            "--rounds" => o.rounds = num(value)?.max(1),
            "--ridge" => {
                o.ridge = value
                    .parse::<f64>()
                    .ok()
                    .filter(|r| *r >= 0.0)
                    .ok_or(format!("--ridge: `{value}` is not a non-negative number"))?
            }
            "-o" | "--out" => o.out = Some(value.into()),
            "--times" => o.times = Some(value.into()),
            "--dump" => o.dump = Some(value.into()),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if o.seed < 2000 {
        return Err(format!(
            "--seed {}: seeds below 2000 draw model_accuracy's held-out models (1 and 1001 by default)",
            o.seed
        ));
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
    let model = DeviceModel::load(&o.device)
        .map_err(|e| e.to_string())?
        .without_calibration();
    let engine = pinned_tract(o.core)?;
    let mut list: Vec<(String, Graph)> = generated(o.count, o.seed, Families::Original, "cal-")?;
    list.extend(generated(o.wide, o.seed + 1000, Families::Wide, "cal-")?);
    eprintln!(
        "{} calibration models (seeds {} and {}), tract {} on core {}",
        list.len(),
        o.seed,
        o.seed + 1000,
        engine.version(),
        o.core
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
    let mut observed = Vec::new();
    let mut agree = 0;
    for ((_, g), [(m1, _), (m2, _)]) in list.iter().zip(&timed) {
        let prediction = model.predict_graph(g, &o.processor).map_err(|e| e.to_string())?;
        if ((m2 - m1) / m1).abs() <= 0.10 {
            agree += 1;
        }
        observed.push(Observation {
            prediction,
            measured_ms: 0.5 * (m1 + m2),
        });
    }
    let fitted_on = format!(
        "{} generated models (seeds {} and {}), tract {} one thread on core {} of {}, mean of two interleaved medians of {} runs",
        list.len(),
        o.seed,
        o.seed + 1000,
        engine.version(),
        o.core,
        predictor::profiler::host::this_cpu_model(),
        o.reps.div_ceil(o.rounds).max(1) * o.rounds
    );
    if let Some(path) = &o.dump {
        let predictions: Vec<_> = observed.iter().map(|m| m.prediction.clone()).collect();
        dump_predictions(path, &list, &timed, &predictions)?;
    }
    let c = Calibration::fit(&observed, o.ridge, &fitted_on).map_err(|e| e.to_string())?;
    println!("{:<24} {:>10} {:>10} {:>10}", "model", "meas ms", "before", "after");
    for ((name, _), m) in list.iter().zip(&observed) {
        let mut p = m.prediction.clone();
        c.apply(&mut p);
        println!(
            "{name:<24} {:>10.3} {:>+9.1}% {:>+9.1}%",
            m.measured_ms,
            100.0 * (m.prediction.total_ms - m.measured_ms) / m.measured_ms,
            100.0 * (p.total_ms - m.measured_ms) / m.measured_ms
        );
    }
    println!(
        "factors: {}; per kernel {:+.1} us",
        c.factors
            .iter()
            .map(|(k, v)| format!("{k} {v:.3}"))
            .collect::<Vec<_>>()
            .join(", "),
        c.per_kernel_us
    );
    println!(
        "fit RMSPE {:.1}% before, {:.1}% after (on the calibration models themselves); {agree}/{} models' two measurements within ±10%; {}",
        100.0 * c.fit_rmspe_before,
        100.0 * c.fit_rmspe_after,
        list.len(),
        stolen
    );
    if let Some(out) = &o.out {
        let text = serde_json::to_string_pretty(&c).map_err(|e| e.to_string())? + "\n";
        std::fs::write(out, text).map_err(|e| format!("{}: {e}", out.display()))?;
        println!("wrote {}", out.display());
    }
    Ok(())
}
