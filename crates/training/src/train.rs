//! The training loop: mini-batch SGD/Adam over a lowered graph, validation
//! each epoch, distillation from a teacher, checkpoints and exact resumption.

use std::path::Path;
use std::time::Instant;

use burn::tensor::{Device, Tensor, TensorData};
use graph_ir::Graph;
use graph_ir::rng::SplitMix64;

use crate::backend::{Backend, LibTorchTarget};
use crate::checkpoint::{Checkpoint, Header, SCHEMA};
use crate::conv_grad::ConvGrad;
use crate::data::{Dataset, Split, Transform, split_of};
use crate::error::TrainError;
use crate::infer::Inference;
use crate::lower::{Program, Role, lower};
use crate::metrics::{PhaseTimes, Tally, cross_entropy, softmax};
use crate::optim::OptimizerState;
use crate::params::{Params, host_vec};
use crate::prefetch::{self, HostBatch};
use crate::recipe::{EpochMetrics, Recipe, check_recipe, recipe_difference};
use crate::step::{self, Autograd, Batch, Laps, wait_for};

/// Receives progress; every method has an empty default.
pub trait Progress {
    fn epoch_started(&mut self, _epoch: usize, _batches: usize) {}
    fn batch_done(&mut self, _loss: f64) {}
    fn epoch_done(&mut self, _metrics: &EpochMetrics) {}
}

impl Progress for () {}

/// A training run in progress.
pub struct Session<'a> {
    program: Program,
    params: Params,
    optimizer: OptimizerState,
    recipe: Recipe,
    transform: Transform,
    split: Split,
    data: &'a dyn Dataset,
    teacher: Option<Inference>,
    history: Vec<EpochMetrics>,
    train_device: Device,
    eval_device: Device,
    conv_grad: ConvGrad,
    backend: Backend,
    phases: Option<PhaseTimes>,
    autograd: Autograd,
}

const EPOCH_SALT: u64 = 0x4570_6f63_6853_6875;

impl<'a> Session<'a> {
    /// Lowers `graph`, loads its weights and prepares the data split and
    /// normalisation for `recipe`. `teacher` is required when the recipe
    /// distils; a crop padding must be smaller than the model's input side.
    pub fn new(
        graph: &Graph,
        data: &'a dyn Dataset,
        recipe: Recipe,
        backend: Backend,
        teacher: Option<&Graph>,
    ) -> Result<Session<'a>, TrainError> {
        check_recipe(&recipe)?;
        let program = lower(graph)?;
        let [_, h, w] = program.input_shape();
        let pad = recipe.augment.crop_padding;
        if pad > 0 && pad >= h.min(w) {
            return Err(TrainError::Option {
                key: "augment",
                reason: format!(
                    "crop:{pad} pads the model's {h}x{w} input by at least its side; use a padding below {}",
                    h.min(w)
                ),
            });
        }
        if program.classes() != data.classes() {
            return Err(TrainError::ClassMismatch {
                model: program.classes(),
                dataset: data.classes(),
            });
        }
        if data.len() < 2 {
            return Err(TrainError::Option {
                key: "dataset",
                reason: format!("{} has {} image(s); need at least 2", data.describe(), data.len()),
            });
        }
        let eval_device = backend.device();
        let train_device = eval_device.clone().autodiff();
        let params = Params::from_graph(&program, graph, &train_device)?;
        let split = split_of(data, recipe.val_fraction, recipe.seed, recipe.limit);
        let transform = Transform::fit(data, &split.train, program.input_shape(), recipe.augment)?;
        let teacher = match (recipe.distill, teacher) {
            (Some(_), Some(t)) => {
                let inf = Inference::new(t, &eval_device)?;
                if inf.program.input_shape() != program.input_shape() || inf.program.classes() != program.classes() {
                    return Err(TrainError::Option {
                        key: "teacher",
                        reason: format!(
                            "the teacher takes {:?} and outputs {} classes; the student takes {:?} and outputs {}",
                            inf.program.input_shape(),
                            inf.program.classes(),
                            program.input_shape(),
                            program.classes()
                        ),
                    });
                }
                Some(inf)
            }
            (Some(_), None) => {
                return Err(TrainError::Option {
                    key: "teacher",
                    reason: "distillation needs a teacher model".into(),
                });
            }
            (None, _) => None,
        };
        let mut optimizer = OptimizerState::new(recipe.optimizer, recipe.weight_decay, program.params().len());
        optimizer.one_vector = matches!(backend, Backend::Cuda(_) | Backend::LibTorch(LibTorchTarget::Cuda(_)));
        Ok(Session {
            program,
            params,
            optimizer,
            recipe,
            transform,
            split,
            data,
            teacher,
            history: Vec::new(),
            train_device,
            eval_device,
            conv_grad: ConvGrad::Autodiff,
            backend,
            phases: None,
            autograd: Autograd::Burn,
        })
    }

    /// Chooses how convolution weight gradients are taken (default:
    /// [`ConvGrad::Autodiff`]). All give the same gradients up to float
    /// rounding. [`ConvGrad::LibTorch`] needs a LibTorch backend.
    pub fn set_conv_grad(&mut self, conv_grad: ConvGrad) -> Result<(), TrainError> {
        if conv_grad == ConvGrad::LibTorch && !matches!(self.backend, Backend::LibTorch(_)) {
            return Err(TrainError::Option {
                key: "conv-grad",
                reason: format!(
                    "libtorch takes gradients with LibTorch's autograd and needs a tch backend, not {}",
                    self.backend
                ),
            });
        }
        self.conv_grad = conv_grad;
        Ok(())
    }

    /// With `on`, every training step waits for the device after each phase
    /// and [`Session::phase_times`] reports the last epoch's time per phase.
    /// The waits cost throughput, so leave it off for real runs.
    pub fn set_phase_times(&mut self, on: bool) {
        self.phases = on.then(PhaseTimes::default);
    }

    /// Trains and validates with the activations and weights of `spec`
    /// fake-quantized (quantization-aware training); burn's autograd only.
    pub fn set_fake_quant(&mut self, spec: &crate::QuantSpec) -> Result<(), TrainError> {
        if self.autograd != Autograd::Burn {
            return Err(TrainError::Option {
                key: "autograd",
                reason: format!(
                    "quantization-aware training needs burn's autograd, not {}",
                    self.autograd
                ),
            });
        }
        self.program.set_fake_quant(spec)
    }

    /// Per-phase time of the last epoch, when [`Session::set_phase_times`] is on.
    pub fn phase_times(&self) -> Option<&PhaseTimes> {
        self.phases.as_ref()
    }

    /// Chooses the automatic differentiation of training steps (default
    /// [`Autograd::Burn`]). [`Autograd::LibTorch`] needs a LibTorch backend,
    /// a build with the `tch` feature, a model whose every kernel has a
    /// LibTorch port, and convolution gradients left to it (`autodiff`).
    pub fn set_autograd(&mut self, autograd: Autograd) -> Result<(), TrainError> {
        if autograd == Autograd::LibTorch {
            let refuse = |reason: String| {
                Err(TrainError::Option {
                    key: "autograd",
                    reason,
                })
            };
            if !matches!(self.backend, Backend::LibTorch(_)) {
                return refuse(format!("libtorch needs a tch backend, not {}", self.backend));
            }
            if self.program.fake_quantized() {
                return refuse("quantization-aware training runs on burn's autograd only".to_string());
            }
            if self.conv_grad != ConvGrad::Autodiff {
                return refuse(format!(
                    "libtorch takes every gradient itself; --conv-grad {} applies to --autograd burn only",
                    self.conv_grad
                ));
            }
            #[cfg(feature = "tch")]
            crate::torch_step::supported(&self.program)?;
        }
        self.autograd = autograd;
        Ok(())
    }

    pub fn autograd(&self) -> Autograd {
        self.autograd
    }

    pub fn conv_grad(&self) -> ConvGrad {
        self.conv_grad
    }

    pub fn recipe(&self) -> &Recipe {
        &self.recipe
    }

    pub fn transform(&self) -> &Transform {
        &self.transform
    }

    pub fn split(&self) -> &Split {
        &self.split
    }

    pub fn history(&self) -> &[EpochMetrics] {
        &self.history
    }

    pub fn epochs_done(&self) -> usize {
        self.history.len()
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    fn batches_per_epoch(&self) -> usize {
        self.split.train.len().div_ceil(self.recipe.batch_size)
    }

    /// Trains one epoch, then validates. A non-finite loss stops the epoch
    /// with [`TrainError::NonFinite`] and leaves the weights as they were
    /// before the failing batch.
    pub fn run_epoch(&mut self, progress: &mut dyn Progress) -> Result<EpochMetrics, TrainError> {
        let epoch = self.history.len() + 1;
        let mut rng = SplitMix64::new(self.recipe.seed ^ EPOCH_SALT ^ (epoch as u64).wrapping_mul(0x9E37_79B9));
        let mut order = self.split.train.clone();
        rng.shuffle(&mut order);
        let batches = self.batches_per_epoch();
        let total_steps = batches * self.recipe.epochs;
        let classes = self.program.classes();
        progress.epoch_started(epoch, batches);
        let lr0 = self
            .recipe
            .schedule
            .at(self.recipe.lr, (epoch - 1) * batches, total_steps);
        let mut tally = Tally::default();
        let mut kd_sum = 0.0;
        if let Some(p) = self.phases.as_mut() {
            *p = PhaseTimes::default();
        }
        let start = Instant::now();
        let (transform, data, batch_size) = (&self.transform, self.data, self.recipe.batch_size);
        let mut step = BatchStep {
            program: &self.program,
            params: &mut self.params,
            optimizer: &mut self.optimizer,
            teacher: self.teacher.as_ref(),
            phases: self.phases.as_mut(),
            recipe: &self.recipe,
            autograd: self.autograd,
            conv_grad: self.conv_grad,
            train_device: &self.train_device,
        };
        std::thread::scope(|scope| -> Result<(), TrainError> {
            let prepared = prefetch::batches(scope, transform, data, &order, batch_size, classes, rng);
            for (b, host) in prepared.into_iter().enumerate() {
                let (n, labels) = (host.len(), host.labels.clone());
                let global_step = (epoch - 1) * batches + b;
                let Stepped {
                    loss: value,
                    kd,
                    scores,
                } = step
                    .run(host, global_step, total_steps)
                    .map_err(|value| TrainError::NonFinite {
                        value,
                        epoch,
                        batch: b + 1,
                        checkpoint: String::new(),
                    })?;
                if let Some(k) = kd {
                    kd_sum += k as f64 * n as f64;
                }
                tally.add(&scores, &labels, value as f64);
                progress.batch_done(value as f64);
            }
            Ok(())
        })?;
        let seconds = start.elapsed().as_secs_f64();
        let val = self.evaluate(&self.split.val.clone());
        let m = EpochMetrics {
            epoch,
            lr: lr0,
            train_loss: tally.mean_loss(),
            train_top1: tally.top1(),
            val_loss: val.mean_loss(),
            val_top1: val.top1(),
            val_top5: val.top5(),
            seconds,
            images_per_second: tally.count as f64 / seconds.max(1e-9),
            kd_loss: self.teacher.as_ref().map(|_| kd_sum / tally.count.max(1) as f64),
        };
        self.history.push(m.clone());
        progress.epoch_done(&m);
        Ok(m)
    }

    /// Loss and accuracy of the current weights (running BatchNorm statistics) on `indices`.
    pub fn evaluate(&self, indices: &[usize]) -> Tally {
        let params = self.params.detached();
        let [c, h, w] = self.program.input_shape();
        let mut tally = Tally::default();
        for idx in indices.chunks(256) {
            let n = idx.len();
            let images = self.transform.batch(self.data, idx, None);
            let x = Tensor::<4>::from_data(TensorData::new(images, [n, c, h, w]), &self.eval_device);
            let logits = self.program.forward(&params, x, false).logits;
            let scores = host_vec(&logits.reshape([n * self.program.classes()]));
            let labels: Vec<usize> = idx.iter().map(|&i| self.data.label(i)).collect();
            let loss = cross_entropy(&scores, &labels);
            tally.add(&scores, &labels, loss);
        }
        tally
    }

    /// Writes the trained weights and running statistics into `graph`.
    pub fn write_back(&self, graph: &mut Graph) -> Result<(), TrainError> {
        self.params.write_back(&self.program, graph)
    }

    fn header(&self) -> Header {
        let (first, second) = self.optimizer.to_host();
        Header {
            schema: SCHEMA.into(),
            params: self
                .program
                .params()
                .iter()
                .map(|p| (p.name.clone(), p.shape.clone()))
                .collect(),
            recipe: self.recipe.clone(),
            dataset: self.data.describe(),
            transform: self.transform.clone(),
            epochs_done: self.history.len(),
            optimizer_step: self.optimizer.step,
            history: self.history.clone(),
            buffers: first
                .iter()
                .zip(&second)
                .map(|(f, s)| (f.is_some(), s.is_some()))
                .collect(),
        }
    }

    /// Saves everything needed to continue this run (atomically replacing `path`).
    pub fn save_checkpoint(&self, path: &Path) -> Result<(), TrainError> {
        let (first, second) = self.optimizer.to_host();
        Checkpoint {
            header: self.header(),
            values: self.params.to_host(),
            first,
            second,
        }
        .save(path)
    }

    /// Continues from a checkpoint of the same model, data and recipe; a
    /// different recipe, dataset or model is refused naming what differs.
    pub fn resume(&mut self, path: &Path) -> Result<(), TrainError> {
        let ck = Checkpoint::load(path)?;
        let bad = |reason: String| TrainError::Checkpoint {
            path: path.to_path_buf(),
            reason,
        };
        let mine = self.header();
        if ck.header.params != mine.params {
            let first = mine
                .params
                .iter()
                .zip(&ck.header.params)
                .find(|(a, b)| a != b)
                .map(|(a, b)| format!("the model has {} {:?}, the checkpoint {} {:?}", a.0, a.1, b.0, b.1))
                .unwrap_or_else(|| {
                    format!(
                        "the model has {} parameters, the checkpoint {}",
                        mine.params.len(),
                        ck.header.params.len()
                    )
                });
            return Err(bad(format!("belongs to another model: {first}")));
        }
        if ck.header.recipe != self.recipe {
            return Err(bad(format!(
                "was made with another recipe: {}",
                recipe_difference(&ck.header.recipe, &self.recipe)
            )));
        }
        if ck.header.dataset != mine.dataset {
            return Err(bad(format!(
                "was trained on {}, not {}",
                ck.header.dataset, mine.dataset
            )));
        }
        if ck.header.epochs_done > self.recipe.epochs {
            return Err(bad(format!(
                "has {} epochs done, more than the recipe's {}",
                ck.header.epochs_done, self.recipe.epochs
            )));
        }
        self.params = Params::from_host(&self.program, ck.values, &self.train_device);
        self.optimizer.restore(ck.first, ck.second, &self.eval_device)?;
        self.optimizer.step = ck.header.optimizer_step;
        self.transform = ck.header.transform;
        self.history = ck.header.history;
        Ok(())
    }
}

/// What one training batch gives the epoch's figures.
struct Stepped {
    loss: f32,
    /// The distillation term alone, when distilling.
    kd: Option<f32>,
    /// Logits, `n × classes`, row-major.
    scores: Vec<f32>,
}

/// The parts of a [`Session`] one training batch reads or changes.
struct BatchStep<'s> {
    program: &'s Program,
    params: &'s mut Params,
    optimizer: &'s mut OptimizerState,
    teacher: Option<&'s Inference>,
    phases: Option<&'s mut PhaseTimes>,
    recipe: &'s Recipe,
    autograd: Autograd,
    conv_grad: ConvGrad,
    train_device: &'s Device,
}

impl BatchStep<'_> {
    /// One step on the prepared batch `host` at `global_step` of
    /// `total_steps`: the weights and running statistics updated, and the
    /// loss, distillation term and scores returned; `Err` with the loss
    /// when it is not finite (nothing updated).
    fn run(&mut self, host: HostBatch, global_step: usize, total_steps: usize) -> Result<Stepped, f32> {
        let classes = self.program.classes();
        let mut laps = Laps {
            clock: self.phases.is_some().then(Instant::now),
            phases: self.phases.as_deref_mut(),
        };
        let n = host.len();
        let (images, onehot) = (host.images, host.onehot);
        let soft = self.teacher.map(|t| {
            let d = self.recipe.distill.expect("teacher implies distillation");
            (softmax(&t.scores(&images, n), classes, d.temperature), d)
        });
        laps.lap(|p| &mut p.prepare);
        let batch = Batch {
            n,
            images,
            target: onehot,
            soft,
        };
        let out = match self.autograd {
            Autograd::Burn => step::burn(
                self.program,
                &self.params.values,
                self.conv_grad,
                self.train_device,
                batch,
                &mut laps,
            ),
            #[cfg(feature = "tch")]
            Autograd::LibTorch => crate::torch_step::step(self.program, &self.params.values, batch, &mut laps),
            #[cfg(not(feature = "tch"))]
            Autograd::LibTorch => unreachable!("set_autograd refuses libtorch without the tch feature"),
        };
        let value = out.loss;
        if !value.is_finite() {
            return Err(value);
        }
        let (scores, mut grads) = (out.scores, out.grads);
        let lr = self.recipe.schedule.at(self.recipe.lr, global_step, total_steps);
        let mut items = Vec::new();
        for (i, spec) in self.program.params().iter().enumerate() {
            if spec.role != Role::Learnable {
                continue;
            }
            if let Some(g) = grads[i].take() {
                items.push((i, self.params.values[i].clone().inner(), g));
            }
        }
        for (i, updated) in self.optimizer.update_all(items, lr) {
            self.params.values[i] = Tensor::from_inner(updated).require_grad();
        }
        self.optimizer.step += 1;
        self.params.update_running(out.stats);
        if laps.clock.is_some() {
            if let Some(p) = self.params.values.first() {
                wait_for(p);
            }
            laps.lap(|p| &mut p.update);
            if let Some(p) = laps.phases.as_deref_mut() {
                p.steps += 1;
            }
        }
        Ok(Stepped {
            loss: value,
            kd: out.kd,
            scores,
        })
    }
}
