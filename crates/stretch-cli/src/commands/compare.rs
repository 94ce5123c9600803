//! `stretch compare-accuracy`: trains an original and its branched version
//! with the same recipe and seed and compares them (paper Table 7).

use std::path::{Path, PathBuf};

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use anyhow::{Context, Result, bail};
use graph_ir::Graph;
use serde::Serialize;
use training::data::{Dataset, ImageSet};
use training::{Distill, Recipe};

use crate::commands::compare_rows::{Row, lines, with_quantized};
use crate::commands::qat::PrecisionArgs;
use crate::commands::train::{Outputs, train_graph};
use crate::format::table;
use crate::recipe_args::RecipeArgs;
use crate::recipe_args::distill;
use crate::recipe_args::{import_for_training, load_dataset};

/// Train ORIGINAL and each BRANCHED model from scratch with the same recipe, seed and
/// data split, and print params, MACs, validation top-1/top-5 and training
/// time side by side, with the accuracy gap (the paper's Table 7
/// comparison). Both models are re-initialised (He-uniform weights, fresh
/// BatchNorm) unless --keep-weights is given. With --distill each branched
/// model is trained a second time, from the same initial weights, with the
/// trained original as its teacher (soft labels, paper §7.3). Trained models,
/// metrics CSVs and learning curves go to --out-dir.
///
/// With --precision profile --device D.toml each trained branched model is
/// also quantized for D's processors twice: after training (post-training
/// quantization, `-ptq.onnx`) and after --qat-epochs of quantization-aware
/// fine-tuning from its trained weights (`-qat.onnx`, as `train
/// --precision profile`); both files are run by tract on the validation
/// images, and the table adds each file's size and its top-1 against the
/// fp32 branched model's.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The original model.
    pub original: PathBuf,

    /// Branched versions of it (from `stretch branch`), one or more.
    #[arg(required = true)]
    pub branched: Vec<PathBuf>,

    #[command(flatten)]
    pub recipe: RecipeArgs,

    /// Start from the weights in the files instead of re-initialising.
    #[arg(long)]
    pub keep_weights: bool,

    /// Also train each branched model with the trained original as teacher.
    #[arg(long)]
    pub distill: bool,

    /// With --distill: weight of the teacher's soft labels, in [0, 1] [default: 0.5].
    #[arg(long, value_name = "ALPHA")]
    pub kd_alpha: Option<f64>,

    /// With --distill: distillation temperature, positive [default: 4.0].
    #[arg(long, value_name = "T")]
    pub kd_temperature: Option<f64>,

    /// Models trained at the same time (threads; each with its own
    /// --threads for burn's CPU kernels). The original and the branched
    /// models train first, then the distilled ones with the trained original
    /// as teacher. Every model's training is the same as with 1 (on one
    /// thread each, bit-identical); more jobs use more cores, or keep a GPU
    /// busy with small models.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: u32,

    #[command(flatten)]
    pub precision: PrecisionArgs,

    /// With --precision profile: epochs of quantization-aware fine-tuning
    /// of each trained branched model.
    #[arg(long, default_value_t = 2)]
    pub qat_epochs: usize,

    /// With --precision profile: peak learning rate of that fine-tuning [default: --lr / 10].
    #[arg(long, value_name = "LR")]
    pub qat_lr: Option<f64>,

    /// Directory for trained models, metrics and curves.
    #[arg(long, value_name = "DIR", default_value = "compare-accuracy")]
    pub out_dir: PathBuf,

    /// Also write every row as JSON (schema "stretch.compare-accuracy/1":
    /// `seed`, `epochs`, `train_images`, `val_images`, `val_source` and
    /// `rows`, each with `label`, `file`, `distilled`, `params`, `macs`,
    /// `top1`, `top5` (percent, last epoch), `best_top1`, `gap_top1`
    /// (points against the original), `train_seconds`, `precision` (`fp32`,
    /// `ptq` or `qat`), `file_bytes` (the written model's size) and
    /// `gap_fp32_branched` (quantized rows: points against the fp32
    /// branched model they come from)).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Serialize)]
struct Report<'a> {
    schema: &'static str,
    seed: u64,
    epochs: usize,
    train_images: usize,
    val_images: usize,
    val_source: &'static str,
    /// The recipe every model was trained with (the distilled ones add the
    /// teacher's settings in `distill`).
    recipe: Recipe,
    backend: String,
    rows: &'a [Row],
}

/// A trained model and its row of the comparison.
type Trained = (Graph, Row);

/// What is trained: a label, the source file, its imported graph and
/// whether the trained original teaches it.
struct Job<'a> {
    label: String,
    path: &'a Path,
    graph: &'a Graph,
    distilled: bool,
}

/// The original, each branched model, and each branched model distilled
/// when `distill`.
fn jobs<'a>(args: &'a Args, graphs: &'a [Graph], distill: bool) -> Vec<Job<'a>> {
    let mut jobs = vec![Job {
        label: "original".to_string(),
        path: &args.original,
        graph: &graphs[0],
        distilled: false,
    }];
    let stems: Vec<String> = args
        .branched
        .iter()
        .map(|b| {
            b.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    for (i, (b, stem)) in args.branched.iter().zip(&stems).enumerate() {
        jobs.push(Job {
            label: format!("branched{}-{stem}", i + 1),
            path: b,
            graph: &graphs[i + 1],
            distilled: false,
        });
    }
    if distill {
        for (i, (b, stem)) in args.branched.iter().zip(&stems).enumerate() {
            jobs.push(Job {
                label: format!("branched{}-{stem}-kd", i + 1),
                path: b,
                graph: &graphs[i + 1],
                distilled: true,
            });
        }
    }
    jobs
}

pub fn run(args: Args) -> Result<()> {
    let kd = distill(args.distill, "--distill", args.kd_alpha, args.kd_temperature)?;
    let device = args.precision.device()?.map(Path::to_path_buf);
    if let Some(d) = &device {
        predictor::DeviceProfile::load(d).with_context(|| format!("cannot load {}", d.display()))?;
    }
    std::fs::create_dir_all(&args.out_dir).with_context(|| format!("cannot create {}", args.out_dir.display()))?;
    let original = import_for_training(&args.original)?;
    let set = load_dataset(&args.recipe, &original)?;
    let mut graphs = vec![original];
    for b in &args.branched {
        graphs.push(import_for_training(b)?);
    }
    let paths: Vec<&Path> = std::iter::once(args.original.as_path())
        .chain(args.branched.iter().map(|b| b.as_path()))
        .collect();
    check_models(&paths, &graphs, &set, kd.is_some())?;
    let jobs = jobs(&args, &graphs, kd.is_some());
    let (first_wave, second_wave): (Vec<&Job>, Vec<&Job>) = jobs.iter().partition(|j| !j.distilled);
    let mut trained = run_wave(&args, &set, &first_wave, None, kd)?;
    let teacher = trained.first().map(|(graph, _)| graph).context("nothing was trained")?;
    let distilled = run_wave(&args, &set, &second_wave, Some(teacher), kd)?;
    trained.extend(distilled);
    let mut rows = match &device {
        Some(_) => with_quantized(&args, &set, trained)?,
        None => trained.into_iter().map(|(_, row)| row).collect(),
    };
    let base = rows[0].top1;
    for row in &mut rows[1..] {
        row.gap_top1 = row.top1 - base;
    }
    let lines = lines(&rows);
    println!();
    print!("{}", table(&lines, 1));
    let split = training::data::split_of(&set, args.recipe.val_fraction, args.recipe.seed, args.recipe.limit);
    let val_source = if set.test_start().is_some() {
        "the dataset's test split"
    } else {
        "a seeded random split"
    };
    println!(
        "gap = branched - original top-1 (points), all measured on the same {} validation images ({val_source}, seed {}), trained on {} images",
        split.val.len(),
        args.recipe.seed,
        split.train.len()
    );
    println!("models, metrics and curves in {}", args.out_dir.display());
    if let Some(path) = &args.json {
        let report = Report {
            schema: "stretch.compare-accuracy/1",
            seed: args.recipe.seed,
            epochs: args.recipe.epochs,
            train_images: split.train.len(),
            val_images: split.val.len(),
            val_source,
            recipe: args.recipe.recipe(kd)?,
            backend: args.recipe.backend.to_string(),
            rows: &rows,
        };
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Trains `wave`'s models, up to `--jobs` at a time, and returns each trained
/// graph with its row (gap not yet set) in `wave`'s order. After a failure
/// no further model is started, and the first failure in `wave`'s order is
/// returned once the models in flight have finished.
fn run_wave(
    args: &Args,
    set: &ImageSet,
    wave: &[&Job],
    teacher: Option<&Graph>,
    kd: Option<Distill>,
) -> Result<Vec<Trained>> {
    let workers = (args.jobs as usize).min(wave.len());
    if workers <= 1 {
        return wave.iter().map(|job| train_job(args, set, job, teacher, kd)).collect();
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let slots: Vec<Mutex<Option<Result<Trained>>>> = wave.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while !failed.load(Ordering::SeqCst) {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(job) = wave.get(i) else { break };
                    let result = train_job(args, set, job, teacher, kd);
                    if result.is_err() {
                        failed.store(true, Ordering::SeqCst);
                    }
                    *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
                }
            });
        }
    });
    let mut out = Vec::with_capacity(wave.len());
    for (slot, job) in slots.into_iter().zip(wave) {
        match slot.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(result) => out.push(result?),
            None => bail!("{} was not trained: an earlier model failed", job.path.display()),
        }
    }
    Ok(out)
}

/// Fails, naming the file, unless every model lowers for training, outputs
/// the dataset's classes and, when the original teaches them, takes the
/// original's input: checked before anything trains.
fn check_models(paths: &[&Path], graphs: &[Graph], set: &ImageSet, distill: bool) -> Result<()> {
    let mut first: Option<[usize; 3]> = None;
    for (path, graph) in paths.iter().zip(graphs) {
        let program = training::lower(graph).with_context(|| format!("cannot train {}", path.display()))?;
        if program.classes() != set.classes() {
            return Err(training::TrainError::ClassMismatch {
                model: program.classes(),
                dataset: set.classes(),
            })
            .with_context(|| format!("{}", path.display()));
        }
        let input = program.input_shape();
        match first {
            None => first = Some(input),
            Some(teacher) if distill && teacher != input => bail!(
                "{}: takes {input:?} inputs, the original (its teacher with --distill) {teacher:?}",
                path.display()
            ),
            Some(_) => {}
        }
    }
    Ok(())
}

/// Trains one model of the comparison from its file (re-initialised unless
/// --keep-weights) and writes it to --out-dir.
fn train_job(args: &Args, set: &ImageSet, job: &Job, teacher: Option<&Graph>, kd: Option<Distill>) -> Result<Trained> {
    let mut graph = job.graph.clone();
    let program = training::lower(&graph).with_context(|| format!("cannot train {}", job.path.display()))?;
    if !args.keep_weights {
        training::reinitialise(&mut graph, &program, args.recipe.seed)?;
    }
    let cost = graph.total_cost();
    let out = args.out_dir.join(format!("{}.onnx", job.label));
    let recipe = args.recipe.recipe(if job.distilled { kd } else { None })?;
    let teach = if job.distilled { teacher } else { None };
    let (history, seconds) = train_graph(
        &mut graph,
        &job.label,
        set as &dyn Dataset,
        recipe,
        &args.recipe,
        teach,
        &Outputs::beside(&out),
        None,
        None,
        None,
    )?;
    graph_ir::onnx::export_file(&graph, &out).with_context(|| format!("cannot write {}", out.display()))?;
    let last = history.last().context("no epoch was trained")?;
    let row = Row {
        label: job.label.clone(),
        file: job.path.display().to_string(),
        distilled: job.distilled,
        params: cost.params,
        macs: cost.macs,
        top1: last.val_top1,
        top5: last.val_top5,
        best_top1: history.iter().map(|m| m.val_top1).fold(0.0, f64::max),
        gap_top1: 0.0,
        train_seconds: seconds,
        precision: "fp32",
        file_bytes: std::fs::metadata(&out).map_or(0, |m| m.len()),
        gap_fp32_branched: None,
    };
    Ok((graph, row))
}
