//! A bundle's `.tflite` files as the tflite engine compiles them
//! ([`engine::tflite::TfliteFile`]): each file with its boundaries from
//! the manifest.

use crate::RunError;
use bundle::{Bundle, LiteTensor, Manifest, TensorSpec};
use engine::tflite::{Boundary, LiteElem, OnnxElem, TfliteFile};
use std::sync::Arc;

/// Per subgraph of `b`, in manifest order, its `.tflite` file wrapped
/// with its boundaries.
pub(crate) fn envelopes(b: &Bundle) -> Result<Vec<Arc<[u8]>>, RunError> {
    let m: &Manifest = &b.manifest;
    m.subgraphs
        .iter()
        .map(|s| {
            let t = s.tflite_model.as_ref().ok_or_else(|| RunError::NoTflite {
                subgraph: s.name.clone(),
            })?;
            let bad = |reason: String| RunError::TfliteBoundary {
                subgraph: s.name.clone(),
                reason,
            };
            let sides = |onnx: &[TensorSpec], lite: &[LiteTensor]| {
                if onnx.len() != lite.len() {
                    return Err(bad(format!(
                        "{} ONNX boundary tensors, {} .tflite ones",
                        onnx.len(),
                        lite.len()
                    )));
                }
                onnx.iter()
                    .zip(lite)
                    .map(|(o, l)| boundary(o, l).map_err(bad))
                    .collect()
            };
            let f = TfliteFile {
                file: b.path(&t.model).display().to_string(),
                inputs: sides(&s.inputs, &t.inputs)?,
                outputs: sides(&s.outputs, &t.outputs)?,
                model: b.bytes(&t.model)?,
            };
            Ok(Arc::from(f.to_bytes()))
        })
        .collect()
}

/// The boundary of tensor `o` (ONNX form) held as `l` in the file.
fn boundary(o: &TensorSpec, l: &LiteTensor) -> Result<Boundary, String> {
    if o.name != l.name {
        return Err(format!(
            "the ONNX file's `{}` is the .tflite file's `{}`",
            o.name, l.name
        ));
    }
    let onnx = match o.dtype.as_str() {
        "f32" => OnnxElem::F32,
        "u8" => OnnxElem::U8,
        "i8" => OnnxElem::I8,
        other => {
            return Err(format!(
                "`{}` is {other}; the tflite engine converts f32, u8 and i8",
                o.name
            ));
        }
    };
    let lite = match (l.dtype.as_str(), &l.quantization) {
        ("f32", None) => LiteElem::F32,
        ("i8", Some(q)) => LiteElem::I8 {
            scale: q.scale,
            zero_point: i32::try_from(q.zero_point)
                .map_err(|_| format!("`{}`: zero point {}", l.name, q.zero_point))?,
        },
        (d, q) => {
            return Err(format!(
                "`{}` is {d} with quantization {q:?} in the .tflite file",
                l.name
            ));
        }
    };
    let nhwc = match l.layout.as_str() {
        "nhwc" => true,
        "onnx" => false,
        other => return Err(format!("`{}` has layout `{other}`", l.name)),
    };
    let b = Boundary {
        name: o.name.clone(),
        onnx,
        onnx_shape: o.shape.clone(),
        nhwc,
        lite,
    };
    if nhwc && o.shape.len() != 4 || b.lite_shape() != l.shape {
        return Err(format!(
            "`{}` is {:?} in ONNX form and {:?} ({}) in the .tflite file",
            o.name, o.shape, l.shape, l.layout
        ));
    }
    Ok(b)
}
