//! Training options shared by `stretch train` and `stretch compare-accuracy`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use graph_ir::Graph;
use graph_ir::onnx::{ImportOptions, import_file};
use training::data::{self, Augment, Dataset, DatasetSpec, ImageSet};
use training::{Autograd, Backend, ConvGrad, Distill, Optimizer, Recipe, Schedule};

/// `--lr` when not given.
pub const DEFAULT_LR: f64 = 0.05;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OptimizerArg {
    Sgd,
    Adam,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ScheduleArg {
    /// Half a cosine period from --lr down to 0 over the run.
    Cosine,
    Constant,
}

#[derive(Args, Debug, Clone)]
pub struct RecipeArgs {
    /// Dataset: `digits` (bundled scikit-learn digits, 1797 8x8 grey images),
    /// `digits:FILE.csv.gz`, `cifar10:DIR|FILE.bin` (CIFAR-10 binary batches),
    /// `mnist:DIR` (IDX files, optionally .gz) or `folder:DIR` (one
    /// sub-directory of PNG/JPEG images per class). Images are resized
    /// (bilinear) to the model's input and normalised per channel with the
    /// training split's mean and standard deviation.
    #[arg(long, value_name = "KIND[:PATH]")]
    pub dataset: DatasetSpec,

    #[arg(long, default_value_t = 30)]
    pub epochs: usize,

    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,

    /// Peak learning rate.
    #[arg(long, default_value_t = DEFAULT_LR)]
    pub lr: f64,

    #[arg(long, value_enum, default_value_t = OptimizerArg::Sgd)]
    pub optimizer: OptimizerArg,

    /// SGD momentum.
    #[arg(long, default_value_t = 0.9)]
    pub momentum: f64,

    /// L2 weight decay on every learned parameter.
    #[arg(long, default_value_t = 5e-4)]
    pub weight_decay: f64,

    #[arg(long, value_enum, default_value_t = ScheduleArg::Cosine)]
    pub schedule: ScheduleArg,

    /// Seed of the train/validation split, the batch order and augmentation.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Share of the dataset held out for validation (a seeded random split)
    /// when it has no test split of its own; MNIST, Fashion-MNIST (t10k
    /// files) and CIFAR-10 (test_batch.bin) are validated on their test
    /// split instead.
    #[arg(long, default_value_t = 0.2)]
    pub val_fraction: f64,

    /// Train on the first N images only (of the training files when the
    /// dataset has a test split), for quick runs; validation is unchanged.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,

    /// Augmentation: `none`, or any of `crop:PAD` (random crop after padding
    /// PAD pixels) and `flip` (random horizontal flip), comma-separated.
    #[arg(long, default_value = "none")]
    pub augment: String,

    /// Threads for burn's CPU kernels (0: all cores). One thread makes runs
    /// bit-identical.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,

    /// Backend: `flex` (CPU), `cuda[:INDEX]` (builds with `--features cuda`) or
    /// `tch[:cpu|:cuda[:INDEX]]` (LibTorch; builds with `--features tch`, see
    /// scripts/build_libtorch.sh).
    #[arg(long, default_value = "flex")]
    pub backend: Backend,

    /// How convolution weight gradients are taken: `autodiff` (burn's rule,
    /// a convolution by the output gradient), `im2col` (`dy · im2col(x)ᵀ`)
    /// or `libtorch` (LibTorch's own autograd, cuDNN on a GPU; tch backends
    /// only). Same gradients up to float rounding; the choices are there to
    /// time against each other (scripts/benchmarks/gpu_train_baseline.sh).
    #[arg(long, value_name = "autodiff|im2col|libtorch", default_value = "autodiff")]
    pub conv_grad: ConvGrad,

    /// Automatic differentiation of training steps: `burn` (burn's autodiff,
    /// every backend) or `libtorch` (LibTorch's autograd over a LibTorch
    /// port of the model, tch backends only: on a GPU the kernels PyTorch
    /// runs). Same gradients up to float rounding. Default: `libtorch` on
    /// tch backends when `--conv-grad` is `autodiff` and every kernel of the
    /// model has a LibTorch port (the log line names the autograd used),
    /// `burn` otherwise.
    #[arg(long, value_name = "burn|libtorch")]
    pub autograd: Option<Autograd>,

    /// Wait for the device after each phase of every training step and print
    /// each epoch's time per step in batch preparation, forward, backward
    /// and update. The waits slow training (a GPU no longer overlaps the
    /// host), so use it to find where time goes, not for timed runs.
    #[arg(long)]
    pub phase_times: bool,
}

impl RecipeArgs {
    /// The autograd to try when `--autograd` is not given, `None` for burn's:
    /// LibTorch's own on LibTorch backends while convolution gradients are
    /// left to autodiff (a model LibTorch's port refuses falls back to burn's).
    pub fn preferred_autograd(&self) -> Option<Autograd> {
        (matches!(self.backend, Backend::LibTorch(_)) && self.conv_grad == ConvGrad::Autodiff)
            .then_some(Autograd::LibTorch)
    }

    pub fn recipe(&self, distill: Option<Distill>) -> Result<Recipe> {
        Ok(Recipe {
            epochs: self.epochs,
            batch_size: self.batch_size,
            lr: self.lr,
            optimizer: match self.optimizer {
                OptimizerArg::Sgd => Optimizer::Sgd {
                    momentum: self.momentum,
                },
                OptimizerArg::Adam => Optimizer::Adam {
                    beta1: 0.9,
                    beta2: 0.999,
                    epsilon: 1e-8,
                },
            },
            weight_decay: self.weight_decay,
            schedule: match self.schedule {
                ScheduleArg::Cosine => Schedule::Cosine,
                ScheduleArg::Constant => Schedule::Constant,
            },
            seed: self.seed,
            val_fraction: self.val_fraction,
            limit: self.limit,
            augment: parse_augment(&self.augment)?,
            distill,
        })
    }

    /// Every option but `--dataset` and `--seed` as a sweep's `[recipe]`
    /// (`stretch train` parses them back to these values).
    pub fn options(&self) -> sweep::spec::Options {
        use toml::Value;
        let name = |v: Option<clap::builder::PossibleValue>| v.map_or(String::new(), |v| v.get_name().to_string());
        let mut o = sweep::spec::Options::new();
        let mut set = |k: &str, v: Value| {
            o.insert(k.to_string(), v);
        };
        set("epochs", Value::Integer(self.epochs as i64));
        set("batch-size", Value::Integer(self.batch_size as i64));
        set("lr", Value::Float(self.lr));
        set("optimizer", Value::String(name(self.optimizer.to_possible_value())));
        set("momentum", Value::Float(self.momentum));
        set("weight-decay", Value::Float(self.weight_decay));
        set("schedule", Value::String(name(self.schedule.to_possible_value())));
        set("val-fraction", Value::Float(self.val_fraction));
        if let Some(l) = self.limit {
            set("limit", Value::Integer(l as i64));
        }
        set("augment", Value::String(self.augment.clone()));
        set("threads", Value::Integer(self.threads as i64));
        set("backend", Value::String(self.backend.spec()));
        set("conv-grad", Value::String(self.conv_grad.to_string()));
        if let Some(a) = self.autograd {
            set("autograd", Value::String(a.to_string()));
        }
        set("phase-times", Value::Boolean(self.phase_times));
        o
    }
}

fn parse_augment(s: &str) -> Result<Augment> {
    let mut a = Augment::default();
    if s == "none" {
        return Ok(a);
    }
    for part in s.split(',') {
        match part.split_once(':') {
            _ if part == "flip" => a.flip = true,
            Some(("crop", pad)) => {
                a.crop_padding = pad
                    .parse()
                    .map_err(|_| anyhow::anyhow!("--augment: crop padding '{pad}' is not a number"))?
            }
            _ => bail!("--augment: unknown item '{part}' (expected none, crop:PAD, flip)"),
        }
    }
    Ok(a)
}

/// `path` with its extension replaced by `ext` (`trained.onnx` → `trained.ckpt`).
pub fn beside(path: &std::path::Path, suffix: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!("{stem}{suffix}"))
}

/// Loads the dataset for a model whose input is `[C, H, W]`.
pub fn load_dataset(args: &RecipeArgs, graph: &Graph) -> Result<ImageSet> {
    let input = graph
        .inputs()
        .first()
        .map(|&id| graph.node(id).outputs[0].shape.clone())
        .unwrap_or_default();
    let size = if input.len() == 4 {
        [input[2], input[3]]
    } else {
        [32, 32]
    };
    let set = data::load(&args.dataset, size).with_context(|| format!("cannot load dataset {}", args.dataset))?;
    println!(
        "dataset {}: {} images {}x{}x{}, {} classes",
        set.describe(),
        set.len(),
        set.image_shape()[0],
        set.image_shape()[1],
        set.image_shape()[2],
        set.classes()
    );
    Ok(set)
}

/// Imports a model for training (weights must be present or --random-weights given).
pub fn import_for_training(path: &Path) -> Result<Graph> {
    import_file(path, &ImportOptions::default()).with_context(|| format!("cannot import {}", path.display()))
}

/// The distillation settings of `--kd-alpha` and `--kd-temperature`: `None`
/// without a teacher, where giving either is an error naming `teacher_flag`
/// (the option that adds one), as is a value out of range.
pub fn distill(
    teacher: bool,
    teacher_flag: &str,
    alpha: Option<f64>,
    temperature: Option<f64>,
) -> Result<Option<Distill>> {
    if let Some(a) = alpha
        && !(0.0..=1.0).contains(&a)
    {
        bail!("--kd-alpha {a}: the teacher's weight must be in [0, 1]");
    }
    if let Some(t) = temperature
        && !(t > 0.0 && t.is_finite())
    {
        bail!("--kd-temperature {t}: the temperature must be a positive number");
    }
    if !teacher {
        if let Some(a) = alpha {
            bail!("--kd-alpha {a} weights a teacher's soft labels; it needs {teacher_flag}");
        }
        if let Some(t) = temperature {
            bail!("--kd-temperature {t} softens a teacher's labels; it needs {teacher_flag}");
        }
        return Ok(None);
    }
    Ok(Some(Distill {
        alpha: alpha.unwrap_or(0.5),
        temperature: temperature.unwrap_or(4.0),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use training::LibTorchTarget;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        recipe: RecipeArgs,
    }

    #[test]
    fn libtorch_backends_prefer_libtorch_autograd_unless_conv_grad_is_chosen() {
        let mut args = Cli::parse_from(["t", "--dataset", "digits"]).recipe;
        assert_eq!(args.autograd, None);
        assert_eq!(args.preferred_autograd(), None, "flex keeps burn's autograd");
        for target in [LibTorchTarget::Cpu, LibTorchTarget::Cuda(0)] {
            args.backend = Backend::LibTorch(target);
            assert_eq!(args.preferred_autograd(), Some(Autograd::LibTorch));
            args.conv_grad = ConvGrad::Im2col;
            assert_eq!(
                args.preferred_autograd(),
                None,
                "--conv-grad applies to burn's autograd only"
            );
            args.conv_grad = ConvGrad::Autodiff;
        }
        args.backend = Backend::Cuda(0);
        assert_eq!(args.preferred_autograd(), None);
    }
}
