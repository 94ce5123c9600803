//! `stretch train`: trains a model (original or branched) with burn and
//! writes the trained weights back as ONNX.

mod quantized;
mod report;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use graph_ir::Graph;
use training::data::Dataset;
use training::{EpochMetrics, Progress, Recipe, Session, TrainError};

use crate::commands::qat::{Calibrated, PrecisionArgs};
use crate::curve::{learning_curve_svg, metrics_csv};
use crate::model_args::ModelArgs;
use crate::recipe_args::{RecipeArgs, beside, distill, import_for_training, load_dataset};
use quantized::{post_training, write_fine_tuned};
use report::{Bar, empty, epoch_line, say, setup_line};
use training::{QuantizedScores, TrainResult};

/// Train a model on an image classification dataset with burn (CPU by
/// default) and write the trained weights, BatchNorm running statistics
/// included, back into the ONNX model.
///
/// The recipe is NN-Stretch's: SGD with momentum 0.9 and a half-period cosine
/// learning-rate schedule (Adam as an option). Each epoch prints the training
/// loss and top-1 and the validation loss, top-1 and top-5, appends them to
/// the metrics CSV, redraws the learning curve (SVG) and saves a checkpoint;
/// `--resume CHECKPOINT` continues an interrupted run exactly where it
/// stopped (with one thread, bit-identical to an uninterrupted run). A loss
/// that becomes NaN or infinite stops the run naming the epoch and batch;
/// the last checkpoint stays the last good one.
///
/// Works on branched models from `stretch branch` the same way: every branch
/// is trained jointly. `--teacher ORIGINAL.onnx` adds soft-label distillation
/// from the original model (paper §7.3).
///
/// `--precision profile --device D.toml` fine-tunes at each processor's
/// precision (quantization-aware training): the activations `stretch
/// quantize` would quantize are calibrated on the training split (batch
/// norms folded), and training rounds them, and the int8 weights per
/// channel, as the quantized file will (fp16 processors' values and
/// weights to half precision), with straight-through gradients; batch
/// norms train unfolded. OUT is then the quantized model (folded, as
/// `stretch quantize` writes it, at the same ranges) and the fine-tuned
/// float model is written beside it as OUT.fp32.onnx. Fine-tuning starts
/// from the file's weights: give a trained fp32 model, a few epochs and a
/// small --lr.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub recipe: RecipeArgs,

    /// Teacher model for soft-label distillation (same input and classes).
    #[arg(long, value_name = "TEACHER.onnx")]
    pub teacher: Option<PathBuf>,

    /// With --teacher: weight of the teacher's soft labels, in [0, 1] (the
    /// true labels get 1 - alpha) [default: 0.5].
    #[arg(long, value_name = "ALPHA")]
    pub kd_alpha: Option<f64>,

    /// With --teacher: distillation temperature, positive [default: 4.0].
    #[arg(long, value_name = "T")]
    pub kd_temperature: Option<f64>,

    /// If the model's classifier has another number of outputs than the
    /// dataset has classes, replace it by a fresh one of the right size.
    #[arg(long)]
    pub replace_head: bool,

    /// Re-initialise every weight from --seed before training (He-uniform,
    /// fresh BatchNorm), as `compare-accuracy` does: training from scratch.
    #[arg(long, conflicts_with = "resume")]
    pub reinitialise: bool,

    /// Continue from this checkpoint (same model, dataset and recipe).
    #[arg(long, value_name = "CHECKPOINT")]
    pub resume: Option<PathBuf>,

    /// Where to save the checkpoint each epoch [default: OUT with .ckpt].
    #[arg(long, value_name = "FILE")]
    pub checkpoint: Option<PathBuf>,

    /// Stop after this epoch, leaving the checkpoint to `--resume` from later
    /// (for time-limited jobs); the model written is the one at that epoch.
    #[arg(long, value_name = "EPOCH")]
    pub stop_after: Option<usize>,

    /// Per-epoch metrics CSV [default: OUT with .metrics.csv].
    #[arg(long, value_name = "FILE.csv")]
    pub metrics: Option<PathBuf>,

    /// Learning-curve SVG [default: OUT with .curve.svg].
    #[arg(long, value_name = "FILE.svg")]
    pub curve: Option<PathBuf>,

    #[command(flatten)]
    pub precision: PrecisionArgs,

    /// With --precision profile: also write the model quantized as given,
    /// before fine-tuning (post-training quantization), and with --json
    /// its validation accuracy as a file.
    #[arg(long, value_name = "FILE.onnx")]
    pub ptq: Option<PathBuf>,

    /// Write the run's figures as JSON (schema "stretch.train/1": `model`,
    /// `out`, `seed`, `epochs`, `params`, `macs`, `top1`, `top5`,
    /// `best_top1` (percent), `train_seconds`, `file_bytes`, and with
    /// --precision profile `quantized`: `qat` (OUT) and `ptq` (--ptq), each
    /// `file`, `top1`, `top5` and `file_bytes` of the file as written, run
    /// by tract on the validation split).
    #[arg(long, value_name = "FILE.json")]
    pub json: Option<PathBuf>,

    /// Trained model to write.
    #[arg(short, long, value_name = "OUT.onnx")]
    pub out: PathBuf,
}

/// Where a run writes its side files.
pub struct Outputs {
    pub checkpoint: PathBuf,
    pub metrics: PathBuf,
    pub curve: PathBuf,
}

impl Outputs {
    pub fn beside(out: &Path) -> Outputs {
        Outputs {
            checkpoint: beside(out, ".ckpt"),
            metrics: beside(out, ".metrics.csv"),
            curve: beside(out, ".curve.svg"),
        }
    }
}

/// Trains `graph` in place for the recipe's epochs (or until `stop_after`),
/// writing checkpoint, metrics and curve every epoch. Returns the history and
/// the wall-clock seconds of this call.
#[allow(clippy::too_many_arguments)]
pub fn train_graph(
    graph: &mut Graph,
    label: &str,
    set: &dyn Dataset,
    recipe: Recipe,
    args: &RecipeArgs,
    teacher: Option<&Graph>,
    outputs: &Outputs,
    resume: Option<&Path>,
    stop_after: Option<usize>,
    fake_quant: Option<&training::QuantSpec>,
) -> Result<(Vec<EpochMetrics>, f64)> {
    let start = Instant::now();
    let epochs = recipe.epochs;
    let history = training::with_threads(args.threads, || -> Result<Vec<EpochMetrics>> {
        let mut session = Session::new(graph, set, recipe, args.backend, teacher)?;
        session.set_conv_grad(args.conv_grad)?;
        match (args.autograd, args.preferred_autograd()) {
            (Some(a), _) => session.set_autograd(a)?,
            (None, Some(a)) => {
                if let Err(e) = session.set_autograd(a) {
                    say(format!("{label}: burn's autograd, not {a}'s: {e}"));
                }
            }
            (None, None) => {}
        }
        session.set_phase_times(args.phase_times);
        if let Some(spec) = fake_quant {
            session.set_fake_quant(spec)?;
        }
        if let Some(r) = resume {
            session.resume(r)?;
            say(format!(
                "{label}: resumed from {} after epoch {}",
                r.display(),
                session.epochs_done()
            ));
        }
        say(setup_line(label, &session, set, args));
        let mut bar = Bar { label, bar: None };
        while session.epochs_done() < epochs && stop_after.is_none_or(|s| session.epochs_done() < s) {
            let m = match session.run_epoch(&mut bar) {
                Ok(m) => m,
                Err(TrainError::NonFinite {
                    value, epoch, batch, ..
                }) => {
                    bar.epoch_done(&session.history().last().cloned().unwrap_or_else(|| empty(epoch)));
                    let last = if session.epochs_done() > 0 {
                        format!(
                            "the last good checkpoint is {} (epoch {})",
                            outputs.checkpoint.display(),
                            session.epochs_done()
                        )
                    } else {
                        "no checkpoint was written yet".to_string()
                    };
                    return Err(TrainError::NonFinite {
                        value,
                        epoch,
                        batch,
                        checkpoint: last,
                    }
                    .into());
                }
                Err(e) => return Err(e.into()),
            };
            say(epoch_line(label, &m, epochs));
            if let Some(p) = session.phase_times() {
                say(format!("{label} epoch {:>3}/{epochs}  {}", m.epoch, p.line()));
            }
            session.save_checkpoint(&outputs.checkpoint)?;
            write(&outputs.metrics, metrics_csv(session.history()))?;
            write(&outputs.curve, learning_curve_svg(label, session.history()))?;
        }
        session.write_back(graph)?;
        let t = session.transform();
        graph.set_input_normalisation(&t.mean, &t.std);
        Ok(session.history().to_vec())
    })?;
    Ok((history, start.elapsed().as_secs_f64()))
}

fn write(path: &Path, text: String) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// `graph` made ready to train on `set`: its classifier checked (or replaced
/// with --replace-head), its weights re-initialised with --reinitialise.
fn fit_model(args: &Args, set: &dyn Dataset, graph: &mut Graph) -> Result<()> {
    let lower = |g: &Graph| training::lower(g).with_context(|| format!("cannot train {}", args.model.model.display()));
    let mut program = lower(graph)?;
    if program.classes() != set.classes() {
        if !args.replace_head {
            return Err(TrainError::ClassMismatch {
                model: program.classes(),
                dataset: set.classes(),
            }
            .into());
        }
        let name = training::replace_head(graph, set.classes(), args.recipe.seed)?;
        println!(
            "replaced the classifier '{name}' ({} outputs) by a fresh {}-way one",
            program.classes(),
            set.classes()
        );
        program = lower(graph)?;
    }
    if args.reinitialise {
        training::reinitialise(graph, &program, args.recipe.seed)?;
    }
    Ok(())
}

impl Args {
    /// Where the run writes its side files: the options, else beside OUT.
    fn outputs(&self) -> Outputs {
        let default = Outputs::beside(&self.out);
        Outputs {
            checkpoint: self.checkpoint.clone().unwrap_or(default.checkpoint),
            metrics: self.metrics.clone().unwrap_or(default.metrics),
            curve: self.curve.clone().unwrap_or(default.curve),
        }
    }
}

pub fn run(args: Args) -> Result<()> {
    let distill = distill(
        args.teacher.is_some(),
        "--teacher TEACHER.onnx",
        args.kd_alpha,
        args.kd_temperature,
    )?;
    let mut graph = args.model.load()?;
    let set = load_dataset(&args.recipe, &graph)?;
    fit_model(&args, &set, &mut graph)?;
    if args.ptq.is_some() && args.precision.device()?.is_none() {
        bail!("--ptq writes a model quantized for a device: it needs --precision profile --device PROFILE.toml");
    }
    let cost = graph.total_cost();
    let teacher = match &args.teacher {
        Some(t) => Some(import_for_training(t)?),
        None => None,
    };
    let recipe = args.recipe.recipe(distill)?;
    if args.resume.is_some() && args.stop_after.is_some_and(|s| s == 0) {
        bail!("--stop-after 0 would not train at all");
    }
    let outputs = args.outputs();
    let label = args
        .model
        .model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let calibrated = match args.precision.device()? {
        Some(_) => Some(Calibrated::new(&graph, &label, &args.precision, &set, &args.recipe)?),
        None => None,
    };
    let spec = calibrated.as_ref().map(|c| c.spec(&graph)).transpose()?;
    let ptq = match (&calibrated, &args.ptq) {
        (Some(cal), Some(path)) => Some(post_training(cal, &graph, path, &set, args.json.is_some())?),
        _ => None,
    };
    let (history, seconds) = train_graph(
        &mut graph,
        &label,
        &set,
        recipe,
        &args.recipe,
        teacher.as_ref(),
        &outputs,
        args.resume.as_deref(),
        args.stop_after,
        spec.as_ref(),
    )?;
    let scores = match &calibrated {
        Some(cal) => {
            let qat = write_fine_tuned(cal, &graph, &args.out, &set, &args.precision, args.json.is_some())?;
            qat.map(|qat| QuantizedScores {
                ptq: ptq.flatten(),
                qat,
            })
        }
        None => {
            graph_ir::onnx::export_file(&graph, &args.out)
                .with_context(|| format!("cannot write {}", args.out.display()))?;
            None
        }
    };
    if let Some(last) = history.last() {
        let best = history.iter().map(|m| m.val_top1).fold(0.0, f64::max);
        println!(
            "trained {} epochs in {seconds:.1} s: validation top-1 {:.2}% (best {best:.2}%), top-5 {:.2}%",
            last.epoch, last.val_top1, last.val_top5
        );
    }
    println!("wrote {}", args.out.display());
    if let Some(path) = &args.json {
        let mut result = TrainResult::from_history(
            &args.model.model,
            &args.out,
            args.recipe.seed,
            (cost.params, cost.macs),
            &history,
            seconds,
        )?;
        result.quantized = scores;
        result.write(path)?;
        println!("wrote {}", path.display());
    }
    println!("checkpoint {}", outputs.checkpoint.display());
    println!("metrics {}", outputs.metrics.display());
    println!("learning curve {}", outputs.curve.display());
    Ok(())
}
