//! The loss gradients of one training step on a given batch, as `stretch
//! train` takes them: for checking them against another framework's.

use graph_ir::Graph;

use crate::backend::Backend;
use crate::conv_grad::ConvGrad;
use crate::error::TrainError;
use crate::lower::{Role, lower};
use crate::params::{Params, host_vec};
use crate::step::{self, Batch, Laps};

/// One step's loss and the gradient of every learnable constant.
pub struct BatchGradients {
    /// Mean cross entropy of the batch.
    pub loss: f32,
    /// Initializer name and flat gradient (row-major, the constant's shape),
    /// in the order the lowering holds the parameters.
    pub grads: Vec<(String, Vec<usize>, Vec<f32>)>,
}

/// Runs the training-mode forward pass of `graph` (BatchNorm on batch
/// statistics) on `images` (`[n, c, h, w]` row-major, already normalised:
/// no transform is applied) with integer `labels`, and back-propagates the
/// mean cross entropy by burn's autodiff on `backend`, exactly as one step
/// of `stretch train` without weight decay, augmentation or distillation.
/// A learnable constant the loss does not reach gets a zero gradient.
pub fn batch_gradients(
    graph: &Graph,
    images: Vec<f32>,
    labels: &[i64],
    backend: Backend,
) -> Result<BatchGradients, TrainError> {
    let program = lower(graph)?;
    let [c, h, w] = program.input_shape();
    let (n, classes) = (labels.len(), program.classes());
    if n == 0 || images.len() != n * c * h * w {
        return Err(TrainError::Option {
            key: "batch",
            reason: format!(
                "{} label(s) and {} image values; the model takes images of {c}x{h}x{w}, so {n} images are {} values",
                n,
                images.len(),
                n * c * h * w
            ),
        });
    }
    let mut target = vec![0.0f32; n * classes];
    for (i, &l) in labels.iter().enumerate() {
        if l < 0 || l as usize >= classes {
            return Err(TrainError::Option {
                key: "batch",
                reason: format!("label {l} of image {i} is outside the model's {classes} classes"),
            });
        }
        target[i * classes + l as usize] = 1.0;
    }
    let device = backend.device().autodiff();
    let params = Params::from_graph(&program, graph, &device)?;
    let batch = Batch {
        n,
        images,
        target,
        soft: None,
    };
    let mut laps = Laps {
        clock: None,
        phases: None,
    };
    let out = step::burn(&program, &params.values, ConvGrad::Autodiff, &device, batch, &mut laps);
    if !out.loss.is_finite() {
        return Err(TrainError::Model(format!("the loss on this batch is {}", out.loss)));
    }
    let grads = program
        .params()
        .iter()
        .zip(out.grads)
        .filter(|(spec, _)| spec.role == Role::Learnable)
        .map(|(spec, g)| {
            let len = spec.shape.iter().product();
            let values = g.map(|g| host_vec(&g)).unwrap_or_else(|| vec![0.0; len]);
            (spec.name.clone(), spec.shape.clone(), values)
        })
        .collect();
    Ok(BatchGradients { loss: out.loss, grads })
}
