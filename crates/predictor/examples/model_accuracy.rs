//! End-to-end accuracy of a device model on whole CNNs measured on tract.
//!
//! Measures every model (the torchvision fixtures plus generated ResNet,
//! MobileNetV2 and RegNet-style variants with random depth and width, none of
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
//! `cargo run --release -p predictor --example model_accuracy -- --device configs/devices/host.toml --processor cpu0 --core 0`
//! (scripts/benchmarks/predictor_accuracy.sh runs it and keeps the output).

use graph_ir::builder::{Builder, ConvSpec};
use graph_ir::onnx::{ImportOptions, import_file};
use graph_ir::ops::UnaryOp;
use graph_ir::{Graph, GraphError, Outlet, Tensor};
use predictor::forest::SplitMix64;
use predictor::profiler::engine::Runnable;
use predictor::profiler::timing::Timing;
use predictor::profiler::{CoreSet, Engine, TractEngine, affinity};
use predictor::{DeviceModel, LatencyModel};
use std::path::{Path, PathBuf};
use std::time::Instant;

struct Options {
    device: PathBuf,
    processor: String,
    core: usize,
    generated: usize,
    reps: usize,
    rounds: usize,
    seed: u64,
    fixtures: PathBuf,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        device: "configs/devices/host.toml".into(),
        processor: "cpu0".into(),
        core: 0,
        generated: 30,
        reps: 10,
        rounds: 5,
        seed: 1,
        fixtures: "fixtures/models".into(),
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
            "--generated" => o.generated = num(value)?,
            "--reps" => o.reps = num(value)?.max(1),
            "--rounds" => o.rounds = num(value)?.max(1),
            "--seed" => o.seed = num(value)? as u64,
            "--fixtures" => o.fixtures = value.into(),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(o)
}

fn relu6(b: &mut Builder, name: &str, x: Outlet) -> Result<Outlet, GraphError> {
    b.unary(
        name,
        x,
        UnaryOp::Clip {
            min: Some(0.0),
            max: Some(6.0),
        },
    )
}

fn round8(v: f64) -> usize {
    ((v / 8.0).round() as usize).max(1) * 8
}

/// ResNet-style: stem, 3-4 stages of basic blocks (random depth 1-3, base width 16-64).
fn resnet(rng: &mut SplitMix64, name: &str) -> Result<Graph, GraphError> {
    let hw = [128, 160, 192, 224][rng.below(4)];
    let base = round8(16.0 + rng.below(49) as f64);
    let stages = 3 + rng.below(2);
    let mut b = Builder::new(name);
    let x = b.input("x", &[1, 3, hw, hw])?;
    let mut y = b.conv_bn("stem", x, ConvSpec::new(base, 7, 2), true)?;
    y = b.max_pool("stem.pool", y, 3, 2)?;
    for s in 0..stages {
        let width = base << s;
        for i in 0..1 + rng.below(3) {
            let stride = if s > 0 && i == 0 { 2 } else { 1 };
            y = b.basic_block(&format!("s{s}.b{i}"), y, width, stride)?;
        }
    }
    let y = b.classifier("head", y, 1000)?;
    b.finish("y", y)
}

/// MobileNetV2-style inverted residuals: expansion 3-6, depthwise 3x3, ReLU6.
fn mbnet(rng: &mut SplitMix64, name: &str) -> Result<Graph, GraphError> {
    let hw = [128, 160, 192, 224][rng.below(4)];
    let mult = 0.5 + rng.below(6) as f64 * 0.15;
    let mut b = Builder::new(name);
    let x = b.input("x", &[1, 3, hw, hw])?;
    let stem = b.conv_bn("stem", x, ConvSpec::new(round8(32.0 * mult), 3, 2), false)?;
    let mut y = relu6(&mut b, "stem.act", stem)?;
    let mut c = round8(32.0 * mult);
    for (s, (width, stride)) in [(16, 1), (24, 2), (32, 2), (64, 2), (96, 1), (160, 2)]
        .iter()
        .enumerate()
    {
        let out = round8(*width as f64 * mult);
        for i in 0..1 + rng.below(3) {
            let expand = 3 + rng.below(4);
            let mid = c * expand;
            let n = format!("s{s}.b{i}");
            let stride = if i == 0 { *stride } else { 1 };
            let e = b.conv_bn(&format!("{n}.expand"), y, ConvSpec::new(mid, 1, 1), false)?;
            let e = relu6(&mut b, &format!("{n}.expand.act"), e)?;
            let d = b.conv_bn(&format!("{n}.dw"), e, ConvSpec::new(mid, 3, stride).group(mid), false)?;
            let d = relu6(&mut b, &format!("{n}.dw.act"), d)?;
            let p = b.conv_bn(&format!("{n}.project"), d, ConvSpec::new(out, 1, 1), false)?;
            y = if stride == 1 && c == out {
                b.add(&format!("{n}.add"), p, y)?
            } else {
                p
            };
            c = out;
        }
    }
    let last = b.conv_bn("last", y, ConvSpec::new(round8(1280.0 * mult.max(1.0)), 1, 1), false)?;
    let y = relu6(&mut b, "last.act", last)?;
    let y = b.classifier("head", y, 1000)?;
    b.finish("y", y)
}

/// RegNetX-style: bottleneck blocks with grouped 3x3 convs (group width 8-32).
fn regnet(rng: &mut SplitMix64, name: &str) -> Result<Graph, GraphError> {
    let hw = [128, 160, 192, 224][rng.below(4)];
    let gw = [8, 16, 24, 32][rng.below(4)];
    let w0 = gw * (2 + rng.below(3));
    let mut b = Builder::new(name);
    let x = b.input("x", &[1, 3, hw, hw])?;
    let mut y = b.conv_bn("stem", x, ConvSpec::new(32, 3, 2), true)?;
    let mut c = 32;
    for s in 0..4 {
        let w = w0 << s;
        for i in 0..1 + rng.below(3) {
            let n = format!("s{s}.b{i}");
            let stride = if i == 0 { 2 } else { 1 };
            let a = b.conv_bn(&format!("{n}.a"), y, ConvSpec::new(w, 1, 1), true)?;
            let m = b.conv_bn(&format!("{n}.b"), a, ConvSpec::new(w, 3, stride).group(w / gw), true)?;
            let o = b.conv_bn(&format!("{n}.c"), m, ConvSpec::new(w, 1, 1), false)?;
            let short = if stride == 1 && c == w {
                y
            } else {
                b.conv_bn(&format!("{n}.proj"), y, ConvSpec::new(w, 1, stride), false)?
            };
            let sum = b.add(&format!("{n}.add"), o, short)?;
            y = b.relu(&format!("{n}.relu"), sum)?;
            c = w;
        }
    }
    let y = b.classifier("head", y, 1000)?;
    b.finish("y", y)
}

fn models(o: &Options) -> Result<Vec<(String, Graph)>, String> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&o.fixtures)
        .map_err(|e| format!("{}: {e}", o.fixtures.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .collect();
    files.sort();
    for f in files {
        let g = import_file(&f, &ImportOptions::default()).map_err(|e| e.to_string())?;
        out.push((stem(&f), g));
    }
    let mut rng = SplitMix64::new(o.seed);
    for i in 0..o.generated {
        let (kind, g) = match i % 3 {
            0 => ("resnet", resnet(&mut rng, &format!("gen-resnet-{i}"))),
            1 => ("mbnet", mbnet(&mut rng, &format!("gen-mbnet-{i}"))),
            _ => ("regnet", regnet(&mut rng, &format!("gen-regnet-{i}"))),
        };
        out.push((format!("gen-{kind}-{i}"), g.map_err(|e| e.to_string())?));
    }
    Ok(out)
}

fn stem(p: &Path) -> String {
    p.file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

fn inputs(g: &Graph, seed: u64) -> Vec<Tensor> {
    let mut rng = SplitMix64::new(seed);
    g.inputs()
        .iter()
        .map(|id| {
            let shape = g.node(*id).outputs[0].shape.clone();
            let n = shape.iter().product::<usize>();
            let v: Vec<f32> = (0..n)
                .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
                .collect();
            Tensor::from_f32(shape, &v)
        })
        .collect()
}

/// `g` compiled on `engine` with its inputs set.
fn compile(engine: &TractEngine, g: &Graph) -> Result<Box<dyn Runnable>, String> {
    let mut filled = g.clone();
    filled.fill_missing_weights(7);
    let bytes = graph_ir::onnx::export_bytes(&filled).map_err(|e| e.to_string())?;
    let mut r = engine.compile(&bytes).map_err(|e| e.to_string())?;
    r.set_inputs(&inputs(g, 3)).map_err(|e| e.to_string())?;
    Ok(r)
}

/// Per model, the (median, 10th percentile) in ms of each of its two
/// compilations over `reps` timed runs, spread over `rounds` interleaved
/// rounds (every round times every compilation of every model in turn).
fn time_interleaved(
    engine: &TractEngine,
    list: &[(String, Graph)],
    reps: usize,
    rounds: usize,
) -> Result<Vec<[(f64, f64); 2]>, String> {
    let mut compiled = Vec::with_capacity(list.len());
    for (name, g) in list {
        let pair = [compile(engine, g)?, compile(engine, g)?];
        compiled.push(pair);
        eprintln!("compiled {name} twice");
    }
    let per_round = reps.div_ceil(rounds).max(1);
    let mut samples = vec![[Vec::new(), Vec::new()]; list.len()];
    for round in 0..rounds {
        for (i, pair) in compiled.iter_mut().enumerate() {
            for (c, r) in pair.iter_mut().enumerate() {
                r.run().map_err(|e| e.to_string())?;
                for _ in 0..per_round {
                    let t = Instant::now();
                    r.run().map_err(|e| e.to_string())?;
                    samples[i][c].push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
        eprintln!("round {}/{rounds} done", round + 1);
    }
    Ok(samples
        .into_iter()
        .map(|pair| {
            pair.map(|runs| {
                let t = Timing::of(runs).expect("at least one run");
                (t.median_ms, t.p10_ms)
            })
        })
        .collect())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let o = options()?;
    let model = DeviceModel::load(&o.device).map_err(|e| e.to_string())?;
    if let Some(w) = model
        .profile()
        .measured_elsewhere(&predictor::profiler::host::this_cpu_model())
    {
        eprintln!("warning: {w}");
    }
    let cores = CoreSet::new(vec![o.core]).ok_or("empty core set")?;
    affinity::pin_current_thread(&cores).map_err(|e| e.to_string())?;
    let engine = TractEngine::new(1).map_err(|e| e.to_string())?;
    let list = models(&o)?;
    eprintln!(
        "{} models, tract {} on core {}, {} reps per measurement; predicting with {} / {}",
        list.len(),
        engine.version(),
        o.core,
        o.reps,
        o.device.display(),
        o.processor
    );
    let meter = predictor::profiler::steal::Meter::start();
    let timed = time_interleaved(&engine, &list, o.reps, o.rounds)?;
    let stolen = meter.and_then(|m| m.read());
    println!(
        "{:<26} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "model", "meas1 ms", "meas2 ms", "pred ms", "err", "sources"
    );
    let (mut errs, mut sq, mut agree) = (Vec::new(), 0.0, 0);
    let (mut errs_p10, mut agree_p10) = (Vec::new(), 0);
    for (i, (name, g)) in list.iter().enumerate() {
        let p = model.predict_graph(g, &o.processor).map_err(|e| e.to_string())?;
        let regress = p
            .kernels
            .iter()
            .filter(|k| matches!(k.source, predictor::Source::Regressor { .. }))
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
        stolen.map_or_else(|| "steal not readable".to_string(), |s| s.line())
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
