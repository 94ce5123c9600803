//! A bundle's LiteRT files: each subgraph lowered by [`litert::lower`],
//! its boundary tensors described for the manifest, and the LiteRT
//! delegate each processor kind maps to on a phone.

use crate::error::BundleError;
use crate::manifest::{FileRef, LiteQuant, LiteRtDelegate, LiteTensor, TfliteModel};
use graph_ir::Graph;
use predictor::profile::ProcessorKind;
use std::path::Path;

fn tensor(b: &litert::Boundary) -> LiteTensor {
    LiteTensor {
        name: b.name.clone(),
        dtype: b.elem.name().to_string(),
        shape: b.shape.clone(),
        layout: if b.nhwc { "nhwc" } else { "onnx" }.to_string(),
        quantization: b.quant.map(|(scale, zero_point)| LiteQuant { scale, zero_point }),
    }
}

/// Writes subgraph `sub` (named `name`) as `dir/file`; its manifest entry.
pub fn write(sub: &Graph, name: &str, dir: &Path, file: &str) -> Result<TfliteModel, BundleError> {
    let m = litert::lower(sub, name)?;
    let path = dir.join(file);
    std::fs::write(&path, &m.bytes).map_err(|e| BundleError::io("write", &path, e))?;
    Ok(TfliteModel {
        model: FileRef::of_bytes(file, &m.bytes),
        inputs: m.inputs.iter().map(tensor).collect(),
        outputs: m.outputs.iter().map(tensor).collect(),
        notes: m.notes,
    })
}

/// The LiteRT delegate and options a phone runs a processor of `kind`
/// computing at `precision` with. A float16 GPU gets float16 weights in
/// its files and is allowed float16 arithmetic (the profile measured it
/// so); a float32 GPU asks for full precision. NPUs and DSPs run through
/// Qualcomm's QNN delegate on its HTP back end, CPU cores through
/// XNNPACK on one thread each.
pub fn delegate(kind: ProcessorKind, precision: &str) -> LiteRtDelegate {
    let o = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let (delegate, options) = match kind {
        ProcessorKind::Cpu => ("xnnpack", o(&[("num_threads", "1")])),
        ProcessorKind::Gpu => {
            let priority = if precision == "fp32" {
                "MAX_PRECISION"
            } else {
                "MIN_LATENCY"
            };
            let lossy = if precision == "fp32" { "false" } else { "true" };
            let mut v: Vec<(String, String)> = o(&[
                ("is_precision_loss_allowed", lossy),
                ("inference_preference", "SUSTAINED_SPEED"),
                ("inference_priority1", priority),
            ]);
            if precision == "int8" {
                v.push(("experimental_flags".into(), "ENABLE_QUANT".into()));
            }
            ("gpu", v)
        }
        ProcessorKind::Dsp | ProcessorKind::Npu => {
            let p = if precision == "int8" { "quantized" } else { "fp16" };
            ("qnn", o(&[("backend_type", "htp"), ("htp_precision", p)]))
        }
    };
    LiteRtDelegate {
        delegate: delegate.to_string(),
        options,
    }
}
