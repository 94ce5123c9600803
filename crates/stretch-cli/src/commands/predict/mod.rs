//! `stretch predict`: predicted latency of a model on one processor.

mod bundle;

use crate::model_args::ModelArgs;
use anyhow::{Context, Result};
use predictor::{DeviceModel, LatencyModel, Source};
use std::io::Write;
use std::path::PathBuf;

/// Predict a model's latency on one processor of a device, kernel by kernel.
///
/// The graph is split into kernels by the processor's fusion rules
/// (conv+bn+act, add+act, ... or the profile's own list); each kernel's
/// latency is predicted and the figures are summed with the per-subgraph
/// overhead. Every figure is a prediction, and each row says which model made
/// it: `analytic` (roofline over the device profile's figures) or a regressor
/// fitted from measurements (`stretch fit`). A profile names a processor's
/// regressors with `regressors = "FILE"`; --regressors overrides that for
/// the asked processor and --analytic ignores every regressor.
///
/// A profile may also name an in-model calibration (`calibration =
/// "FILE"`, fitted by scripts/benchmarks/predictor_host.sh): factors per
/// kernel group (the classes, with convolutions split into 1x1, grouped and
/// the rest) and a per-kernel cost applied on top of every kernel's figure,
/// said in the report; --analytic ignores it too. A kernel whose features
/// lie beyond the range its regressor was fitted on is given at least its
/// bytes at the profile's bandwidth (source `regressor ..., beyond its
/// range`).
///
/// Each processor is priced at the precision its profile runs it at
/// (`precision`, e.g. int8 on a phone CPU: compute at `speedup.int8` times
/// the rated throughput, a quarter of the fp32 bytes); --precision prices
/// it at another one the profile rates.
///
/// --json prints {schema: "stretch.predict/1", model, device, profile_file
/// (the file read: a `per_cpu` entry's on a CPU the profile lists), processor,
/// precision, total_ms, subgraph_overhead_ms, calibration (file or null), kernels:
/// [{name, class, ops, feature_names, features, ms, source}]}.
///
/// --bundle DIR predicts an exported bundle (`stretch export`) instead:
/// each subgraph file as exported (after rewrites) on its processor at the
/// precision its files compute, the hand-offs between processors by the
/// profile's links, and the makespan of running the subgraphs in manifest
/// order as soon as their inputs and processor are free.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// ONNX model to read.
    #[arg(value_name = "MODEL.onnx", required_unless_present = "bundle")]
    pub model: Option<PathBuf>,

    /// Shape of a graph input, as `1,3,224,224` (first input) or
    /// `NAME:1,3,224,224`.
    #[arg(long = "input-shape", value_name = "[NAME:]DIMS")]
    pub input_shape: Vec<graph_ir::onnx::InputShape>,

    /// Fill weights that have no data with values drawn from SEED.
    #[arg(long = "random-weights", value_name = "SEED")]
    pub random_weights: Option<u64>,

    /// An exported bundle to predict instead of a model (see above).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["model", "processor", "regressors", "precision"])]
    pub bundle: Option<PathBuf>,

    /// Device profile (TOML), e.g. configs/devices/snapdragon855.toml.
    #[arg(long, value_name = "PROFILE.toml")]
    pub device: PathBuf,

    /// Processor of the device to predict for (as named in the profile).
    #[arg(long, required_unless_present = "bundle")]
    pub processor: Option<String>,

    /// Kernel regressors (`stretch fit` output) to use for --processor,
    /// instead of those the profile names.
    #[arg(long, value_name = "REGRESSORS.json", conflicts_with = "analytic")]
    pub regressors: Option<PathBuf>,

    /// Use the analytic model only, ignoring the regressors the profile names.
    #[arg(long)]
    pub analytic: bool,

    /// Price --processor at this precision (fp32, fp16 or int8) instead of
    /// the one its profile gives; it must be one the profile rates.
    #[arg(long)]
    pub precision: Option<predictor::Precision>,

    /// Print the JSON document instead of a table.
    #[arg(long)]
    pub json: bool,

    /// With --bundle: price the subgraphs' `onnx` files, or their `tflite`
    /// files as exported (read back: NHWC, with the transposes, pads and
    /// (de)quantizations the LiteRT export inserted).
    #[arg(long, default_value = "onnx", value_parser = ["onnx", "tflite"], requires = "bundle")]
    pub format: String,
}

pub fn run(args: Args) -> Result<()> {
    if let Some(dir) = &args.bundle {
        return bundle::run(dir, &args.device, args.analytic, args.json, args.format == "tflite");
    }
    let model_args = ModelArgs {
        model: args.model.clone().context("give MODEL.onnx or --bundle DIR")?,
        input_shape: args.input_shape.clone(),
        random_weights: args.random_weights,
    };
    let processor = args.processor.clone().context("give --processor")?;
    run_model(&args, &model_args, &processor)
}

fn run_model(args: &Args, model_args: &ModelArgs, processor: &str) -> Result<()> {
    let mut model = DeviceModel::load(&args.device)?;
    if args.analytic {
        model = model.without_regressors();
    }
    if let Some(file) = &args.regressors {
        model.attach(processor, file)?;
    }
    if let Some(p) = args.precision {
        model
            .set_precision(processor, p)
            .with_context(|| format!("--precision {p}"))?;
    }
    let graph = model_args.load()?;
    let prediction = model
        .predict_graph(&graph, processor)
        .with_context(|| format!("cannot predict {}", model_args.model.display()))?;
    crate::warn_if_measured_elsewhere(model.profile());
    let profile_file = model.profile().file_read(&args.device).display().to_string();
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = serde_json::json!({
            "schema": "stretch.predict/1",
            "model": model_args.model.display().to_string(),
            "device": model.device(),
            "profile_file": profile_file,
            "processor": prediction.processor,
            "precision": model.profile().processor(processor)?.precision(),
            "total_ms": prediction.total_ms,
            "subgraph_overhead_ms": prediction.subgraph_overhead_ms,
            "calibration": prediction.calibration,
            "kernels": prediction.kernels,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    let mut rows = vec![
        ["kernel", "ops", "features", "predicted ms", "source"]
            .map(String::from)
            .to_vec(),
    ];
    for k in &prediction.kernels {
        let features: Vec<String> = k
            .feature_names
            .iter()
            .zip(&k.features)
            .map(|(n, v)| format!("{n}={}", crate::format::compact(*v)))
            .collect();
        let source = match &k.source {
            Source::Analytic => "analytic".to_string(),
            Source::Regressor { file } => format!("regressor {file}"),
            Source::Extrapolated { file, feature } => {
                format!("regressor {file}, `{feature}` beyond its range: at least its bytes at the bandwidth")
            }
            Source::Scaled { file, precision } => {
                format!("regressor {file} at the rated precision x analytic {precision} ratio")
            }
        };
        rows.push(vec![
            k.name.clone(),
            k.ops.join("+"),
            features.join(" "),
            format!("{:.4}", k.ms),
            source,
        ]);
    }
    write!(out, "{}", crate::format::table(&rows, 3))?;
    let precision = model.profile().processor(processor)?.precision();
    writeln!(
        out,
        "predicted total on {}/{} at {precision}: {:.3} ms ({} kernels + {:.3} ms subgraph overhead)",
        model.device(),
        prediction.processor,
        prediction.total_ms,
        prediction.kernels.len(),
        prediction.subgraph_overhead_ms
    )?;
    if let Some(c) = &prediction.calibration {
        writeln!(out, "every kernel's figure calibrated in-model by {c}")?;
    }
    if let Some(file) = &model.profile().resolved_from {
        writeln!(
            out,
            "profile read from {file}: {}'s per_cpu entry for this CPU",
            args.device.display()
        )?;
    }
    Ok(())
}
