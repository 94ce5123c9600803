//! Whole CNNs for judging a latency model on this machine, shared by the
//! predictor's examples: generated ResNet, MobileNetV2 and RegNet-style
//! variants with random depth and width (seeded), the fixtures, random
//! inputs, and timing every model's compilations in interleaved rounds.

use engine::TractEngine;
use engine::host::{self, CoreSet, Meter, Steal};
use graph_ir::builder::{Builder, ConvSpec};
use graph_ir::onnx::{ImportOptions, import_file};
use graph_ir::ops::{Concat, Flatten, Op, UnaryOp};
use graph_ir::{Graph, GraphError, Outlet};
use predictor::forest::SplitMix64;
use predictor::profiler::timing::{Bound, Timing};
use std::path::{Path, PathBuf};
use std::time::Instant;

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

/// ResNet-style: stem, 3-4 stages of basic blocks (random depth 1-3, base
/// width 16-64, doubling per stage). With `branch_widths` each stage's width
/// is drawn on its own, as a branched model's branches have them (the
/// doubling width scaled by 0.5-1.25, a multiple of 8), so that output
/// channel counts cover every residue a plan's branches take, not mostly
/// multiples of 32.
fn resnet(rng: &mut SplitMix64, name: &str, branch_widths: bool) -> Result<Graph, GraphError> {
    let hw = [128, 160, 192, 224][rng.below(4)];
    let base = round8(16.0 + rng.below(49) as f64);
    let stages = 3 + rng.below(2);
    let mut b = Builder::new(name);
    let x = b.input("x", &[1, 3, hw, hw])?;
    let mut y = b.conv_bn("stem", x, ConvSpec::new(base, 7, 2), true)?;
    y = b.max_pool("stem.pool", y, 3, 2)?;
    for s in 0..stages {
        let width = if branch_widths {
            round8((base << s) as f64 * (0.5 + rng.below(16) as f64 * 0.05))
        } else {
            base << s
        };
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

/// VGG-style: 3-5 stages of 1-3 plain 3x3 convolutions with bias and ReLU,
/// max pooling after each, then the spatial map flattened into a large
/// fully connected head (hidden width 512-4096), bound by memory bandwidth.
fn vgg(rng: &mut SplitMix64, name: &str) -> Result<Graph, GraphError> {
    let hw = [64, 96, 128][rng.below(3)];
    let base = round8(16.0 + rng.below(33) as f64);
    let stages = 3 + rng.below(3);
    let hidden = [512, 1024, 2048, 4096][rng.below(4)];
    let mut b = Builder::new(name);
    let mut y = b.input("x", &[1, 3, hw, hw])?;
    for s in 0..stages {
        let c = (base << s).min(512);
        for i in 0..1 + rng.below(3) {
            let n = format!("s{s}.c{i}");
            let conv = b.conv(&n, y, ConvSpec::new(c, 3, 1).bias())?;
            y = b.relu(&format!("{n}.relu"), conv)?;
        }
        y = b.max_pool(&format!("s{s}.pool"), y, 3, 2)?;
    }
    let flat = b.node("head.flatten", Op::Flatten(Flatten { axis: 1 }), &[y])?;
    let f1 = b.linear("head.fc1", flat, hidden)?;
    let a1 = b.relu("head.fc1.relu", f1)?;
    let f2 = b.linear("head.fc2", a1, hidden)?;
    let a2 = b.relu("head.fc2.relu", f2)?;
    let y = b.linear("head.fc3", a2, 1000)?;
    b.finish("y", y)
}

/// Inception-style: a stem, then 4-7 blocks of four parallel branches (1x1;
/// 1x1 then 3x3; 1x1 then 5x5; 3x3 max pool then 1x1) concatenated, with a
/// strided max pool after every second block.
fn inception(rng: &mut SplitMix64, name: &str) -> Result<Graph, GraphError> {
    let hw = [96, 128, 160][rng.below(3)];
    let base = round8(16.0 + rng.below(33) as f64);
    let mut b = Builder::new(name);
    let x = b.input("x", &[1, 3, hw, hw])?;
    let y = b.conv_bn("stem", x, ConvSpec::new(base * 2, 3, 2), true)?;
    let mut y = b.max_pool("stem.pool", y, 3, 2)?;
    for i in 0..4 + rng.below(4) {
        let w = base * (1 + i / 2);
        let n = format!("b{i}");
        let b1 = b.conv_bn(&format!("{n}.1x1"), y, ConvSpec::new(w, 1, 1), true)?;
        let r3 = b.conv_bn(&format!("{n}.3x3r"), y, ConvSpec::new(w / 2 + 8, 1, 1), true)?;
        let b3 = b.conv_bn(&format!("{n}.3x3"), r3, ConvSpec::new(w, 3, 1), true)?;
        let r5 = b.conv_bn(&format!("{n}.5x5r"), y, ConvSpec::new(w / 4 + 8, 1, 1), true)?;
        let b5 = b.conv_bn(&format!("{n}.5x5"), r5, ConvSpec::new(w / 2, 5, 1), true)?;
        let pool = b.max_pool(&format!("{n}.pool"), y, 3, 1)?;
        let bp = b.conv_bn(&format!("{n}.poolproj"), pool, ConvSpec::new(w / 2, 1, 1), true)?;
        y = b.node(
            &format!("{n}.concat"),
            Op::Concat(Concat { axis: 1 }),
            &[b1, b3, b5, bp],
        )?;
        if i % 2 == 1 {
            y = b.max_pool(&format!("{n}.down"), y, 3, 2)?;
        }
    }
    let y = b.classifier("head", y, 1000)?;
    b.finish("y", y)
}

/// The model families [`generated`] draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Families {
    /// ResNet, MobileNetV2 and RegNet-style, in turn.
    Original,
    /// VGG-style (large fully connected head) and Inception-style, in turn.
    Wide,
    /// ResNet-style with every stage's width drawn on its own, as a branched
    /// model's branches have them.
    BranchWidths,
}

/// The ONNX files of `dir`, imported, in name order.
pub fn fixtures(dir: &Path) -> Result<Vec<(String, Graph)>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let g = import_file(f, &ImportOptions::default()).map_err(|e| format!("{}: {e}", f.display()))?;
            Ok((stem(f), g))
        })
        .collect()
}

/// The generated models of every family: `original` of [`Families::Original`]
/// from `seed`, `wide` of [`Families::Wide`] from `seed + 1000` and
/// `branch_widths` of [`Families::BranchWidths`] from `seed + 2000`.
pub fn all_generated(
    original: usize,
    wide: usize,
    branch_widths: usize,
    seed: u64,
) -> Result<Vec<(String, Graph)>, String> {
    let mut list = generated(original, seed, Families::Original, "gen-")?;
    list.extend(generated(wide, seed + 1000, Families::Wide, "gen-")?);
    list.extend(generated(branch_widths, seed + 2000, Families::BranchWidths, "gen-")?);
    Ok(list)
}

/// `count` generated models of `families`, drawn from `seed`; names carry
/// `prefix`.
pub fn generated(count: usize, seed: u64, families: Families, prefix: &str) -> Result<Vec<(String, Graph)>, String> {
    let mut rng = SplitMix64::new(seed);
    (0..count)
        .map(|i| {
            let (kind, g) = match (families, i % 3, i % 2) {
                (Families::Original, 0, _) => ("resnet", resnet(&mut rng, &format!("{prefix}resnet-{i}"), false)),
                (Families::Original, 1, _) => ("mbnet", mbnet(&mut rng, &format!("{prefix}mbnet-{i}"))),
                (Families::Original, _, _) => ("regnet", regnet(&mut rng, &format!("{prefix}regnet-{i}"))),
                (Families::Wide, _, 0) => ("vgg", vgg(&mut rng, &format!("{prefix}vgg-{i}"))),
                (Families::Wide, _, _) => ("inception", inception(&mut rng, &format!("{prefix}inception-{i}"))),
                (Families::BranchWidths, _, _) => {
                    ("resnet-bw", resnet(&mut rng, &format!("{prefix}resnet-bw-{i}"), true))
                }
            };
            Ok((format!("{prefix}{kind}-{i}"), g.map_err(|e| e.to_string())?))
        })
        .collect()
}

fn stem(p: &Path) -> String {
    p.file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

/// One-thread tract with the calling thread pinned to `core`.
pub fn pinned_tract(core: usize) -> Result<TractEngine, String> {
    let cores = CoreSet::new(vec![core]).ok_or("empty core set")?;
    host::pin_current_thread(&cores).map_err(|e| e.to_string())?;
    TractEngine::new(1).map_err(|e| e.to_string())
}

/// `g` compiled on `engine` with its inputs set.
pub fn compile(engine: &TractEngine, g: &Graph) -> Result<Bound, String> {
    let mut filled = g.clone();
    filled.fill_missing_weights(7);
    let bytes = graph_ir::onnx::export_bytes(&filled).map_err(|e| e.to_string())?;
    Bound::new(engine, &bytes, &predictor::profiler::in_model::inputs(g, 3)).map_err(|e| e.to_string())
}

/// Per model, (median, 10th percentile) in ms of each of its two compilations.
pub type Timed = Vec<[(f64, f64); 2]>;

/// Per model, the (median, 10th percentile) in ms of each of its two
/// compilations over `reps` timed runs, spread over `rounds` interleaved
/// rounds (every round times every compilation of every model in turn),
/// and the CPU time the hypervisor stole during the rounds (`None` where
/// `/proc/stat` cannot be read).
pub fn time_interleaved(
    engine: &TractEngine,
    list: &[(String, Graph)],
    reps: usize,
    rounds: usize,
) -> Result<(Timed, Option<Steal>), String> {
    let mut compiled = Vec::with_capacity(list.len());
    for (name, g) in list {
        let pair = [compile(engine, g)?, compile(engine, g)?];
        compiled.push(pair);
        eprintln!("compiled {name} twice");
    }
    let per_round = reps.div_ceil(rounds).max(1);
    let meter = Meter::start();
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
    let stolen = meter.and_then(|m| m.read());
    let timed = samples
        .into_iter()
        .map(|pair| {
            pair.map(|runs| {
                let t = Timing::of(runs).expect("at least one run");
                (t.median_ms, t.p10_ms)
            })
        })
        .collect();
    Ok((timed, stolen))
}

/// Measurements [`measure_or_load`] keeps, so that a latency model can be
/// judged again on them without timing the models again.
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedTimes {
    schema: String,
    /// Where and how they were measured.
    measured: String,
    /// The CPU time stolen while they were measured.
    steal: String,
    /// Per model: its name and its [`Timed`] entry.
    models: Vec<(String, [(f64, f64); 2])>,
}

const TIMES_SCHEMA: &str = "stretch.model-times/1";

/// [`time_interleaved`], or, when `times` names an existing file, the
/// measurements it keeps (refused unless it lists exactly the models of
/// `list`, in order); measurements taken are written to `times` when given.
/// Returns them with a line saying what was stolen or which file they came
/// from.
pub fn measure_or_load(
    engine: &TractEngine,
    list: &[(String, Graph)],
    reps: usize,
    rounds: usize,
    times: Option<&Path>,
    measured: &str,
) -> Result<(Timed, String), String> {
    if let Some(path) = times.filter(|p| p.exists()) {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let saved: SavedTimes =
            serde_json::from_str(&text).map_err(|e| format!("{}: not a times file: {e}", path.display()))?;
        if saved.schema != TIMES_SCHEMA {
            return Err(format!(
                "{}: schema `{}`, expected `{TIMES_SCHEMA}`",
                path.display(),
                saved.schema
            ));
        }
        let names: Vec<&str> = saved.models.iter().map(|(n, _)| n.as_str()).collect();
        let wanted: Vec<&str> = list.iter().map(|(n, _)| n.as_str()).collect();
        if names != wanted {
            let at = names
                .iter()
                .zip(&wanted)
                .position(|(a, b)| a != b)
                .unwrap_or(names.len().min(wanted.len()));
            return Err(format!(
                "{}: measured other models ({} against {} asked; first difference at #{at}: `{}` against `{}`)",
                path.display(),
                names.len(),
                wanted.len(),
                names.get(at).unwrap_or(&"(none)"),
                wanted.get(at).unwrap_or(&"(none)")
            ));
        }
        let line = format!(
            "measurements from {} ({}; {})",
            path.display(),
            saved.measured,
            saved.steal
        );
        return Ok((saved.models.into_iter().map(|(_, t)| t).collect(), line));
    }
    let (timed, stolen) = time_interleaved(engine, list, reps, rounds)?;
    let steal = stolen.map_or_else(|| "steal not readable".to_string(), |s| s.line());
    if let Some(path) = times {
        let saved = SavedTimes {
            schema: TIMES_SCHEMA.into(),
            measured: measured.into(),
            steal: steal.clone(),
            models: list.iter().map(|(n, _)| n.clone()).zip(timed.iter().copied()).collect(),
        };
        let text = serde_json::to_string_pretty(&saved).map_err(|e| e.to_string())? + "\n";
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("measurements kept in {}", path.display());
    }
    Ok((timed, steal))
}

/// Writes every model's name, measured medians (both compilations) and
/// full prediction (kernel by kernel, with features) to `path` as JSON, for
/// studying where a latency model misses.
pub fn dump_predictions(
    path: &Path,
    list: &[(String, Graph)],
    timed: &Timed,
    predictions: &[predictor::Prediction],
) -> Result<(), String> {
    let rows: Vec<serde_json::Value> = list
        .iter()
        .zip(timed)
        .zip(predictions)
        .map(|(((name, _), t), p)| {
            serde_json::json!({"model": name, "measured_ms": [t[0].0, t[1].0], "p10_ms": [t[0].1, t[1].1], "prediction": p})
        })
        .collect();
    let text = serde_json::to_string(&rows).map_err(|e| e.to_string())? + "\n";
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}
