//! The manifest `bundle.json` (schema [`SCHEMA`]): what a runner needs to
//! run a bundle without looking at the model again.

use crate::dir::BundleDir;
use crate::error::BundleError;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::Path;

/// The manifest schema this build writes and reads.
pub const SCHEMA: &str = "stretch.bundle/2";

/// The processor kinds a manifest may name.
pub const KINDS: [&str; 4] = ["cpu", "gpu", "dsp", "npu"];

/// The precisions a manifest may name.
pub const PRECISIONS: [&str; 3] = ["fp32", "fp16", "int8"];

/// The manifest's file name inside a bundle directory.
pub const MANIFEST: &str = "bundle.json";

/// A file of the bundle, relative to its directory, with its size and
/// SHA-256.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileRef {
    pub file: String,
    pub sha256: String,
    /// Its size in bytes: a reader reads no more.
    pub bytes: u64,
}

impl FileRef {
    /// The entry for `file`, a file already written in `dir`.
    pub fn of(dir: &Path, file: &str) -> Result<FileRef, BundleError> {
        let path = dir.join(file);
        let bytes = std::fs::read(&path).map_err(|e| BundleError::io("read", &path, e))?;
        Ok(FileRef::of_bytes(file, &bytes))
    }

    /// The entry for `file` holding `bytes`.
    pub fn of_bytes(file: &str, bytes: &[u8]) -> FileRef {
        FileRef {
            file: file.to_string(),
            sha256: crate::hash::sha256_hex(bytes),
            bytes: bytes.len() as u64,
        }
    }
}

/// A tensor crossing a file boundary: a model input or output, or a value
/// one subgraph hands another.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorSpec {
    pub name: String,
    /// `f32`, `f16`, `i64`, ...
    pub dtype: String,
    pub shape: Vec<usize>,
}

/// A processor of the device, as the bundle maps it onto a phone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Processor {
    pub name: String,
    /// `cpu`, `gpu`, `dsp` or `npu`.
    pub kind: String,
    /// `fp32`, `fp16` or `int8`: what the bundle's files compute there.
    pub precision: String,
    /// The onnxruntime execution provider that runs this processor's files
    /// on a phone, and its options.
    pub execution_provider: String,
    pub provider_options: Vec<(String, String)>,
    /// How to place its thread(s) on a phone.
    pub pinning: String,
    /// The LiteRT delegate that runs this processor's `.tflite` files,
    /// where the bundle has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub litert: Option<LiteRtDelegate>,
}

/// A LiteRT delegate and its options, in the words of LiteRT's own API.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LiteRtDelegate {
    /// `gpu` (the GPU delegate, OpenCL/OpenGL), `qnn` (Qualcomm's NPU/DSP
    /// delegate) or `xnnpack` (CPU cores).
    pub delegate: String,
    pub options: Vec<(String, String)>,
}

/// The layout of a tensor in a `.tflite` file: `nhwc` for a rank-4
/// activation the ONNX files hold as NCHW, `onnx` for one stored in the
/// ONNX files' axis order.
pub const LAYOUTS: [&str; 2] = ["nhwc", "onnx"];

/// A tensor at a `.tflite` file's boundary: the bundle's name for it, and
/// how the file holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LiteTensor {
    pub name: String,
    /// `f32` or `i8`.
    pub dtype: String,
    /// The shape in the file's layout.
    pub shape: Vec<usize>,
    /// One of [`LAYOUTS`].
    pub layout: String,
    /// An `i8` tensor's real value is `scale · (q − zero_point)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantization: Option<LiteQuant>,
}

/// Per-tensor affine quantization of an `i8` tensor.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LiteQuant {
    pub scale: f32,
    pub zero_point: i64,
}

/// A subgraph as a LiteRT file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TfliteModel {
    pub model: FileRef,
    /// In the order of the subgraph's `inputs`, by the same names.
    pub inputs: Vec<LiteTensor>,
    /// In the order of the subgraph's `outputs`, by the same names.
    pub outputs: Vec<LiteTensor>,
    /// What the file does differently from the ONNX file, one line each
    /// (weights re-quantized, transposes inserted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One subgraph: a model file run on one processor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Subgraph {
    pub name: String,
    pub processor: String,
    pub model: FileRef,
    /// The same model in onnxruntime's `.ort` format, where its tools ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ort_model: Option<FileRef>,
    /// The same subgraph as a LiteRT file, where asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tflite_model: Option<TfliteModel>,
    /// The file's inputs in order: model inputs or earlier subgraphs' outputs.
    pub inputs: Vec<TensorSpec>,
    /// The file's outputs in order.
    pub outputs: Vec<TensorSpec>,
    /// Subgraphs whose outputs it reads (it starts when they have finished).
    pub after: Vec<String>,
    /// Whether it begins at a meeting point (branches merge there).
    pub meeting_point: bool,
}

/// Input normalisation a caller applies before the model's input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Normalisation {
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
}

/// Reference tensors: the model's outputs for the given inputs, and how
/// close a run must come to them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    pub inputs: Vec<FileRef>,
    pub outputs: Vec<FileRef>,
    /// What computed the outputs.
    pub computed_by: String,
    /// Relative tolerance on the largest magnitude of each output.
    pub rtol: f32,
    /// Absolute tolerance per element (one quantization step of an int8 output).
    pub atol: f32,
}

/// The manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: String,
    /// The model the bundle was exported from (its graph name).
    pub model: String,
    pub device: String,
    pub processors: Vec<Processor>,
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<TensorSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalisation: Option<Normalisation>,
    /// In an order a runner may start them in.
    pub subgraphs: Vec<Subgraph>,
    /// Nodes rewritten for a processor that lacks their form, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rewrites: Vec<String>,
    /// What a phone may not run as the files are written, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub reference: Reference,
    /// onnxruntime's required-operators configuration for a reduced build.
    pub required_operators: FileRef,
}

impl Manifest {
    /// Reads `dir/bundle.json` (a plain file inside `dir`), refusing
    /// another schema version and a manifest whose tensors do not connect.
    /// The files it names are not read here ([`crate::Bundle::open`]).
    pub fn load(dir: &Path) -> Result<Manifest, BundleError> {
        let dir = BundleDir::open(dir)?;
        Manifest::parse(&dir.read_manifest()?, &dir.path(MANIFEST))
    }

    /// Parses and checks a manifest's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, BundleError> {
        let path = path.to_path_buf();
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| BundleError::Manifest {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let found = value.get("schema").and_then(|s| s.as_str()).unwrap_or("(none)");
        if found != SCHEMA {
            let version = |s: &str| s.strip_prefix("stretch.bundle/").and_then(|v| v.parse::<u32>().ok());
            let older = matches!((version(found), version(SCHEMA)), (Some(v), Some(ours)) if v < ours);
            return Err(BundleError::Schema {
                path,
                found: found.to_string(),
                hint: if older {
                    "an older stretch wrote it: export the model again"
                } else {
                    "not a stretch bundle, or a newer stretch wrote it"
                },
            });
        }
        let m: Manifest = serde_json::from_value(value).map_err(|e| BundleError::Manifest {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        m.check()?;
        Ok(m)
    }

    /// The model has outputs; every subgraph reads only model inputs and
    /// outputs of subgraphs before it, with the shapes they have there;
    /// its processor is listed; every model output is produced.
    pub fn check(&self) -> Result<(), BundleError> {
        if self.outputs.is_empty() {
            return Err(inconsistent("the model has no outputs".into()));
        }
        let mut known: Vec<&TensorSpec> = self.inputs.iter().collect();
        let processors: HashSet<&str> = self.processors.iter().map(|p| p.name.as_str()).collect();
        for p in &self.processors {
            if !KINDS.contains(&p.kind.as_str()) {
                return Err(inconsistent(format!(
                    "processor `{}` has kind `{}`; the kinds are {}",
                    p.name,
                    p.kind,
                    KINDS.join(", ")
                )));
            }
            if !PRECISIONS.contains(&p.precision.as_str()) {
                return Err(inconsistent(format!(
                    "processor `{}` has precision `{}`; the precisions are {}",
                    p.name,
                    p.precision,
                    PRECISIONS.join(", ")
                )));
            }
        }
        let mut names = HashSet::new();
        for s in &self.subgraphs {
            if !names.insert(s.name.as_str()) {
                return Err(inconsistent(format!("subgraph `{}` is listed twice", s.name)));
            }
            if !processors.contains(s.processor.as_str()) {
                return Err(inconsistent(format!(
                    "subgraph `{}` runs on processor `{}`, which the manifest does not list",
                    s.name, s.processor
                )));
            }
            for t in &s.inputs {
                let Some(have) = known.iter().find(|k| k.name == t.name) else {
                    return Err(BundleError::Unconnected {
                        subgraph: s.name.clone(),
                        tensor: t.name.clone(),
                    });
                };
                if have.shape != t.shape || have.dtype != t.dtype {
                    return Err(inconsistent(format!(
                        "subgraph `{}` reads `{}` as {} {:?}, produced as {} {:?}",
                        s.name, t.name, t.dtype, t.shape, have.dtype, have.shape
                    )));
                }
            }
            if let Some(t) = &s.tflite_model {
                check_lite(&s.name, &s.inputs, &t.inputs)?;
                check_lite(&s.name, &s.outputs, &t.outputs)?;
            }
            known.extend(s.outputs.iter());
        }
        for t in &self.outputs {
            if !known.iter().any(|k| k.name == t.name && k.shape == t.shape) {
                return Err(inconsistent(format!(
                    "model output `{}` {:?} is produced by no subgraph",
                    t.name, t.shape
                )));
            }
        }
        if self.reference.inputs.len() != self.inputs.len() || self.reference.outputs.len() != self.outputs.len() {
            return Err(inconsistent(format!(
                "{} reference inputs and {} outputs for a model of {} and {}",
                self.reference.inputs.len(),
                self.reference.outputs.len(),
                self.inputs.len(),
                self.outputs.len()
            )));
        }
        Ok(())
    }

    /// Every file the manifest names, each with the entry that names it
    /// (`subgraphs[0].model`, `reference.outputs[1]`, ...).
    pub fn files(&self) -> Vec<(String, &FileRef)> {
        let mut out: Vec<(String, &FileRef)> = Vec::new();
        for (i, s) in self.subgraphs.iter().enumerate() {
            out.push((format!("subgraphs[{i}].model"), &s.model));
            if let Some(f) = &s.ort_model {
                out.push((format!("subgraphs[{i}].ort_model"), f));
            }
            if let Some(t) = &s.tflite_model {
                out.push((format!("subgraphs[{i}].tflite_model"), &t.model));
            }
        }
        for (i, f) in self.reference.inputs.iter().enumerate() {
            out.push((format!("reference.inputs[{i}]"), f));
        }
        for (i, f) in self.reference.outputs.iter().enumerate() {
            out.push((format!("reference.outputs[{i}]"), f));
        }
        out.push(("required_operators".into(), &self.required_operators));
        out
    }
}

/// A subgraph's LiteRT tensors name its tensors in order, each with a
/// layout of [`LAYOUTS`], type `f32` or `i8`, and an `i8` one a positive
/// finite scale.
fn check_lite(subgraph: &str, onnx: &[TensorSpec], lite: &[LiteTensor]) -> Result<(), BundleError> {
    let names = |v: Vec<&str>| v.join(", ");
    if onnx.len() != lite.len() || onnx.iter().zip(lite).any(|(a, b)| a.name != b.name) {
        return Err(inconsistent(format!(
            "subgraph `{subgraph}`'s LiteRT file lists tensors {}; the subgraph's are {}",
            names(lite.iter().map(|t| t.name.as_str()).collect()),
            names(onnx.iter().map(|t| t.name.as_str()).collect())
        )));
    }
    for t in lite {
        let bad = |what: String| inconsistent(format!("subgraph `{subgraph}`'s LiteRT tensor `{}` {what}", t.name));
        if !LAYOUTS.contains(&t.layout.as_str()) {
            return Err(bad(format!(
                "has layout `{}`; the layouts are {}",
                t.layout,
                LAYOUTS.join(", ")
            )));
        }
        match (t.dtype.as_str(), &t.quantization) {
            ("f32", _) => {}
            ("i8", Some(q)) if q.scale.is_finite() && q.scale > 0.0 && (-128..=127).contains(&q.zero_point) => {}
            ("i8", Some(q)) => {
                return Err(bad(format!(
                    "is i8 with scale {} and zero point {}; LiteRT takes a positive finite scale and a zero point in -128..127",
                    q.scale, q.zero_point
                )));
            }
            ("i8", None) => return Err(bad("is i8 without scale and zero point".into())),
            (d, _) => return Err(bad(format!("has type `{d}`; LiteRT files here hold f32 or i8"))),
        }
    }
    Ok(())
}

fn inconsistent(what: String) -> BundleError {
    BundleError::Inconsistent { what }
}
