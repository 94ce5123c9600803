//! Kernels timed inside whole models ([`predictor::profiler::in_model`]),
//! against the device model's figures for them, and as training rows.
//!
//! Times every kernel of each model inside it on tract (one thread, pinned
//! to `--core`), and prints per model the run time, the time no kernel owns
//! and the prediction, then per kernel class and fused chain the predicted
//! and in-model sums and the median ratio. Models: `--fixtures DIR`'s ONNX
//! files, `--generated N` ResNet/MobileNetV2/RegNet-style and `--wide N`
//! VGG/Inception-style models from `--seed` (1: the held-out models of
//! model_accuracy; 5000: its calibration models, whose wide ones come from
//! seed 6000), and `--branch-widths N` ResNet-style models whose stage
//! widths are drawn as a branched model's branches have them (from seed +
//! 2000; none by default). `--per-kernel` also prints every kernel: its first node,
//! fused ops, predicted and in-model ms, their ratio and its features.
//! `--rows-out FILE` appends each kernel of a class the
//! profiler knows as a CSV row of origin `in-model` (FILE is created with the
//! header when missing), which `stretch fit` reads beside kernels.csv when
//! the file is DIR/in-model.csv.
//!
//! `cargo run --release -p predictor --example in_model_kernels -- --device configs/devices/host.toml --processor cpu0 --core 0 --generated 60 --wide 20 --seed 5000 --rows-out data/profiles/host/cpu0/in-model.csv`

#[path = "common/models.rs"]
#[allow(dead_code)]
mod models;

use engine::Engine;
use engine::host::CoreSet;
use graph_ir::Graph;
use models::{all_generated, fixtures, pinned_tract};
use predictor::kernels::default_rules;
use predictor::profiler::csv::Store;
use predictor::profiler::in_model::{inputs, time_kernels};
use predictor::{DeviceModel, LatencyModel};
use std::collections::BTreeMap;
use std::path::PathBuf;

struct Options {
    device: PathBuf,
    processor: String,
    core: usize,
    generated: usize,
    wide: usize,
    branch_widths: usize,
    seed: u64,
    reps: usize,
    fixtures: Option<PathBuf>,
    rows_out: Option<PathBuf>,
    uncalibrated: bool,
    per_kernel: bool,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        device: "configs/devices/host.toml".into(),
        processor: "cpu0".into(),
        core: 0,
        generated: 9,
        wide: 4,
        branch_widths: 0,
        seed: 1,
        reps: 10,
        fixtures: None,
        rows_out: None,
        uncalibrated: false,
        per_kernel: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--uncalibrated" {
            o.uncalibrated = true;
            continue;
        }
        if flag == "--per-kernel" {
            o.per_kernel = true;
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
            "--seed" => o.seed = num(value)? as u64,
            "--reps" => o.reps = num(value)?.max(1),
            "--fixtures" => o.fixtures = Some(value.into()),
            "--rows-out" => o.rows_out = Some(value.into()),
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

#[derive(Default)]
struct ClassSums {
    predicted: f64,
    in_model: f64,
    ratios: Vec<f64>,
}

fn run() -> Result<(), String> {
    let o = options()?;
    let mut model = DeviceModel::load(&o.device).map_err(|e| e.to_string())?;
    if o.uncalibrated {
        model = model.without_calibration();
    }
    let engine = pinned_tract(o.core)?;
    let cores = CoreSet::new(vec![o.core]).ok_or("empty core set")?;
    let mut list: Vec<(String, Graph)> = match &o.fixtures {
        Some(dir) => fixtures(dir)?,
        None => Vec::new(),
    };
    list.extend(all_generated(o.generated, o.wide, o.branch_widths, o.seed)?);
    let mut store = match &o.rows_out {
        Some(path) => Some(Store::open(path).map_err(|e| e.to_string())?.0),
        None => None,
    };
    let rules = default_rules();
    let mut by_class: BTreeMap<String, ClassSums> = BTreeMap::new();
    let mut written = 0;
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>7}",
        "model", "run ms", "unattr.", "pred ms", "pred/in"
    );
    for (name, g) in &list {
        let times = time_kernels(&engine, g, &inputs(g, 3), &rules, 1, o.reps).map_err(|e| e.to_string())?;
        let prediction = model.predict_graph(g, &o.processor).map_err(|e| e.to_string())?;
        if prediction.kernels.len() != times.kernels.len() {
            return Err(format!(
                "{name}: {} predicted kernels against {} timed",
                prediction.kernels.len(),
                times.kernels.len()
            ));
        }
        for (p, t) in prediction.kernels.iter().zip(&times.kernels) {
            let sums = by_class
                .entry(format!("{}[{}]", p.class.name(), p.ops.join("+")))
                .or_default();
            sums.predicted += p.ms;
            sums.in_model += t.timing.median_ms;
            if t.timing.median_ms > 0.0 {
                sums.ratios.push(p.ms / t.timing.median_ms);
            }
            if o.per_kernel {
                let features: Vec<String> = p
                    .feature_names
                    .iter()
                    .zip(&p.features)
                    .map(|(n, v)| format!("{n}={v}"))
                    .collect();
                println!(
                    "  {:<24} {:<28} {:>8.3} {:>8.3} {:>5.2}  {}",
                    p.name,
                    p.ops.join("+"),
                    p.ms,
                    t.timing.median_ms,
                    p.ms / t.timing.median_ms,
                    features.join(" ")
                );
            }
            if let (Some(store), Some(row)) = (store.as_mut(), t.row(&engine, &cores, 0)) {
                store.append(&row).map_err(|e| e.to_string())?;
                written += 1;
            }
        }
        println!(
            "{name:<22} {:>9.3} {:>9.3} {:>9.3} {:>7.2}",
            times.run.median_ms,
            times.unattributed_ms,
            prediction.total_ms,
            prediction.total_ms / times.run.median_ms
        );
    }
    println!(
        "\n{:<38} {:>10} {:>10} {:>8} {:>10} {:>6}",
        "class[ops]", "pred ms", "in-model", "sum p/i", "median p/i", "n"
    );
    for (label, mut s) in by_class {
        s.ratios.sort_by(f64::total_cmp);
        let median = graph_ir::stats::quantile(&s.ratios, 0.5).unwrap_or(f64::NAN);
        println!(
            "{label:<38} {:>10.3} {:>10.3} {:>8.2} {median:>10.2} {:>6}",
            s.predicted,
            s.in_model,
            s.predicted / s.in_model,
            s.ratios.len()
        );
    }
    if let Some(store) = &store {
        println!(
            "\nappended {written} rows to {} ({} {} thread on core {})",
            store.path().display(),
            engine.name(),
            engine.threads(),
            o.core
        );
    }
    Ok(())
}
