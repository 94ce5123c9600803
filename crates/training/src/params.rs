//! Parameter values of a lowered graph: loading them from the graph, and
//! writing trained values (BatchNorm running statistics included) back.

use burn::tensor::{Device, Tensor, TensorData};
use graph_ir::ops::Op;
use graph_ir::{Graph, Tensor as IrTensor};

use crate::error::TrainError;
use crate::forward::BatchStats;
use crate::lower::{Program, Role};

/// One flat tensor per [`Program::params`] entry, on one device.
#[derive(Clone)]
pub struct Params {
    pub values: Vec<Tensor<1>>,
}

impl Params {
    /// Reads every constant of `graph` onto `device`; learnable ones track
    /// gradients when `device` is an autodiff device.
    pub fn from_graph(program: &Program, graph: &Graph, device: &Device) -> Result<Params, TrainError> {
        let host = program
            .params()
            .iter()
            .map(|spec| {
                let t = match &graph.node(spec.node).op {
                    Op::Const(t) => t,
                    _ => unreachable!("parameters are constants"),
                };
                t.to_f32_vec().ok_or_else(|| {
                    TrainError::Model(format!(
                        "weight '{}' has no data (a structure-only model: pass --random-weights SEED)",
                        spec.name
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Params::from_host(program, host, device))
    }

    /// Builds values from host vectors (one per parameter, in order).
    pub fn from_host(program: &Program, host: Vec<Vec<f32>>, device: &Device) -> Params {
        let autodiff = device.is_autodiff();
        let values = program
            .params()
            .iter()
            .zip(host)
            .map(|(spec, v)| {
                let len = v.len();
                let t = Tensor::<1>::from_data(TensorData::new(v, [len]), device);
                if autodiff && spec.role == Role::Learnable {
                    t.require_grad()
                } else {
                    t
                }
            })
            .collect();
        Params { values }
    }

    /// Copies every value to the host.
    pub fn to_host(&self) -> Vec<Vec<f32>> {
        self.values.iter().map(host_vec).collect()
    }

    /// The same values without autodiff tracking (for evaluation).
    pub fn detached(&self) -> Vec<Tensor<1>> {
        self.values
            .iter()
            .map(|t| if t.is_autodiff() { t.clone().inner() } else { t.clone() })
            .collect()
    }

    /// Folds one training step's batch statistics into the running statistics
    /// (ONNX BatchNormalization semantics; the running variance is unbiased).
    pub fn update_running(&mut self, stats: Vec<BatchStats>) {
        for s in stats {
            let keep = s.momentum;
            let unbias = s.count as f64 / (s.count.max(2) - 1) as f64;
            let mean = &mut self.values[s.mean_param];
            *mean = mean.clone().mul_scalar(keep) + s.mean.detach().mul_scalar(1.0 - keep);
            let var = &mut self.values[s.var_param];
            *var = var.clone().mul_scalar(keep) + s.var.detach().mul_scalar((1.0 - keep) * unbias);
        }
    }

    /// Writes the values into the graph's constants (same shapes).
    pub fn write_back(&self, program: &Program, graph: &mut Graph) -> Result<(), TrainError> {
        for (spec, v) in program.params().iter().zip(self.to_host()) {
            graph.replace_op(spec.node, Op::Const(IrTensor::from_f32(spec.shape.clone(), &v)))?;
        }
        Ok(())
    }
}

/// A flat tensor's values on the host.
pub fn host_vec(t: &Tensor<1>) -> Vec<f32> {
    t.to_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .expect("float32 values")
}
