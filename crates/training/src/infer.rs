//! Inference with a lowered graph: scores for a batch of images.

use burn::tensor::{Device, Tensor, TensorData};
use graph_ir::Graph;

use crate::error::TrainError;
use crate::lower::{Program, lower};
use crate::params::Params;

/// A graph lowered once and loaded onto a device, for repeated inference.
pub struct Inference {
    pub program: Program,
    params: Vec<Tensor<1>>,
    device: Device,
}

impl Inference {
    /// Lowers `graph` and loads its weights onto `device`.
    pub fn new(graph: &Graph, device: &Device) -> Result<Inference, TrainError> {
        let program = lower(graph)?;
        let params = Params::from_graph(&program, graph, device)?.detached();
        Ok(Inference {
            program,
            params,
            device: device.clone(),
        })
    }

    /// Rounds what `spec` names in every later [`Inference::scores`]
    /// (see [`Program::set_fake_quant`]).
    pub fn set_fake_quant(&mut self, spec: &crate::QuantSpec) -> Result<(), TrainError> {
        self.program.set_fake_quant(spec)
    }

    /// Scores (`[n, classes]`, row-major) for `n` images laid out as
    /// `[n, C, H, W]` in `images`.
    pub fn scores(&self, images: &[f32], n: usize) -> Vec<f32> {
        let [c, h, w] = self.program.input_shape();
        assert_eq!(images.len(), n * c * h * w, "images must be [n, C, H, W]");
        let x = Tensor::<4>::from_data(TensorData::new(images.to_vec(), [n, c, h, w]), &self.device);
        let logits = self.program.forward(&self.params, x, false).logits;
        logits
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .expect("float32 scores")
    }
}
