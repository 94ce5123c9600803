//! `stretch compare-accuracy`: trains an original and its branched version
//! with the same recipe and seed and compares them (paper Table 7).

pub(crate) mod rows;

use std::path::{Path, PathBuf};

use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result, bail};
use graph_ir::Graph;
use sweep::spec::{Precision, Qat};
use sweep::{LocalPool, State, SweepFile};
use training::Distill;
use training::data::{Dataset, ImageSet};

use crate::commands::qat::PrecisionArgs;
use crate::commands::sweep::seed_rows;
use crate::format::table;
use crate::recipe_args::RecipeArgs;
use crate::recipe_args::distill;
use crate::recipe_args::{import_for_training, load_dataset};
use rows::lines;
use training::comparison::CompareReport;

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
///
/// The comparison is a sweep of one seed (`stretch sweep`): each model is
/// trained by its own `stretch train` process, the same command lines a
/// sweep file with these options runs, so the table equals that sweep's.
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

    /// Models trained at the same time (processes; each with its own
    /// --threads for burn's CPU kernels). A distilled model starts once the
    /// original (its teacher) is trained. Every model's training is the
    /// same as with 1 (on one thread each, bit-identical); more jobs use
    /// more cores, or keep a GPU busy with small models.
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

    /// Directory for trained models, metrics and curves (and `state.json`,
    /// the record of the sweep the comparison runs as).
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

/// The comparison as a sweep of one seed: the models as given, the recipe
/// as these options say, every file in --out-dir.
fn as_sweep(args: &Args, kd: Option<Distill>) -> SweepFile {
    let device = args.precision.device().ok().flatten().map(Path::to_path_buf);
    let mut recipe = args.recipe.options();
    recipe.retain(|k, _| k != "seed");
    SweepFile {
        dataset: args.recipe.dataset.to_string(),
        original: args.original.clone(),
        zoo: Default::default(),
        models: args.branched.clone(),
        plans: Vec::new(),
        stretch: Vec::new(),
        seeds: vec![args.recipe.seed],
        precisions: match device {
            Some(_) => vec![Precision::Fp32, Precision::Profile],
            None => vec![Precision::Fp32],
        },
        device,
        distill: kd.is_some(),
        kd_alpha: kd.map(|d| d.alpha),
        kd_temperature: kd.map(|d| d.temperature),
        keep_weights: args.keep_weights,
        recipe,
        qat: Qat {
            epochs: args.qat_epochs as u64,
            lr: args.qat_lr,
            options: args.precision.calibration_options(),
        },
    }
}

/// Messages of the sweep's driver, on stderr.
struct Say;

impl sweep::Observer for Say {
    fn counts(&mut self, _: sweep::Counts) {}
    fn say(&mut self, line: String) {
        eprintln!("{line}");
    }
}

pub fn run(args: Args) -> Result<()> {
    let kd = distill(args.distill, "--distill", args.kd_alpha, args.kd_temperature)?;
    if let Some(d) = args.precision.device()? {
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
    let file = as_sweep(&args, kd);
    let dir =
        std::path::absolute(&args.out_dir).with_context(|| format!("cannot resolve {}", args.out_dir.display()))?;
    let layout = sweep::Layout {
        dir: &dir,
        default_lr: crate::recipe_args::DEFAULT_LR,
        flat: true,
    };
    let jobs = sweep::expand(&file, &layout);
    let program = std::env::current_exe().context("cannot find the stretch binary")?;
    let mut pool = LocalPool::new(&program, args.jobs as usize).inheriting_output();
    let mut state = State::open(&dir)?;
    state.jobs.clear();
    let stop = AtomicBool::new(false);
    let outcome = sweep::run(&jobs, &mut state, &mut pool, 0, &mut Say, &stop)?;
    if let Some((job, error)) = outcome.failed.first() {
        bail!("{job} was not trained: {error}");
    }
    let rows = seed_rows(&jobs.iter().collect::<Vec<_>>(), &outcome.failed)?;
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
        let report = CompareReport {
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
        report.write(path)?;
        println!("wrote {}", path.display());
    }
    Ok(())
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
