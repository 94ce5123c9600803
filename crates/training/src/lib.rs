//! `training`: lowering a [`graph_ir::Graph`] to burn operations, datasets,
//! the training loop with checkpoints and distillation, and writing trained
//! weights back into the graph.
//!
//! [`lower`] turns a graph into a [`Program`] whose parameters ([`Params`]) are
//! the graph's constants; [`Program::forward`] runs it on any burn device, with
//! autodiff when the device has it. [`Session`] trains it on a [`data::Dataset`]
//! with a [`Recipe`], one epoch at a time, and can checkpoint and resume exactly.

mod backend;
pub mod batch_norm;
mod checkpoint;
pub mod comparison;
mod conv_grad;
pub mod data;
mod error;
mod fake_quant;
mod forward;
mod gradients;
mod head;
mod infer;
mod init;
mod interpret;
mod lower;
mod metrics;
mod optim;
mod params;
mod prefetch;
mod recipe;
mod resample;
pub mod result;
mod step;
#[cfg(feature = "tch")]
mod tch_tensor;
#[cfg(feature = "tch")]
mod torch_step;
mod train;

pub use backend::{Backend, Device, LibTorchTarget};
pub use checkpoint::{Checkpoint, Header as CheckpointHeader};
pub use conv_grad::{ConvGrad, ConvTap};
pub use error::TrainError;
pub use fake_quant::{ActivationQuant, QuantSpec, WeightQuant};
pub use forward::{BatchStats, Forward};
pub use gradients::{BatchGradients, batch_gradients};
pub use head::replace_head;
pub use infer::Inference;
pub use init::reinitialise;
pub use lower::{ParamSpec, Program, Role, lower};
pub use metrics::{PhaseTimes, Tally, cross_entropy};
pub use optim::{Optimizer, OptimizerState, Schedule};
pub use params::{Params, host_vec};
pub use recipe::{Distill, EpochMetrics, Recipe};
pub use result::{FileScore, QuantizedScores, TrainResult};
pub use step::Autograd;
pub use train::{Progress, Session};

/// Runs `f` with burn's CPU kernels limited to `threads` threads (0: all cores).
pub fn with_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    if threads == 0 {
        return f();
    }
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => pool.install(f),
        Err(_) => f(),
    }
}
