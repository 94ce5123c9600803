//! Reading a bundle back for a runner: every file read once and checked
//! against its size and hash, subgraph files joined into one graph cut
//! exactly as the manifest says (the runtime does not partition it again).

use crate::dir::BundleDir;
use crate::error::BundleError;
use crate::manifest::{FileRef, MANIFEST, Manifest, TensorSpec};
use graph_ir::{DType, Fact, Graph, Op, Outlet};
use scheduler_rt::npy;
use scheduler_rt::{Partition, Subgraph};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A bundle ready for [`scheduler_rt::Runtime::load_partitioned`].
pub struct Loaded {
    pub graph: Graph,
    pub partition: Partition,
    /// Per subgraph, the bytes of its file.
    pub files: Vec<Arc<[u8]>>,
}

/// A bundle read and checked: its manifest, and every file it names read
/// once through [`BundleDir`] (inside the bundle, plain, of the stated
/// size and SHA-256). Nothing is read from the directory afterwards.
pub struct Bundle {
    pub manifest: Manifest,
    dir: BundleDir,
    files: HashMap<String, Arc<[u8]>>,
}

impl Bundle {
    /// Reads `dir/bundle.json` and every file it names.
    pub fn open(dir: &Path) -> Result<Bundle, BundleError> {
        let dir = BundleDir::open(dir)?;
        let manifest = Manifest::parse(&dir.read_manifest()?, &dir.path(MANIFEST))?;
        let mut files = HashMap::new();
        for (entry, f) in manifest.files() {
            let bytes = dir.read(&entry, f)?;
            files.insert(f.file.clone(), Arc::from(bytes));
        }
        Ok(Bundle { manifest, dir, files })
    }

    /// Where `f` is, for messages.
    pub fn path(&self, f: &FileRef) -> PathBuf {
        self.dir.path(&f.file)
    }

    /// The bytes of `f`, a file the manifest names.
    pub fn bytes(&self, f: &FileRef) -> Result<Arc<[u8]>, BundleError> {
        self.files
            .get(&f.file)
            .cloned()
            .ok_or_else(|| BundleError::Inconsistent {
                what: format!("`{}` is not a file of the manifest", f.file),
            })
    }

    /// The float32 array `f` (a `.npy` file the manifest names) holds.
    pub fn array(&self, f: &FileRef) -> Result<npy::Array, BundleError> {
        let path = self.path(f);
        npy::parse(&self.bytes(f)?, &path.display().to_string()).map_err(|e| BundleError::Model {
            path,
            reason: e.to_string(),
        })
    }

    /// Joins the subgraph files (ONNX) into one graph.
    pub fn stitch(&self) -> Result<Loaded, BundleError> {
        stitch(self, Files::Onnx)
    }

    /// Joins the subgraphs' `.tflite` files into one graph, each read as
    /// [`litert::cost_graph`] reads it (rank-4 tensors seen NCHW, every
    /// value priced as float32): the partition and meeting points a runner
    /// of the LiteRT files needs, with no ONNX file read. A boundary
    /// tensor must have the manifest's shape; its type is the manifest's
    /// ONNX one only at the runner's side of the file. `files` holds the
    /// `.tflite` bytes.
    pub fn stitch_tflite(&self) -> Result<Loaded, BundleError> {
        stitch(self, Files::Tflite)
    }
}

/// Which file of each subgraph [`stitch`] reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Files {
    Onnx,
    Tflite,
}

fn dtype(name: &str) -> Option<DType> {
    [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::I64,
        DType::I32,
        DType::I8,
        DType::U8,
        DType::Bool,
    ]
    .into_iter()
    .find(|d| d.to_string() == name)
}

fn fact(t: &TensorSpec) -> Result<Fact, BundleError> {
    let d = dtype(&t.dtype).ok_or_else(|| BundleError::Inconsistent {
        what: format!("tensor `{}` has unknown type `{}`", t.name, t.dtype),
    })?;
    Ok(Fact::new(d, t.shape.clone()))
}

/// Subgraph `s`'s file of kind `from` as a graph, its bytes and its path.
fn read_subgraph(
    b: &Bundle,
    s: &crate::manifest::Subgraph,
    from: Files,
) -> Result<(Graph, Arc<[u8]>, PathBuf), BundleError> {
    let file = match from {
        Files::Onnx => &s.model,
        Files::Tflite => {
            &s.tflite_model
                .as_ref()
                .ok_or_else(|| BundleError::Inconsistent {
                    what: format!("subgraph `{}` has no .tflite file", s.name),
                })?
                .model
        }
    };
    let path = b.path(file);
    let bytes = b.bytes(file)?;
    let name = path.display().to_string();
    let sub = match from {
        Files::Onnx => graph_ir::onnx::import_bytes(bytes::Bytes::copy_from_slice(&bytes), &name, &Default::default())
            .map_err(|e| e.to_string()),
        Files::Tflite => litert::cost_graph(&bytes, &name).map_err(|e| e.to_string()),
    };
    match sub {
        Ok(g) => Ok((g, bytes, path)),
        Err(reason) => Err(BundleError::Model { path, reason }),
    }
}

fn stitch(b: &Bundle, from: Files) -> Result<Loaded, BundleError> {
    let m = &b.manifest;
    let mut g = Graph::new(m.model.clone());
    let mut values: HashMap<String, Outlet> = HashMap::new();
    let graph_err = |e: graph_ir::GraphError| BundleError::Inconsistent { what: e.to_string() };
    for t in &m.inputs {
        let o = g.add_input(t.name.clone(), fact(t)?).map_err(graph_err)?;
        values.insert(t.name.clone(), o);
    }
    let mut subgraphs = Vec::new();
    let mut files = Vec::new();
    for s in &m.subgraphs {
        let (sub, bytes, path) = read_subgraph(b, s, from)?;
        let bad = |reason: String| BundleError::Model {
            path: path.clone(),
            reason,
        };
        if sub.inputs().len() != s.inputs.len() || sub.outputs().len() != s.outputs.len() {
            return Err(bad(format!(
                "has {} inputs and {} outputs; the manifest lists {} and {}",
                sub.inputs().len(),
                sub.outputs().len(),
                s.inputs.len(),
                s.outputs.len()
            )));
        }
        let mut map: HashMap<Outlet, Outlet> = HashMap::new();
        for (id, t) in sub.inputs().iter().zip(&s.inputs) {
            let have = &sub.node(*id).outputs[0];
            let want = fact(t)?;
            let differs = match from {
                Files::Onnx => *have != want,
                Files::Tflite => have.shape != want.shape,
            };
            if differs {
                return Err(bad(format!(
                    "input `{}` is {have}; the manifest says {} {:?}",
                    t.name, t.dtype, t.shape
                )));
            }
            map.insert(id.out(0), values[&t.name]);
        }
        let mut nodes = Vec::new();
        for id in sub.topo_order().map_err(graph_err)? {
            let n = sub.node(id);
            if matches!(n.op, Op::Input(_)) {
                continue;
            }
            let name = if g.find(&n.name).is_some() {
                format!("{}/{}", s.name, n.name)
            } else {
                n.name.clone()
            };
            let new = match &n.op {
                Op::Const(t) => g.add_const(name, t.clone()).map_err(graph_err)?.node,
                op => {
                    let inputs: Vec<Outlet> = n.inputs.iter().map(|o| map[o]).collect();
                    let new = g.add_node(name, op.clone(), &inputs).map_err(graph_err)?;
                    g.annotate(new, graph_ir::keys::PROCESSOR, s.processor.clone());
                    nodes.push(new);
                    new
                }
            };
            for slot in 0..n.outputs.len() {
                map.insert(id.out(slot), new.out(slot));
            }
        }
        let mut outputs = Vec::new();
        for ((_, o), t) in sub.outputs().iter().zip(&s.outputs) {
            let mapped = map[o];
            values.insert(t.name.clone(), mapped);
            outputs.push(mapped);
        }
        subgraphs.push(Subgraph {
            name: s.name.clone(),
            processor: s.processor.clone(),
            nodes,
            inputs: s.inputs.iter().map(|t| values[&t.name]).collect(),
            outputs,
            meeting_point: s.meeting_point,
        });
        files.push(bytes);
    }
    let outputs = m.outputs.iter().map(|t| (t.name.clone(), values[&t.name])).collect();
    g.set_outputs(outputs).map_err(graph_err)?;
    g.set_precisions(m.processors.iter().map(|p| (&p.name, &p.precision)));
    Ok(Loaded {
        graph: g,
        partition: Partition { subgraphs },
        files,
    })
}
