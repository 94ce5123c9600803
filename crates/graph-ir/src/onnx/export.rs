//! Writing a [`Graph`] as an ONNX model.

use super::ExportError;
use super::tensor_proto::tensor_to_proto;
use crate::graph::{Graph, NodeId, Outlet};
use crate::ops::*;
use crate::tensor::{Fact, Tensor};
use onnx_ir::{GraphProto, Message, ModelProto, NodeProto, TypeProto, ValueInfoProto};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

/// The opset every exported model declares.
pub const EXPORT_OPSET: i64 = 17;
/// ONNX IR version written (IR 10 carries per-node `metadata_props`).
const IR_VERSION: i64 = 10;

/// Writes the graph to an ONNX file, whole or not at all: the bytes go
/// to a temporary file beside `path` that is renamed over it once
/// written (and removed when writing fails), so an interrupted or failed
/// write never leaves half a model under `path`.
pub fn export_file(graph: &Graph, path: impl AsRef<Path>) -> Result<(), ExportError> {
    let path = path.as_ref();
    let bytes = export_bytes(graph)?;
    write_atomic(path, &bytes).map_err(|error| ExportError::Io {
        path: path.display().to_string(),
        error,
    })
}

/// Writes `bytes` to `path` through a temporary file in the same
/// directory renamed over it.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.partial-{}", std::process::id()));
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Serializes the graph as an ONNX model. Node annotations are written as the
/// node's `metadata_props` and graph metadata as the model's, both ignored by
/// runtimes.
pub fn export_bytes(graph: &Graph) -> Result<Vec<u8>, ExportError> {
    graph.check()?;
    let mut w = Writer::new(graph);
    w.name_values();
    let mut g = GraphProto::new();
    g.name = graph.name.clone();
    for id in graph.topo_order()? {
        w.node(id, &mut g)?;
    }
    for (name, o) in graph.outputs() {
        let value = w.names[o].clone();
        let fact = graph.fact(*o).expect("checked graph");
        if &value != name {
            let mut n = NodeProto::new();
            n.op_type = "Identity".into();
            n.name = w.fresh(&format!("{name}_identity"));
            n.input.push(value);
            n.output.push(name.clone());
            g.node.push(n);
        }
        g.output.push(value_info(name, fact));
    }
    g.initializer.append(&mut w.extra_initializers);
    let mut model = ModelProto::new();
    model.ir_version = IR_VERSION;
    model.producer_name = "stretch".into();
    model.producer_version = env!("CARGO_PKG_VERSION").into();
    model.opset_import.push(Default::default());
    if let Some(o) = model.opset_import.last_mut() {
        o.domain = String::new();
        o.version = EXPORT_OPSET;
    }
    model.metadata_props = props(&graph.metadata).metadata_props;
    model.graph = Some(g).into();
    model
        .write_to_bytes()
        .map_err(|e| ExportError::Encode { reason: e.to_string() })
}

/// Key/value pairs as ONNX `metadata_props` entries, carried in a scratch
/// `NodeProto` (the entry type itself is not exported by `onnx-ir`).
pub(super) fn props(map: &BTreeMap<String, String>) -> NodeProto {
    let mut carrier = NodeProto::new();
    for (k, v) in map {
        carrier.metadata_props.push(Default::default());
        if let Some(e) = carrier.metadata_props.last_mut() {
            e.key = k.clone();
            e.value = v.clone();
        }
    }
    carrier
}

fn value_info(name: &str, fact: &Fact) -> ValueInfoProto {
    let mut vi = ValueInfoProto::new();
    vi.name = name.to_string();
    let mut tp = TypeProto::new();
    let tt = tp.mut_tensor_type();
    tt.elem_type = fact.dtype.onnx_code();
    let shape = tt.shape.mut_or_insert_default();
    for &d in &fact.shape {
        shape.dim.push(Default::default());
        if let Some(dim) = shape.dim.last_mut() {
            dim.set_dim_value(d as i64);
        }
    }
    vi.type_ = Some(tp).into();
    vi
}

pub(super) struct Writer<'g> {
    pub(super) graph: &'g Graph,
    pub(super) names: HashMap<Outlet, String>,
    used: HashSet<String>,
    extra_initializers: Vec<onnx_ir::TensorProto>,
}

impl<'g> Writer<'g> {
    fn new(graph: &'g Graph) -> Self {
        Writer {
            graph,
            names: HashMap::new(),
            used: HashSet::new(),
            extra_initializers: Vec::new(),
        }
    }

    pub(super) fn fresh(&mut self, base: &str) -> String {
        let name = if self.used.contains(base) {
            (1..)
                .map(|i| format!("{base}_{i}"))
                .find(|n| !self.used.contains(n))
                .expect("a free name")
        } else {
            base.to_string()
        };
        self.used.insert(name.clone());
        name
    }

    /// Value names: graph outputs keep their names (when produced by an op),
    /// inputs and constants their node names, other outputs the node name
    /// (with `_<slot>` for multi-output nodes).
    fn name_values(&mut self) {
        let g = self.graph;
        for (name, o) in g.outputs() {
            let node = g.node(o.node);
            if !matches!(node.op, Op::Input(_) | Op::Const(_))
                && !self.names.contains_key(o)
                && !self.used.contains(name)
            {
                self.used.insert(name.clone());
                self.names.insert(*o, name.clone());
            }
        }
        for id in g.node_ids() {
            let node = g.node(id);
            for slot in 0..node.outputs.len() {
                let o = id.out(slot);
                if self.names.contains_key(&o) {
                    continue;
                }
                let base = if node.outputs.len() == 1 {
                    node.name.clone()
                } else {
                    format!("{}_{slot}", node.name)
                };
                let name = self.fresh(&base);
                self.names.insert(o, name);
            }
        }
    }

    /// Adds an initializer for an operand that the IR keeps as an attribute.
    pub(super) fn operand(&mut self, node: &str, what: &str, t: Tensor) -> String {
        let name = self.fresh(&format!("{node}_{what}"));
        self.extra_initializers.push(tensor_to_proto(&name, &t));
        name
    }

    fn node(&mut self, id: NodeId, g: &mut GraphProto) -> Result<(), ExportError> {
        let graph = self.graph;
        let node = graph.node(id);
        let out_name = self.names[&id.out(0)].clone();
        match &node.op {
            Op::Input(f) => {
                let mut vi = value_info(&out_name, f);
                vi.metadata_props = props(&node.annotations).metadata_props;
                g.input.push(vi);
                return Ok(());
            }
            Op::Const(t) => {
                let mut tp = tensor_to_proto(&out_name, t);
                tp.metadata_props = props(&node.annotations).metadata_props;
                g.initializer.push(tp);
                return Ok(());
            }
            _ => {}
        }
        if self.composed(id, g) {
            return Ok(());
        }
        let mut p = NodeProto::new();
        p.name = node.name.clone();
        p.op_type = node.op.name().to_string();
        p.input = node.inputs.iter().map(|o| self.names[o].clone()).collect();
        p.output = (0..node.outputs.len())
            .map(|s| self.names[&id.out(s)].clone())
            .collect();
        self.attributes(node, &mut p)?;
        p.metadata_props = props(&node.annotations).metadata_props;
        for (s, f) in node.outputs.iter().enumerate() {
            let name = self.names[&id.out(s)].clone();
            if !graph.is_output(id.out(s)) {
                g.value_info.push(value_info(&name, f));
            }
        }
        g.node.push(p);
        Ok(())
    }
}
