//! `stretch compare-accuracy`: trains an original and its branched version
//! with the same recipe and seed and compares them (paper Table 7).

use std::path::PathBuf;

use anyhow::{Context, Result};
use training::data::Dataset;

use crate::commands::train::{Outputs, import_for_training, load_dataset, train_graph};
use crate::format::{si, table};
use crate::recipe_args::RecipeArgs;

/// Train ORIGINAL and each BRANCHED model from scratch with the same recipe, seed and
/// data split, and print params, MACs, validation top-1/top-5 and training
/// time side by side, with the accuracy gap (the paper's Table 7
/// comparison). Both models are re-initialised (He-uniform weights, fresh
/// BatchNorm) unless --keep-weights is given. Trained models, metrics CSVs
/// and learning curves go to --out-dir.
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

    /// Directory for trained models, metrics and curves.
    #[arg(long, value_name = "DIR", default_value = "compare-accuracy")]
    pub out_dir: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    std::fs::create_dir_all(&args.out_dir).with_context(|| format!("cannot create {}", args.out_dir.display()))?;
    let mut rows = vec![vec![
        "model".to_string(),
        "params".into(),
        "MACs".into(),
        "val top-1".into(),
        "val top-5".into(),
        "train time".into(),
    ]];
    let mut top1 = Vec::new();
    let mut set_holder = None;
    let mut models = vec![("original".to_string(), &args.original)];
    for (i, b) in args.branched.iter().enumerate() {
        let stem = b
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        models.push((format!("branched{}-{stem}", i + 1), b));
    }
    for (kind, path) in models {
        let kind = kind.as_str();
        let mut graph = import_for_training(path)?;
        if set_holder.is_none() {
            set_holder = Some(load_dataset(&args.recipe, &graph)?);
        }
        let set = set_holder.as_ref().expect("loaded");
        let program = training::lower(&graph).with_context(|| format!("cannot train {}", path.display()))?;
        if program.classes() != set.classes() {
            return Err(training::TrainError::ClassMismatch {
                model: program.classes(),
                dataset: set.classes(),
            })
            .with_context(|| format!("{}", path.display()));
        }
        if !args.keep_weights {
            training::reinitialise(&mut graph, &program, args.recipe.seed)?;
        }
        let cost = graph.total_cost();
        let out = args.out_dir.join(format!("{kind}.onnx"));
        let recipe = args.recipe.recipe(None)?;
        let (history, seconds) = train_graph(
            &mut graph,
            kind,
            set as &dyn Dataset,
            recipe,
            &args.recipe,
            None,
            &Outputs::beside(&out),
            None,
            None,
        )?;
        graph_ir::onnx::export_file(&graph, &out).with_context(|| format!("cannot write {}", out.display()))?;
        let last = history.last().context("no epoch was trained")?;
        top1.push(last.val_top1);
        rows.push(vec![
            format!("{kind} ({})", path.display()),
            si(cost.params),
            si(cost.macs),
            format!("{:.2}%", last.val_top1),
            format!("{:.2}%", last.val_top5),
            format!("{seconds:.1} s"),
        ]);
    }
    println!();
    print!("{}", table(&rows, 1));
    let val = set_holder.as_ref().map_or(0, |s| {
        training::data::split_of(s, args.recipe.val_fraction, args.recipe.seed, args.recipe.limit)
            .val
            .len()
    });
    for (b, t) in args.branched.iter().zip(&top1[1..]) {
        println!(
            "gap (branched - original) top-1 for {}: {:+.2} points",
            b.display(),
            t - top1[0]
        );
    }
    println!(
        "measured on the same {val}-image validation split (seed {})",
        args.recipe.seed
    );
    println!("models, metrics and curves in {}", args.out_dir.display());
    Ok(())
}
