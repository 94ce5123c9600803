//! Training at each processor's precision (`--precision profile` of
//! `train` and `compare-accuracy`): calibrating a model on its training
//! split, the fake quantization that fine-tunes it, the quantized file it
//! becomes, and the accuracy of a file as written.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use graph_ir::Graph;
use quantize::{Method, QatPlan};
use training::data::{Dataset, Split, Transform};
use training::{ActivationQuant, QuantSpec, Tally, WeightQuant};

use crate::commands::quantize::{Prepared, calibrate, calibration_images, image_shape, prepare};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PrecisionMode {
    /// Everything in float32.
    Fp32,
    /// Each processor at the precision --device gives it.
    Profile,
}

/// Options of training at each processor's precision.
#[derive(clap::Args, Debug, Clone)]
pub struct PrecisionArgs {
    /// `profile`: each processor at the precision --device gives it
    /// (NN-Stretch §7.2 on snapdragon855: CPU and DSP int8, GPU fp16).
    #[arg(long, value_enum, default_value_t = PrecisionMode::Fp32)]
    pub precision: PrecisionMode,

    /// With --precision profile: the device profile whose processors' precisions apply.
    #[arg(long, value_name = "PROFILE.toml")]
    pub device: Option<PathBuf>,

    /// With --precision profile: the processor that runs nodes without a
    /// `processor` annotation (an original, unbranched model).
    #[arg(long)]
    pub processor: Option<String>,

    /// With --precision profile: images of the training split that
    /// activation ranges are calibrated on.
    #[arg(long, default_value_t = 128)]
    pub calibration_samples: usize,

    /// With --precision profile: how ranges are taken (minmax, percentile:P, entropy).
    #[arg(long, default_value = "minmax")]
    pub calibration_method: Method,

    /// With --precision profile: refuse when a node of an int8 processor has no int8 form.
    #[arg(long)]
    pub strict: bool,
}

impl PrecisionArgs {
    /// The device profile when precisions apply; an error when
    /// --precision profile lacks --device, or --device is given without it.
    pub fn device(&self) -> Result<Option<&Path>> {
        match (self.precision, &self.device) {
            (PrecisionMode::Profile, Some(d)) => Ok(Some(d)),
            (PrecisionMode::Profile, None) => {
                bail!("--precision profile needs --device PROFILE.toml: the processors' precisions come from it")
            }
            (PrecisionMode::Fp32, Some(d)) => bail!(
                "--device {} gives precisions only with --precision profile",
                d.display()
            ),
            (PrecisionMode::Fp32, None) => Ok(None),
        }
    }

    /// The calibration options (`--processor`, `--calibration-*`,
    /// `--strict`) as a sweep's `[qat] options`.
    pub fn calibration_options(&self) -> sweep::spec::Options {
        use toml::Value;
        let mut o = sweep::spec::Options::new();
        if let Some(p) = &self.processor {
            o.insert("processor".into(), Value::String(p.clone()));
        }
        o.insert(
            "calibration-samples".into(),
            Value::Integer(self.calibration_samples as i64),
        );
        o.insert(
            "calibration-method".into(),
            Value::String(self.calibration_method.to_string()),
        );
        o.insert("strict".into(), Value::Boolean(self.strict));
        o
    }
}

/// A model folded and calibrated for its device's precisions on the
/// training split a recipe trains on.
pub struct Calibrated {
    pub prepared: Prepared,
    pub ranges: Vec<(f32, f32)>,
    /// The recipe's split (its seed, validation share and limit).
    pub split: Split,
    /// The normalisation training applies (fitted on the training split).
    pub transform: Transform,
}

impl Calibrated {
    /// Folds `graph`'s batch norms and calibrates it for the device of
    /// `args` (`--precision profile --device`) on the first
    /// `--calibration-samples` images of `recipe`'s training split of `set`.
    pub fn new(
        graph: &Graph,
        label: &str,
        args: &PrecisionArgs,
        set: &dyn Dataset,
        recipe: &crate::recipe_args::RecipeArgs,
    ) -> Result<Calibrated> {
        let device = args
            .device()?
            .context("calibrating for a device needs --precision profile --device PROFILE.toml")?;
        let prepared = prepare(graph, label, device, args.processor.as_deref(), args.strict)?;
        let split = training::data::split_of(set, recipe.val_fraction, recipe.seed, recipe.limit);
        let shape = image_shape(&prepared.folded, label)?;
        let transform = Transform::fit(set, &split.train, shape, Default::default())?;
        let ranges = if prepared.acts.is_empty() {
            Vec::new()
        } else {
            let images = calibration_images(set, &split.train, args.calibration_samples, &transform)?;
            calibrate(&prepared.folded, &prepared.acts, args.calibration_method, &images)?
        };
        Ok(Calibrated {
            prepared,
            ranges,
            split,
            transform,
        })
    }

    /// What training of `graph` (the unfolded model this was made from,
    /// batch norms kept) rounds so that it sees what
    /// [`Calibrated::quantized`] writes.
    pub fn spec(&self, graph: &Graph) -> Result<QuantSpec> {
        let plan = quantize::qat_plan(&self.prepared.folded, &self.prepared.map, &self.ranges)?;
        let plan = quantize::unfold_plan(&plan, &self.prepared.folded, graph)?;
        Ok(spec(&plan))
    }

    /// `trained` (the model this was made from, with trained weights)
    /// folded and written with Q/DQ pairs at the calibrated ranges and its
    /// fp16 processors' nodes in fp16.
    pub fn quantized(&self, trained: &Graph) -> Result<Graph> {
        let (folded, _) = quantize::fold_bn::fold_batch_norms(trained)?;
        let (int8, _) = quantize::insert_qdq(&folded, &self.prepared.map, &self.ranges)?;
        Ok(quantize::to_fp16(&int8, &self.prepared.map)?.0)
    }
}

/// The fake quantization of `plan` in training's terms.
pub fn spec(plan: &QatPlan) -> QuantSpec {
    let mut activations: Vec<(graph_ir::Outlet, ActivationQuant)> = plan
        .int8_activations
        .iter()
        .map(|(o, p)| {
            (
                *o,
                ActivationQuant::Uint8 {
                    scale: p.scale,
                    zero: p.zero,
                },
            )
        })
        .collect();
    activations.extend(plan.fp16_activations.iter().map(|o| (*o, ActivationQuant::Fp16)));
    let mut weights: Vec<(graph_ir::NodeId, WeightQuant)> = plan
        .int8_weights
        .iter()
        .map(|(id, axis)| (*id, WeightQuant::Int8 { axis: *axis }))
        .collect();
    weights.extend(plan.fp16_weights.iter().map(|id| (*id, WeightQuant::Fp16)));
    QuantSpec { activations, weights }
}

/// Top-1 and top-5 of the model file `g` as written (run by tract, one
/// thread) on the images `indices` of `set`, normalised by `transform`.
pub fn evaluate_file(g: &Graph, set: &dyn Dataset, indices: &[usize], transform: &Transform) -> Result<Tally> {
    let out = g
        .outputs()
        .first()
        .map(|(_, o)| *o)
        .context("the model has no output")?;
    crate::commands::evaluate::tally(set, indices, transform, 1024, |images, n| {
        let mut scores = Vec::with_capacity(n * 16);
        scheduler_rt::probe::probe(g, &[out], images, |_, v| scores.extend_from_slice(v))?;
        Ok(scores)
    })
}

#[cfg(test)]
mod tests;
