//! The `LatencyModel` trait that branching and the runtime use, and its
//! analytic implementation over a device profile.

use crate::analytic::{kernel_ms, memory_ms};
use crate::features::{feature_names, features, work};
use crate::kernels::{FusionRule, OpClass, default_rules, detect};
use crate::profile::{DeviceProfile, ProfileError};
use graph_ir::{Graph, GraphError, NodeId};
use serde::Serialize;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PredictError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error("processor `{processor}`: {reason}")]
    Rules { processor: String, reason: String },
    #[error(transparent)]
    Regressors(Box<crate::fit::RegressorError>),
    #[error(transparent)]
    Calibration(Box<crate::calibration::CalibrationError>),
    /// A model that measures could not time a subgraph.
    #[error("timing `{graph}` on processor `{processor}`: {reason}")]
    Measure {
        graph: String,
        processor: String,
        reason: String,
    },
}

/// Where a kernel's figure comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Source {
    /// The roofline model over the device profile's figures.
    Analytic,
    /// A regressor fitted from measurements in this file.
    Regressor { file: String },
    /// A kernel whose `feature` lies beyond the range the regressor in
    /// `file` was fitted on: the larger of the regressor's figure (which
    /// stays at its range's edge) and the memory roofline's
    /// ([`crate::analytic::memory_ms`]: weights too large for any profiled
    /// kernel cost at least their bytes at the sustained bandwidth).
    Extrapolated { file: String, feature: String },
    /// A regressor in `file` fitted at the processor's rated precision,
    /// times the analytic model's ratio between `precision` (what the
    /// processor runs) and the rated one ([`crate::precision`]).
    Scaled {
        file: String,
        precision: crate::precision::Precision,
    },
}

/// The predicted latency of one kernel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelPrediction {
    /// Name of the kernel's first node.
    pub name: String,
    pub class: OpClass,
    /// Op types of the fused nodes, in order.
    pub ops: Vec<&'static str>,
    pub feature_names: &'static [&'static str],
    pub features: Vec<f64>,
    pub ms: f64,
    pub source: Source,
    /// The memory roofline of the kernel (ms), the least it can take.
    #[serde(skip)]
    pub floor_ms: f64,
}

/// The predicted latency of a (sub)graph on one processor.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Prediction {
    pub processor: String,
    /// Sum of the kernels plus the per-subgraph overhead.
    pub total_ms: f64,
    pub subgraph_overhead_ms: f64,
    pub kernels: Vec<KernelPrediction>,
    /// The in-model calibration applied to every kernel, if any (its file).
    pub calibration: Option<String>,
}

/// Predicts latencies of graphs and subgraphs on a device's processors.
pub trait LatencyModel {
    /// The device's name.
    fn device(&self) -> &str;
    /// The processors predictions can be asked for.
    fn processors(&self) -> Vec<String>;
    /// Latency of `nodes` (in topological order) run as one subgraph on `processor`.
    fn predict(&self, g: &Graph, nodes: &[NodeId], processor: &str) -> Result<Prediction, PredictError>;
    /// Milliseconds to hand `bytes` from one processor to another.
    fn comm_ms(&self, from: &str, to: &str, bytes: u64) -> Result<f64, PredictError>;

    /// Latency of the whole graph on `processor`.
    fn predict_graph(&self, g: &Graph, processor: &str) -> Result<Prediction, PredictError> {
        self.predict(g, &g.compute_order()?, processor)
    }

    /// How this model's figures come about, for plans and reports.
    fn provenance(&self) -> String {
        format!(
            "stretch latency model of device `{}` (predicted, not measured)",
            self.device()
        )
    }

    /// Says that each of `graphs` is about to be asked for whole on each of
    /// `processors`: a model that measures may time them together, so that
    /// a change of the machine's speed falls on all of them alike. The
    /// answers do not depend on whether this was called.
    fn prepare(&self, _graphs: &[&Graph], _processors: &[String]) -> Result<(), PredictError> {
        Ok(())
    }
}

/// The roofline model of [`crate::analytic`] over a [`DeviceProfile`].
pub struct AnalyticModel {
    pub profile: DeviceProfile,
}

impl AnalyticModel {
    pub fn new(profile: DeviceProfile) -> AnalyticModel {
        AnalyticModel { profile }
    }

    fn rules(&self, processor: &str) -> Result<Vec<FusionRule>, PredictError> {
        match &self.profile.processor(processor)?.fusion {
            None => Ok(default_rules()),
            Some(list) => list
                .iter()
                .map(|r| {
                    r.parse().map_err(|reason| PredictError::Rules {
                        processor: processor.to_string(),
                        reason,
                    })
                })
                .collect(),
        }
    }
}

impl LatencyModel for AnalyticModel {
    fn device(&self) -> &str {
        &self.profile.name
    }

    fn processors(&self) -> Vec<String> {
        self.profile.processors.keys().cloned().collect()
    }

    fn predict(&self, g: &Graph, nodes: &[NodeId], processor: &str) -> Result<Prediction, PredictError> {
        let p = self.profile.processor(processor)?;
        let rules = self.rules(processor)?;
        let kernels: Vec<KernelPrediction> = detect(g, nodes, &rules)
            .iter()
            .map(|k| {
                let w = work(g, k);
                KernelPrediction {
                    name: g.node(k.nodes[0]).name.clone(),
                    class: k.class,
                    ops: k.nodes.iter().map(|n| g.node(*n).op.name()).collect(),
                    feature_names: feature_names(k.class),
                    features: features(g, k),
                    ms: kernel_ms(p, k.class, &w),
                    source: Source::Analytic,
                    floor_ms: memory_ms(p, &w),
                }
            })
            .collect();
        let overhead = p.subgraph_overhead_us.as_ref().map_or(0.0, |f| f.value / 1e3);
        Ok(Prediction {
            processor: processor.to_string(),
            total_ms: overhead + kernels.iter().map(|k| k.ms).sum::<f64>(),
            subgraph_overhead_ms: overhead,
            kernels,
            calibration: None,
        })
    }

    fn comm_ms(&self, from: &str, to: &str, bytes: u64) -> Result<f64, PredictError> {
        Ok(self.profile.comm_ms(from, to, bytes)?)
    }
}
