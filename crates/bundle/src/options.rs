//! What an export is asked for besides the model: the device, where
//! unannotated nodes run, reference inputs, input normalisation and
//! which formats to add (onnxruntime's mobile format, LiteRT).

use crate::error::BundleError;
use crate::manifest::Normalisation;
use graph_ir::Graph;
use predictor::DeviceProfile;
use predictor::profile::ProcessorKind;

/// What [`crate::export`] needs besides the model.
pub struct Options<'a> {
    /// The device whose processors the model's `processor` annotations name.
    pub device: &'a DeviceProfile,
    /// Where unannotated nodes run.
    pub default_processor: &'a str,
    /// Reference inputs (one per model input, f32); `None`: uniform in
    /// `[-1, 1)` from a fixed seed.
    pub inputs: Option<Vec<graph_ir::Tensor>>,
    pub normalisation: Option<Normalisation>,
    /// Also convert every subgraph file to onnxruntime's `.ort` format when
    /// the project's Python has onnxruntime ([`crate::ort_format::python`]);
    /// without it the bundle has ONNX files only.
    pub ort: bool,
    /// Also write every subgraph as a LiteRT (`.tflite`) file.
    pub tflite: bool,
}

/// Where a device runs what no annotation places: its first CPU, else its
/// first processor; `None` for a device without processors.
pub fn default_processor(device: &DeviceProfile) -> Option<String> {
    device
        .processors
        .iter()
        .find(|(_, p)| p.kind == ProcessorKind::Cpu)
        .or_else(|| device.processors.iter().next())
        .map(|(n, _)| n.clone())
}

/// `mean` and `std` (named in errors as coming `from` somewhere) as the
/// normalisation of `g`'s first input: one of each per channel of that
/// input, every value finite, every std positive.
pub fn normalisation(g: &Graph, mean: Vec<f32>, std: Vec<f32>, from: &str) -> Result<Normalisation, BundleError> {
    let channels = g
        .inputs()
        .first()
        .and_then(|id| g.node(*id).outputs[0].shape.get(1).copied())
        .ok_or(BundleError::NoChannels)?;
    if mean.len() != channels || std.len() != channels {
        return Err(BundleError::NormalisationLength {
            from: from.into(),
            mean: mean.len(),
            std: std.len(),
            channels,
        });
    }
    if let Some(bad) = std
        .iter()
        .chain(&mean)
        .find(|v| !v.is_finite())
        .or(std.iter().find(|v| **v <= 0.0))
    {
        return Err(BundleError::NormalisationValue {
            from: from.into(),
            value: *bad,
        });
    }
    Ok(Normalisation { mean, std })
}
