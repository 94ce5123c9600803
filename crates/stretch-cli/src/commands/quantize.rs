//! `stretch quantize`: post-training static quantization of a branched
//! model at each processor's precision.

use crate::model_args::ModelArgs;
use anyhow::{Context, Result, bail};
use graph_ir::{Graph, Outlet};
use predictor::DeviceProfile;
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
/// (metadata `stretch.precisions`). Nodes of fp16 processors compute in
/// fp16: their constants stored as fp16, Casts where values enter and
/// leave them, inside their subgraph.
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
    /// (`samples.npy`, `[n, C, H, W]` after normalisation) and up to
    /// --validation-images images of the validation split
    /// (`validation.npy`, normalised the same way), for reference tools to
    /// calibrate on exactly the same data and compare predictions.
    #[arg(long, value_name = "DIR")]
    pub save_calibration: Option<PathBuf>,

    /// With --save-calibration: the most validation images `validation.npy` holds.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub validation_images: usize,
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

/// A model ready to calibrate: batch norms folded, the precision of every
/// node known, the activations to calibrate listed.
pub struct Prepared {
    pub folded: Graph,
    pub map: PrecisionMap,
    pub acts: Vec<Outlet>,
    pub batch_norms: usize,
}

/// Checks `graph` (read from `label`) can be quantized for `device`'s
/// precisions and folds its batch norms; warns about (or, `strict`,
/// refuses) int8-processor nodes without an int8 form.
pub fn prepare(graph: &Graph, label: &str, device: &Path, processor: Option<&str>, strict: bool) -> Result<Prepared> {
    quantize::check_not_quantized(graph).with_context(|| format!("cannot quantize {label}"))?;
    let profile = DeviceProfile::load(device).with_context(|| format!("cannot load {}", device.display()))?;
    let map = PrecisionMap::from_profile(&profile, processor)?;
    for id in graph.node_ids() {
        let n = graph.node(id);
        if !matches!(n.op, graph_ir::Op::Const(_) | graph_ir::Op::Input(_)) {
            map.of(n).with_context(|| format!("cannot quantize {label}"))?;
        }
    }
    let (folded, batch_norms) = quantize::fold_bn::fold_batch_norms(graph)?;
    let kept = quantize::kept_float(&folded, &map)?;
    if !kept.is_empty() {
        let list = kept.iter().take(8).cloned().collect::<Vec<_>>().join(", ");
        let more = if kept.len() > 8 {
            format!(" and {} more", kept.len() - 8)
        } else {
            String::new()
        };
        if strict {
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
    if acts.is_empty() && quantize::fp16::fp16_nodes(&folded, &map)?.is_empty() {
        bail!(
            "nothing to quantize in {label}: no node runs on an int8 or fp16 processor of {} ({})",
            device.display(),
            map.describe()
        );
    }
    Ok(Prepared {
        folded,
        map,
        acts,
        batch_norms,
    })
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
    let prepared = prepare(graph, label, device, processor, c.strict)?;
    let inputs = calibration_inputs(&prepared.folded, c, dataset, label)?;
    let ranges = if prepared.acts.is_empty() {
        Vec::new()
    } else {
        calibrate(&prepared.folded, &prepared.acts, c.method, &inputs)?
    };
    let (quantized, report) = quantize::insert_qdq(&prepared.folded, &prepared.map, &ranges)?;
    let (quantized, half) = quantize::to_fp16(&quantized, &prepared.map)?;
    graph_ir::onnx::export_file(&quantized, out).with_context(|| format!("cannot write {}", out.display()))?;
    println!(
        "{label}: {} node(s) in int8 ({} weights int8, {} activations with Q/DQ), {} in fp16 ({} constants fp16, {} casts), {} batch norms folded; calibrated with {} on {} {dataset} images; precisions {}",
        report.int8_nodes,
        report.weights,
        report.activations,
        half.nodes,
        half.constants,
        half.casts,
        prepared.batch_norms,
        c.method,
        c.samples,
        prepared.map.describe()
    );
    println!("wrote {}", out.display());
    report_tract_fallbacks(&quantized);
    Ok(())
}

/// Prints how tract computes the int8 matrix products: the ones
/// [`graph_ir::onnx::fuse_qdq`] rewrites into onnxruntime's arithmetic, and
/// the ones it runs as written (float on dequantized values).
fn report_tract_fallbacks(quantized: &Graph) {
    let products: Vec<String> = quantized
        .node_ids()
        .into_iter()
        .map(|id| quantized.node(id))
        .filter(|n| {
            matches!(
                n.op,
                graph_ir::Op::Conv(_) | graph_ir::Op::Gemm(_) | graph_ir::Op::MatMul(_)
            ) && n
                .inputs
                .get(1)
                .is_some_and(|w| matches!(quantized.node(w.node).op, graph_ir::Op::DequantizeLinear(_)))
        })
        .map(|n| n.name.clone())
        .collect();
    if products.is_empty() {
        return;
    }
    let fused = match graph_ir::onnx::export_bytes(quantized) {
        Ok(bytes) => graph_ir::onnx::fuse_qdq(&bytes).map(|(_, f)| f).unwrap_or_default(),
        Err(e) => {
            println!("warning: could not write the quantized model to ask how tract runs it: {e}");
            return;
        }
    };
    let as_written: Vec<&String> = products.iter().filter(|p| !fused.product_names.contains(p)).collect();
    let exact = products.len() - as_written.len();
    let forms = format!(
        "{} in float on their integer values, exact; {} as QLinearConv",
        fused.float_products,
        exact - fused.float_products
    );
    if as_written.is_empty() {
        println!(
            "tract {}: {exact} of {} int8 matrix products computed as onnxruntime computes them ({forms})",
            engine::TRACT_VERSION,
            products.len()
        );
    } else {
        println!(
            "tract {}: {exact} of {} int8 matrix products computed as onnxruntime computes them ({forms}); {} run as written, in float on dequantized values: {}{}",
            engine::TRACT_VERSION,
            products.len(),
            as_written.len(),
            as_written
                .iter()
                .take(4)
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            if as_written.len() > 4 { ", ..." } else { "" }
        );
    }
}

/// Runs the fp32 model `g` on `inputs` (`[n, C, H, W]`, normalised) and
/// reduces each activation of `acts` to a range by `method`.
pub fn calibrate(g: &Graph, acts: &[Outlet], method: Method, inputs: &[f32]) -> Result<Vec<(f32, f32)>> {
    let mut collector = Collector::new(method, acts.len());
    let bar = crate::progress::spinner("calibrating {spinner} pass {pos} {elapsed}");
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    for pass in 0..collector.passes() {
        bar.set_position(pass as u64 + 1);
        scheduler_rt::probe::probe(g, acts, inputs, |k, v| collector.observe(pass, k, v))?;
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

/// `[C, H, W]` of `g`'s one image input.
pub fn image_shape(g: &Graph, label: &str) -> Result<[usize; 3]> {
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
    Ok([c, h, w])
}

/// The first `samples` images of `train` (indices into `set`), normalised
/// by `transform`; refused when there are fewer or they are constant.
pub fn calibration_images(
    set: &dyn Dataset,
    train: &[usize],
    samples: usize,
    transform: &Transform,
) -> Result<Vec<f32>> {
    if samples == 0 {
        bail!("--samples 0: calibration needs at least one image");
    }
    let picked: Vec<usize> = train.iter().take(samples).copied().collect();
    if picked.len() < samples {
        bail!(
            "--samples {samples}: the training split of {} has {} images",
            set.describe(),
            picked.len()
        );
    }
    let inputs = transform.batch(set, &picked, None);
    let (lo, hi) = inputs
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), v| (a.min(*v), b.max(*v)));
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        bail!(
            "the {} calibration images of {} are constant (every input value {lo}): they give no activation range",
            picked.len(),
            set.describe()
        );
    }
    Ok(inputs)
}

/// `args.samples` images of the training split, normalised as `train`
/// does (`[n, C, H, W]`); written with the calibrated model when asked.
fn calibration_inputs(g: &Graph, args: &CalibrationArgs, dataset: &DatasetSpec, label: &str) -> Result<Vec<f32>> {
    let [c, h, w] = image_shape(g, label)?;
    let set = training::data::load(dataset, [h, w])?;
    let split = split_of(&set, args.val_fraction, args.split_seed, None);
    let transform = Transform::fit(&set, &split.train, [c, h, w], Default::default())
        .with_context(|| format!("calibration images {} for {label}", set.describe()))?;
    let inputs = calibration_images(&set, &split.train, args.samples, &transform)?;
    let converted: Vec<String> = set.converted.iter().cloned().chain(transform.conversion()).collect();
    if !converted.is_empty() {
        println!(
            "note: calibration images of {} converted for {label}: {}",
            set.describe(),
            converted.join("; ")
        );
    }
    if let Some(dir) = &args.save_calibration {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        graph_ir::onnx::export_file(g, dir.join("fp32.onnx"))?;
        let array = scheduler_rt::npy::Array {
            shape: vec![args.samples, c, h, w],
            data: inputs.clone(),
        };
        scheduler_rt::npy::write(&dir.join("samples.npy"), &array)?;
        let val: Vec<usize> = split.val.iter().take(args.validation_images).copied().collect();
        let array = scheduler_rt::npy::Array {
            shape: vec![val.len(), c, h, w],
            data: transform.batch(&set, &val, None),
        };
        scheduler_rt::npy::write(&dir.join("validation.npy"), &array)?;
    }
    Ok(inputs)
}
