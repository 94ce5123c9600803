//! Reading a bundle back for a runner: files checked against their
//! hashes, subgraph files joined into one graph cut exactly as the
//! manifest says (the runtime does not partition it again).

use crate::error::BundleError;
use crate::hash::sha256_hex;
use crate::manifest::{Manifest, TensorSpec};
use graph_ir::{DType, Fact, Graph, Op, Outlet};
use scheduler_rt::{Partition, Subgraph};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// A bundle ready for [`scheduler_rt::Runtime::load_partitioned`].
pub struct Loaded {
    pub graph: Graph,
    pub partition: Partition,
    /// Per subgraph, the bytes of its file.
    pub files: Vec<Arc<[u8]>>,
}

fn read(dir: &Path, file: &str) -> Result<Vec<u8>, BundleError> {
    let path = dir.join(file);
    std::fs::read(&path).map_err(|source| BundleError::Io {
        action: "read",
        path,
        source,
    })
}

/// Checks every file the manifest names against its SHA-256.
pub fn verify(dir: &Path, m: &Manifest) -> Result<(), BundleError> {
    for f in m.files() {
        let found = sha256_hex(&read(dir, &f.file)?);
        if found != f.sha256 {
            return Err(BundleError::Hash {
                path: dir.join(&f.file),
                want: f.sha256.clone(),
                found,
            });
        }
    }
    Ok(())
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

/// Joins the subgraph files of a verified bundle into one graph.
pub fn stitch(dir: &Path, m: &Manifest) -> Result<Loaded, BundleError> {
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
        let path = dir.join(&s.model.file);
        let bytes = read(dir, &s.model.file)?;
        let bad = |reason: String| BundleError::Model {
            path: path.clone(),
            reason,
        };
        let sub = graph_ir::onnx::import_bytes(bytes.clone().into(), &path.display().to_string(), &Default::default())
            .map_err(|e| bad(e.to_string()))?;
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
            if *have != fact(t)? {
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
        files.push(Arc::from(bytes));
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
