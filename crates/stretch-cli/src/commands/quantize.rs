//! `stretch quantize`: post-training static quantization of a branched
//! model at each processor's precision.

use crate::model_args::ModelArgs;
use anyhow::{Context, Result, bail};
use graph_ir::{Graph, Outlet};
use predictor::{DeviceProfile, Precision};
use quantize::{Collector, Method, PrecisionMap};
use std::path::{Path, PathBuf};
use training::data::{Dataset, DatasetSpec, Transform, split_of};

/// Quantize a branched model for the precisions its device runs.
///
/// Every node runs on the processor its `processor` annotation names
/// (`stretch branch` writes them; --processor P takes a plain model as
/// running wholly on P), at the precision the device profile gives that
/// processor (`precision`; e.g. snapdragon855: cpu int8, gpu fp16, dsp
/// int8). Nodes of int8 processors are written as QuantizeLinear /
/// DequantizeLinear pairs: uint8 activations with ranges calibrated on
/// --samples images of the training split `stretch train` would use
/// (same --split-seed and --val-fraction, same normalisation), int8 weights per
/// output channel, int32 biases; batch normalisations are folded into
/// their convolutions first. A node of an int8 processor whose operator
/// has no int8 form stays float (one warning line; --strict refuses).
/// Graph inputs and outputs stay fp32, every inserted node carries the
/// annotations of the node it serves, and the file records the precisions
/// (metadata `stretch.precisions`). fp16 processors are not rewritten yet:
/// their nodes stay fp32, and the command says so.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,

    /// Device profile whose processors' precisions apply.
    #[arg(long, value_name = "PROFILE.toml")]
    pub device: PathBuf,

    /// The processor that runs nodes without a `processor` annotation.
    #[arg(long)]
    pub processor: Option<String>,

    #[command(flatten)]
    pub calibration: CalibrationArgs,

    /// Where to write the quantized model.
    #[arg(short, long, value_name = "OUT.onnx")]
    pub out: PathBuf,
}

/// Calibration options shared by `quantize` and `stretch`.
#[derive(clap::Args, Debug, Clone)]
pub struct CalibrationArgs {
    /// Calibration images: a dataset as `train --dataset` takes it
    /// (`digits`, `mnist:DIR`, `cifar10:PATH`, `folder:DIR`). `stretch`
    /// quantizes the branched model as its last step when given.
    #[arg(long, value_name = "KIND[:PATH]")]
    pub calibration: Option<DatasetSpec>,

    /// Calibration images drawn from the training split.
    #[arg(long, default_value_t = 128)]
    pub samples: usize,

    /// How ranges are taken from the calibration runs: minmax,
    /// percentile:P (e.g. percentile:99.99) or entropy.
    #[arg(long, default_value = "minmax")]
    pub method: Method,

    /// Refuse when a node of an int8 processor has no int8 form.
    #[arg(long)]
    pub strict: bool,

    /// Seed of the train/validation split the calibration images come
    /// from (as `train --seed`).
    #[arg(long, default_value_t = 0)]
    pub split_seed: u64,

    /// Validation share of that split (as `train --val-fraction`).
    #[arg(long, default_value_t = 0.2)]
    pub val_fraction: f64,

    /// Also write, into this folder, the fp32 model that was calibrated
    /// (`fp32.onnx`, batch norms folded) and the calibration inputs
    /// (`samples.npy`, `[n, C, H, W]` after normalisation), for reference
    /// tools to calibrate on exactly the same data.
    #[arg(long, value_name = "DIR")]
    pub save_calibration: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    let label = args.model.model.display().to_string();
    let graph = args.model.load_runnable()?;
    quantize_to(
        &graph,
        &label,
        &args.device,
        args.processor.as_deref(),
        &args.calibration,
        &args.out,
    )
}

/// Quantizes `graph` (read from `label`) for `device`'s precisions with
/// the calibration options `c` and writes it to `out`.
pub fn quantize_to(
    graph: &Graph,
    label: &str,
    device: &Path,
    processor: Option<&str>,
    c: &CalibrationArgs,
    out: &Path,
) -> Result<()> {
    let Some(dataset) = &c.calibration else {
        bail!("give --calibration DATASET: the images activation ranges are calibrated on");
    };
    quantize::check_not_quantized(graph).with_context(|| format!("cannot quantize {label}"))?;
    let profile = DeviceProfile::load(device).with_context(|| format!("cannot load {}", device.display()))?;
    let map = PrecisionMap::from_profile(&profile, processor)?;
    for id in graph.node_ids() {
        let n = graph.node(id);
        if !matches!(n.op, graph_ir::Op::Const(_) | graph_ir::Op::Input(_)) {
            map.of(n).with_context(|| format!("cannot quantize {label}"))?;
        }
    }
    if c.samples == 0 {
        bail!("--samples 0: calibration needs at least one image");
    }
    let (folded, n_bn) = quantize::fold_bn::fold_batch_norms(graph)?;
    let kept = quantize::kept_float(&folded, &map)?;
    if !kept.is_empty() {
        let list = kept.iter().take(8).cloned().collect::<Vec<_>>().join(", ");
        let more = if kept.len() > 8 {
            format!(" and {} more", kept.len() - 8)
        } else {
            String::new()
        };
        if c.strict {
            return Err(quantize::QuantizeError::Strict {
                count: kept.len(),
                nodes: format!("{list}{more}"),
            }
            .into());
        }
        eprintln!(
            "warning: {} node(s) of int8 processors have no int8 form and stay fp32: {list}{more}",
            kept.len()
        );
    }
    let acts = quantize::activations_to_calibrate(&folded, &map)?;
    if acts.is_empty() {
        bail!(
            "nothing to quantize in {label}: no node runs on an int8 processor of {} ({})",
            device.display(),
            map.describe()
        );
    }
    let ranges = calibrate(&folded, &acts, c, dataset, label)?;
    let (quantized, report) = quantize::insert_qdq(&folded, &map, &ranges)?;
    graph_ir::onnx::export_file(&quantized, out).with_context(|| format!("cannot write {}", out.display()))?;
    println!(
        "{label}: {} node(s) in int8 ({} weights int8, {} activations with Q/DQ, {} batch norms folded); calibrated with {} on {} {dataset} images; precisions {}",
        report.int8_nodes,
        report.weights,
        report.activations,
        n_bn,
        c.method,
        c.samples,
        map.describe()
    );
    if map.uses(Precision::Fp16) {
        println!("note: fp16 processors are not rewritten yet; their nodes stay fp32 in the file");
    }
    println!("wrote {}", out.display());
    Ok(())
}

/// Runs the fp32 model on the calibration images and reduces each
/// activation of `acts` to a range.
fn calibrate(
    g: &Graph,
    acts: &[Outlet],
    args: &CalibrationArgs,
    dataset: &DatasetSpec,
    label: &str,
) -> Result<Vec<(f32, f32)>> {
    let inputs = calibration_inputs(g, args, dataset, label)?;
    let mut collector = Collector::new(args.method, acts.len());
    let bar = crate::progress::spinner("calibrating {spinner} pass {pos} {elapsed}");
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    for pass in 0..collector.passes() {
        bar.set_position(pass as u64 + 1);
        scheduler_rt::probe::probe(g, acts, &inputs, |k, v| collector.observe(pass, k, v))?;
    }
    bar.finish_and_clear();
    collector
        .ranges()
        .into_iter()
        .zip(acts)
        .map(|(r, o)| {
            r.ok_or_else(|| {
                quantize::QuantizeError::NoRange {
                    tensor: g.node(o.node).name.clone(),
                }
                .into()
            })
        })
        .collect()
}

/// `args.samples` images of the training split, normalised as `train`
/// does (`[n, C, H, W]`); written with the calibrated model when asked.
fn calibration_inputs(g: &Graph, args: &CalibrationArgs, dataset: &DatasetSpec, label: &str) -> Result<Vec<f32>> {
    let [input] = g.inputs() else {
        bail!(
            "{label} has {} inputs; calibration feeds one image input",
            g.inputs().len()
        );
    };
    let fact = g.node(*input).outputs[0].clone();
    let &[_, c, h, w] = fact.shape.as_slice() else {
        bail!("{label}: input {fact} is not an image batch [N, C, H, W]");
    };
    let set = training::data::load(dataset, [h, w])?;
    let split = split_of(&set, args.val_fraction, args.split_seed, None);
    let transform = Transform::fit(&set, &split.train, [c, h, w], Default::default())
        .with_context(|| format!("calibration images {} for {label}", set.describe()))?;
    let samples: Vec<usize> = split.train.iter().take(args.samples).copied().collect();
    if samples.len() < args.samples {
        bail!(
            "--samples {}: the training split of {} has {} images",
            args.samples,
            set.describe(),
            samples.len()
        );
    }
    let inputs = transform.batch(&set, &samples, None);
    let (lo, hi) = inputs
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), v| (a.min(*v), b.max(*v)));
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        bail!(
            "the {} calibration images of {} are constant (every input value {lo}): they give no activation range",
            samples.len(),
            set.describe()
        );
    }
    if let Some(dir) = &args.save_calibration {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        graph_ir::onnx::export_file(g, dir.join("fp32.onnx"))?;
        let array = scheduler_rt::npy::Array {
            shape: vec![samples.len(), c, h, w],
            data: inputs.clone(),
        };
        scheduler_rt::npy::write(&dir.join("samples.npy"), &array)?;
    }
    Ok(inputs)
}
