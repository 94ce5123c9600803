//! LiteRT (`.tflite`) files on tract (read by [`crate::tflite_load`]), for
//! runners that keep their values as the ONNX files hold them.
//!
//! A `.tflite` file of a bundle holds rank-4 activations NHWC where the
//! ONNX files hold them NCHW, and int8 where the ONNX files hand uint8 (or
//! float32) over. The bytes [`TfliteEngine`] compiles are a
//! [`TfliteFile`]: the file plus, per input and output, how the ONNX form
//! and the file's form of the tensor differ ([`Boundary`]); the compiled
//! model takes and returns values in ONNX form and converts at its
//! boundary.

use crate::engine::{Compiled, Engine, Value};
use crate::error::EngineError;
use crate::registry::{Builds, EngineEntry};
use crate::tract_plan::{TRACT_VERSION, TractCompiled, executor};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tract_core::internal::tract_linalg::multithread::Executor;
use tract_core::prelude::*;

const TFLITE: &str = "tflite";

/// The first bytes of a [`TfliteFile`].
pub const MAGIC: &[u8; 8] = b"STRTFL1\n";

/// The tflite engine's registry entry: named `tflite`, not among
/// [`crate::EngineRegistry::builtin`] (its input is a [`TfliteFile`], not
/// ONNX); a runner of `.tflite` files adds it with
/// [`crate::EngineRegistry::with`].
pub const TFLITE_ENTRY: EngineEntry = EngineEntry {
    name: TFLITE,
    aliases: &[],
    summary: "LiteRT (.tflite) files of a bundle on tract, converted to and from ONNX form at their boundary",
    builds: Builds::Named,
    make: |c| Ok(Box::new(TfliteEngine::new(c.threads)?)),
};

/// An element type of a tensor in ONNX form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnnxElem {
    F32,
    /// uint8 on the ONNX side of an int8 file tensor: `q_i8 = q_u8 - 128`
    /// (the file's zero point is the ONNX one minus 128, same scale).
    U8,
    I8,
}

/// An element type of a tensor in a `.tflite` file.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum LiteElem {
    F32,
    /// Per-tensor int8: the real value is `scale · (q − zero_point)`.
    I8 {
        scale: f32,
        zero_point: i32,
    },
}

/// A tensor at a file's boundary: its ONNX form and the file's form.
/// Valid pairs: f32/f32, f32/i8 (quantized round half to even, clamped),
/// u8/i8 (shifted by 128), i8/i8.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Boundary {
    /// The bundle's name for the tensor, for messages.
    pub name: String,
    pub onnx: OnnxElem,
    /// The shape in ONNX form.
    pub onnx_shape: Vec<usize>,
    /// `true`: a rank-4 NCHW tensor the file holds NHWC.
    pub nhwc: bool,
    pub lite: LiteElem,
}

impl Boundary {
    /// The shape in the file.
    pub fn lite_shape(&self) -> Vec<usize> {
        match self.onnx_shape[..] {
            [n, c, h, w] if self.nhwc => vec![n, h, w, c],
            _ => self.onnx_shape.clone(),
        }
    }

    fn check(&self) -> Result<(), String> {
        if self.nhwc && self.onnx_shape.len() != 4 {
            return Err(format!(
                "`{}` is NHWC in the file but has rank {} in ONNX form",
                self.name,
                self.onnx_shape.len()
            ));
        }
        match (self.onnx, self.lite) {
            (OnnxElem::F32, _) | (OnnxElem::U8 | OnnxElem::I8, LiteElem::I8 { .. }) => Ok(()),
            (onnx, lite) => Err(format!(
                "`{}` is {onnx:?} in ONNX form and {lite:?} in the file",
                self.name
            )),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    file: String,
    inputs: Vec<Boundary>,
    outputs: Vec<Boundary>,
}

/// What [`TfliteEngine`] compiles: a `.tflite` file and its boundaries, in
/// the file's input and output orders. As bytes ([`TfliteFile::to_bytes`]):
/// [`MAGIC`], the header's length (u32, little endian), the header
/// (JSON: `file`, `inputs`, `outputs`), then the file.
#[derive(Clone, Debug)]
pub struct TfliteFile {
    /// The file's name, for messages.
    pub file: String,
    pub inputs: Vec<Boundary>,
    pub outputs: Vec<Boundary>,
    pub model: Arc<[u8]>,
}

impl TfliteFile {
    /// The envelope's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let header = serde_json::to_vec(&Header {
            file: self.file.clone(),
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
        })
        .expect("a header of strings and numbers serialises");
        let mut out = Vec::with_capacity(MAGIC.len() + 4 + header.len() + self.model.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&self.model);
        out
    }

    /// Reads [`TfliteFile::to_bytes`]'s form back; anything else (an ONNX
    /// file among them) is a load error.
    pub fn parse(bytes: &[u8]) -> Result<TfliteFile, EngineError> {
        let bad = |reason: &str| load(format!("not a stretch tflite envelope: {reason}"));
        let rest = bytes.strip_prefix(MAGIC).ok_or_else(|| bad("no magic"))?;
        let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(|| bad("truncated"))?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err(bad("truncated header"));
        }
        let h: Header = serde_json::from_slice(&rest[..len]).map_err(|e| bad(&e.to_string()))?;
        Ok(TfliteFile {
            file: h.file,
            inputs: h.inputs,
            outputs: h.outputs,
            model: Arc::from(&rest[len..]),
        })
    }
}

/// The tflite engine: [`crate::tflite_load`] reads the file, tract
/// optimises and runs it; with `threads > 1` matrix products split over a private pool.
#[derive(Debug)]
pub struct TfliteEngine {
    threads: usize,
    executor: Option<Executor>,
}

impl TfliteEngine {
    /// An engine running each model on `threads` threads; 0 is refused.
    pub fn new(threads: usize) -> Result<TfliteEngine, EngineError> {
        if threads == 0 {
            return Err(EngineError::ZeroThreads { engine: TFLITE });
        }
        Ok(TfliteEngine {
            threads,
            executor: executor(threads, "stretch-tflite"),
        })
    }

    fn compile_with(&self, bytes: &[u8], executor: Option<Executor>) -> Result<Box<dyn Compiled>, EngineError> {
        let f = TfliteFile::parse(bytes)?;
        for b in f.inputs.iter().chain(&f.outputs) {
            b.check().map_err(|e| load(format!("{}: {e}", f.file)))?;
        }
        let model = crate::tflite_load::typed_model(&f.model).map_err(|e| load(format!("{}: {e}", f.file)))?;
        let input_types = facts(&f, &model)?;
        let plan = guarded(&f.file, || {
            let options = RunOptions {
                executor,
                ..RunOptions::default()
            };
            model.into_optimized()?.into_runnable_with_options(&options)
        })?;
        Ok(Box::new(TfliteCompiled {
            inner: TractCompiled::new(TFLITE, plan),
            input_types,
            file: f,
        }))
    }
}

/// Runs `f` (tract optimising the model of `file`), its error or panic
/// as one line naming the file.
fn guarded<T>(file: &str, f: impl FnOnce() -> TractResult<T>) -> Result<T, EngineError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(load(format!(
            "{file}: {}",
            e.root_cause().to_string().lines().next().unwrap_or("").trim()
        ))),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err(load(format!("{file}: tract panicked: {what}")))
        }
    }
}

/// The datum types of the model's inputs, checked against the file's
/// boundaries (count, shape, element type).
fn facts(f: &TfliteFile, model: &TypedModel) -> Result<Vec<DatumType>, EngineError> {
    let (ins, outs) = (model.inputs.len(), model.outputs.len());
    if ins != f.inputs.len() || outs != f.outputs.len() {
        return Err(load(format!(
            "{}: has {ins} inputs and {outs} outputs; the bundle lists {} and {}",
            f.file,
            f.inputs.len(),
            f.outputs.len()
        )));
    }
    let mut types = Vec::new();
    let outlets = model
        .inputs
        .iter()
        .zip(&f.inputs)
        .chain(model.outputs.iter().zip(&f.outputs));
    for (k, (outlet, b)) in outlets.enumerate() {
        let fact = model
            .outlet_fact(*outlet)
            .map_err(|e| load(format!("{}: {e}", f.file)))?;
        let dt = fact.datum_type;
        let shape = fact.shape.as_concrete().map(|s| s.to_vec());
        let elem_ok = match b.lite {
            LiteElem::F32 => dt == DatumType::F32,
            LiteElem::I8 { scale, zero_point } => match dt {
                DatumType::I8 => true,
                DatumType::QI8(q) => q.zp_scale() == (zero_point, scale),
                _ => false,
            },
        };
        if !elem_ok || shape.as_deref() != Some(&b.lite_shape()[..]) {
            return Err(load(format!(
                "{}: `{}` is {fact:?} in the file; the bundle says {:?} {:?}",
                f.file,
                b.name,
                b.lite,
                b.lite_shape()
            )));
        }
        if k < ins {
            types.push(dt);
        }
    }
    Ok(types)
}

fn load(reason: String) -> EngineError {
    EngineError::Load { engine: TFLITE, reason }
}

impl Engine for TfliteEngine {
    fn name(&self) -> &'static str {
        TFLITE
    }

    fn version(&self) -> &'static str {
        TRACT_VERSION
    }

    fn threads(&self) -> usize {
        self.threads
    }

    /// Compiles a [`TfliteFile`]'s bytes.
    fn compile(&self, bytes: &[u8]) -> Result<Box<dyn Compiled>, EngineError> {
        self.compile_with(bytes, self.executor.clone())
    }

    fn compile_threads(&self, bytes: &[u8], threads: usize) -> Result<Box<dyn Compiled>, EngineError> {
        if threads == self.threads {
            return self.compile(bytes);
        }
        self.compile_with(bytes, executor(threads, "stretch-tflite-alone"))
    }
}

/// A tract plan of a `.tflite` file and the conversions at its boundary.
struct TfliteCompiled {
    inner: TractCompiled,
    /// The datum type of each model input (QI8 with its parameters).
    input_types: Vec<DatumType>,
    file: TfliteFile,
}

impl Compiled for TfliteCompiled {
    /// Inputs and outputs in ONNX form, in the file's orders.
    fn run(&self, inputs: TVec<Value>) -> Result<TVec<Value>, EngineError> {
        if inputs.len() != self.file.inputs.len() {
            return Err(EngineError::Input {
                engine: TFLITE,
                index: inputs.len().min(self.file.inputs.len()),
                reason: format!(
                    "{} inputs given, the model takes {}",
                    inputs.len(),
                    self.file.inputs.len()
                ),
            });
        }
        let mut lite = TVec::new();
        for (index, (v, b)) in inputs.iter().zip(&self.file.inputs).enumerate() {
            let t = crate::tflite_io::to_lite(v, b, self.input_types[index]).map_err(|e| EngineError::Input {
                engine: TFLITE,
                index,
                reason: format!("{}: `{}`: {e:#}", self.file.file, b.name),
            })?;
            lite.push(t.into_tvalue());
        }
        let outputs = self.inner.run(lite)?;
        outputs
            .iter()
            .zip(&self.file.outputs)
            .map(|(v, b)| {
                crate::tflite_io::from_lite(v, b)
                    .map(IntoTValue::into_tvalue)
                    .map_err(|e| EngineError::Run {
                        engine: TFLITE,
                        reason: format!("{}: output `{}`: {e:#}", self.file.file, b.name),
                    })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_reads_back_and_anything_else_is_refused() {
        let f = TfliteFile {
            file: "sg0.tflite".into(),
            inputs: vec![Boundary {
                name: "x".into(),
                onnx: OnnxElem::U8,
                onnx_shape: vec![1, 3, 4, 5],
                nhwc: true,
                lite: LiteElem::I8 {
                    scale: 0.5,
                    zero_point: -3,
                },
            }],
            outputs: vec![],
            model: Arc::from(&b"TFL3"[..]),
        };
        let back = TfliteFile::parse(&f.to_bytes()).unwrap();
        assert_eq!(back.inputs, f.inputs);
        assert_eq!(&back.model[..], b"TFL3");
        assert_eq!(back.inputs[0].lite_shape(), [1, 4, 5, 3]);
        let e = TfliteEngine::new(1).unwrap().compile(b"\x08\x07onnx").err().unwrap();
        assert_eq!(
            e.to_string(),
            "tflite cannot load the model: not a stretch tflite envelope: no magic"
        );
    }
}
