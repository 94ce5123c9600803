//! onnxruntime engine (feature `ort`): the shared library is loaded at run
//! time, on first use, from [`dylib_path`]; nothing is downloaded or linked
//! at build time.

use crate::config::Spin;
use crate::engine::{Compiled, Engine, Value};
use crate::error::EngineError;
use ort::environment::Environment;
use ort::session::Session;
use ort::value::{Tensor as OrtTensor, TensorElementType};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use tract_core::prelude::{Datum, DatumType, IntoTValue, TVec, Tensor};

/// Where the pip wheel of onnxruntime keeps its library, relative to a
/// repository root holding the project's `.venv`, for any Python 3
/// (`python3*` matches every `.venv/lib/python3.N`).
pub const WHEEL_DIR: &str = ".venv/lib/python3*/site-packages/onnxruntime/capi";

/// The wheel's library folders under `root`: [`WHEEL_DIR`] with its
/// `python3*` matched against `root/.venv/lib`, in name order.
fn wheel_dirs(root: &Path) -> Vec<PathBuf> {
    let lib = root.join(".venv/lib");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&lib)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("python3")))
                .map(|e| e.path().join("site-packages/onnxruntime/capi"))
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// The process's one onnxruntime environment, the library file and its
/// release (from the file name, as the wheel ships it).
struct Loaded {
    env: Environment,
    library: String,
    version: String,
}

const ORT: &str = "ort";

static ENVIRONMENT: OnceLock<Result<Loaded, String>> = OnceLock::new();

/// The onnxruntime library to load: `$ORT_DYLIB_PATH` when set, else the
/// first `libonnxruntime.so*` in [`WHEEL_DIR`] under the current directory,
/// one of its ancestors, or the repository this crate was built from. The
/// error lists every place looked at.
pub fn dylib_path() -> Result<PathBuf, EngineError> {
    locate(std::env::var_os("ORT_DYLIB_PATH"), &crate::roots::search_roots())
}

fn locate(env: Option<std::ffi::OsString>, roots: &[PathBuf]) -> Result<PathBuf, EngineError> {
    if let Some(p) = env.filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(unavailable(format!(
                "ORT_DYLIB_PATH is set to {}, which is not a file",
                p.display()
            )))
        };
    }
    let mut looked = Vec::new();
    for root in roots {
        for dir in wheel_dirs(root) {
            if let Some(lib) = find_library(&dir) {
                return Ok(lib);
            }
        }
        looked.push(format!("{}/libonnxruntime.so*", root.join(WHEEL_DIR).display()));
    }
    Err(unavailable(format!(
        "libonnxruntime.so not found: ORT_DYLIB_PATH is not set and none of [{}] exists \
         (scripts/setup.sh --deps installs the onnxruntime wheel into .venv)",
        looked.join(", ")
    )))
}

fn find_library(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libonnxruntime.so"))
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

fn unavailable(reason: String) -> EngineError {
    EngineError::Unavailable { engine: ORT, reason }
}

/// Loads the library once per process and creates the one onnxruntime
/// environment; later calls return the same result.
fn environment() -> Result<&'static Loaded, EngineError> {
    ENVIRONMENT
        .get_or_init(|| {
            let path = dylib_path().map_err(|e| match e {
                EngineError::Unavailable { reason, .. } => reason,
                other => other.to_string(),
            })?;
            let builder = ort::init_from(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let env = builder
                .with_name("stretch")
                .build()
                .map_err(|e| format!("{}: cannot create the environment: {e}", path.display()))?;
            let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            let version = real
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.split_once(".so."))
                .map_or_else(|| "(release unknown)".to_string(), |(_, v)| v.to_string());
            Ok(Loaded {
                env,
                library: path.display().to_string(),
                version,
            })
        })
        .as_ref()
        .map_err(|reason| unavailable(reason.clone()))
}

/// onnxruntime (CPU execution provider) with a fixed number of intra-op
/// threads per session. Sessions are created on the thread that compiles;
/// with one thread a run executes entirely on the calling thread.
pub struct OrtEngine {
    threads: usize,
    spin: Spin,
    loaded: &'static Loaded,
}

impl OrtEngine {
    /// An engine whose sessions use `threads` (≥ 1) intra-op threads, which
    /// wait for work as `spin` says; fails with the places looked at when
    /// the library cannot be loaded.
    pub fn new(threads: usize, spin: Spin) -> Result<OrtEngine, EngineError> {
        Ok(OrtEngine {
            threads: threads.max(1),
            spin,
            loaded: environment()?,
        })
    }

    /// The library file this process loaded.
    pub fn library(&self) -> &'static str {
        &self.loaded.library
    }

    /// A session of `onnx`, its float16 values computed as on a phone's
    /// GPU in fp16 mode ([`graph_ir::onnx::fp16_rounded`], as tract loads them).
    fn session(&self, onnx: &[u8]) -> Result<Session, String> {
        let rounded = graph_ir::onnx::fp16_rounded(onnx);
        let onnx = rounded.as_deref().unwrap_or(onnx);
        Session::builder(&self.loaded.env)
            .map_err(|e| e.to_string())?
            .with_intra_threads(self.threads)
            .map_err(|e| e.to_string())?
            .with_inter_threads(1)
            .map_err(|e| e.to_string())?
            .with_intra_op_spinning(self.spin != Spin::Off)
            .map_err(|e| e.to_string())?
            .with_config_entry(
                "session.force_spinning_stop",
                if self.spin == Spin::Run { "1" } else { "0" },
            )
            .map_err(|e| e.to_string())?
            .commit_from_memory(onnx)
            .map_err(|e| e.to_string())
    }
}

impl Engine for OrtEngine {
    fn name(&self) -> &'static str {
        ORT
    }

    fn version(&self) -> &'static str {
        &self.loaded.version
    }

    fn threads(&self) -> usize {
        self.threads
    }

    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Compiled>, EngineError> {
        self.compile_threads(onnx, self.threads)
    }

    fn compile_threads(&self, onnx: &[u8], threads: usize) -> Result<Box<dyn Compiled>, EngineError> {
        let engine = OrtEngine {
            threads: threads.max(1),
            spin: self.spin,
            loaded: self.loaded,
        };
        let first = engine
            .session(onnx)
            .map_err(|reason| EngineError::Load { engine: ORT, reason })?;
        Ok(Box::new(OrtCompiled {
            engine,
            onnx: onnx.to_vec(),
            sessions: Mutex::new(vec![first]),
        }))
    }
}

/// A pool of sessions of one model: a run takes one (creating another when
/// all are busy), so concurrent runs never wait on each other.
struct OrtCompiled {
    engine: OrtEngine,
    onnx: Vec<u8>,
    sessions: Mutex<Vec<Session>>,
}

impl OrtCompiled {
    /// Runs `session` on `inputs` (f32 or u8 tensors: quantized values
    /// cross subgraphs as u8). With the tensor pool on, inputs are
    /// handed to onnxruntime in place (no copy) and outputs land in kept
    /// buffers; off, each input is copied into a fresh buffer and each
    /// output into a fresh tensor. Either way the pool counts both.
    fn run_on(session: &mut Session, inputs: &[Value]) -> Result<TVec<Value>, String> {
        let mut feeds = Vec::with_capacity(inputs.len());
        for (outlet, v) in session.inputs().iter().zip(inputs) {
            let name = outlet.name().to_string();
            let value = match v.datum_type() {
                DatumType::U8 => feed::<u8>(v),
                _ => feed::<f32>(v),
            }
            .map_err(|e| format!("input '{name}': {e}"))?;
            feeds.push((name, value));
        }
        let outputs = session.run(feeds).map_err(|e| e.to_string())?;
        let mut result = TVec::new();
        for (name, value) in outputs.into_iter() {
            let t = match value.dtype().tensor_type() {
                Some(TensorElementType::Uint8) => fetch::<u8>(&value),
                _ => fetch::<f32>(&value),
            }
            .map_err(|e| format!("output '{name}': {e}"))?;
            result.push(t.into_tvalue());
        }
        Ok(result)
    }
}

/// `v` as an onnxruntime input of element type `T`.
fn feed<T>(v: &Value) -> Result<ort::session::SessionInputValue<'_>, String>
where
    T: Datum + Copy + ort::value::PrimitiveTensorElementType + std::fmt::Debug,
{
    let pool = crate::pool::pool();
    let slice = v
        .try_as_plain_ram()
        .and_then(|p| p.as_slice::<T>())
        .map_err(|e| e.to_string())?;
    if pool.enabled() {
        let t = ort::value::TensorRef::from_array_view((v.shape().to_vec(), slice)).map_err(|e| e.to_string())?;
        Ok(ort::session::SessionInputValue::from(t))
    } else {
        pool.copied(std::mem::size_of_val(slice));
        pool.allocated();
        let t = OrtTensor::from_array((v.shape().to_vec(), slice.to_vec())).map_err(|e| e.to_string())?;
        Ok(ort::session::SessionInputValue::from(t))
    }
}

/// An onnxruntime output of element type `T` as a tensor from the pool.
fn fetch<T>(value: &ort::value::DynValue) -> Result<Tensor, String>
where
    T: Datum + Copy + ort::value::PrimitiveTensorElementType,
{
    let (shape, data) = value.try_extract_tensor::<T>().map_err(|e| e.to_string())?;
    let shape: Vec<usize> = shape.iter().map(|d| *d as usize).collect();
    crate::pool::pool().tensor(&shape, data)
}

impl Compiled for OrtCompiled {
    fn run(&self, inputs: TVec<Value>) -> Result<TVec<Value>, EngineError> {
        let failed = |reason: String| EngineError::Run { engine: ORT, reason };
        let pooled = self
            .sessions
            .lock()
            .map_err(|_| failed("session pool poisoned".to_string()))?
            .pop();
        let mut session = match pooled {
            Some(s) => s,
            None => self.engine.session(&self.onnx).map_err(failed)?,
        };
        let out = Self::run_on(&mut session, &inputs);
        if let Ok(mut pool) = self.sessions.lock() {
            pool.push(session);
        }
        out.map_err(failed)
    }
}

#[cfg(all(test, feature = "onnx"))]
mod tests {
    use super::*;
    use crate::tract::TractEngine;
    use tract_core::prelude::{Tensor, tvec};

    const INPUT: [usize; 4] = [1, 8, 6, 6];

    #[test]
    fn ort_matches_tract_on_a_whole_model() {
        let mut b = graph_ir::builder::Builder::new("m");
        let x = b.input("x", &INPUT).unwrap();
        let y = b.conv("conv", x, graph_ir::builder::ConvSpec::new(8, 3, 1)).unwrap();
        let y = b.relu("relu", y).unwrap();
        let mut g = b.finish("y", y).unwrap();
        g.fill_missing_weights(3);
        let bytes = graph_ir::onnx::export_bytes(&g).unwrap();
        let values: Vec<f32> = (0..INPUT.iter().product::<usize>())
            .map(|i| ((i * 7919) % 201) as f32 / 100.0 - 1.0)
            .collect();
        let x = Tensor::from_shape(&INPUT, &values).unwrap().into_tvalue();
        let engine = OrtEngine::new(2, Spin::Off).unwrap();
        assert!(engine.version().starts_with("1."), "{}", engine.version());
        let ort = engine.compile(&bytes).unwrap();
        let tract = TractEngine::new(1).unwrap().compile(&bytes).unwrap();
        let (a, b) = (
            ort.run(tvec![x.clone()]).unwrap().remove(0),
            tract.run(tvec![x]).unwrap().remove(0),
        );
        assert_eq!(a.shape(), b.shape());
        let a = a.to_plain_array_view::<f32>().unwrap();
        let b = b.to_plain_array_view::<f32>().unwrap();
        let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (x, y) in a.iter().zip(b.iter()) {
            assert!((x - y).abs() <= 1e-4 * scale, "{x} vs {y}");
        }
    }

    #[test]
    fn the_wheel_library_is_found_and_a_missing_one_is_named() {
        let found = dylib_path().unwrap();
        assert!(found.to_string_lossy().contains("libonnxruntime.so"), "{found:?}");
        let e = locate(None, &[PathBuf::from("/nowhere")]).unwrap_err().to_string();
        assert!(
            e.contains("ORT_DYLIB_PATH") && e.contains(&format!("/nowhere/{WHEEL_DIR}/libonnxruntime.so*")),
            "{e}"
        );
        let e = locate(Some("/no/lib.so".into()), &[]).unwrap_err().to_string();
        assert!(e.contains("/no/lib.so"), "{e}");
        let root = std::env::temp_dir().join(format!("ort-wheel-{}", std::process::id()));
        let capi = root.join(".venv/lib/python3.13/site-packages/onnxruntime/capi");
        std::fs::create_dir_all(&capi).unwrap();
        std::fs::write(capi.join("libonnxruntime.so.1.99.0"), b"").unwrap();
        assert_eq!(
            locate(None, std::slice::from_ref(&root)).unwrap(),
            capi.join("libonnxruntime.so.1.99.0")
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
