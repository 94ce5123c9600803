//! What an fp16 subgraph computes on a host: float32 arithmetic with every
//! operator's result rounded to float16, as a phone's GPU in fp16 mode
//! stores each operator's output in half precision.
//!
//! Host CPUs without native float16 arithmetic run a float16 model either
//! very slowly (tract computes it in float16 in software) or in float32
//! with float16 only at the boundaries (onnxruntime inserts casts around
//! every operator it lacks a float16 kernel for, and keeps float32 between
//! them), so the two engines disagree. [`fp16_rounded`] writes one
//! definition into the file both load: float16 constants become float32
//! (exactly), every operator that computes on float16 values computes on
//! their float32 values and its result is rounded to float16 and back
//! (`Cast` to float16, `Cast` to float32); operators that only move or
//! select values (reshapes, slices, concatenation, max pooling, ReLU,
//! clipping) need no rounding. Graph inputs and outputs keep their types.

use super::qlinear_view::cast;
use crate::tensor::DType;
use onnx_ir::{GraphProto, Message, ModelProto, NodeProto, TensorProto};
use std::collections::{HashMap, HashSet};

const FLOAT: i32 = 1;
const FLOAT16: i32 = 10;

/// Operators whose float outputs are values of their inputs (moved,
/// selected or compared with constants of those values): exact in float16.
const EXACT: &[&str] = &[
    "Reshape",
    "Flatten",
    "Transpose",
    "Concat",
    "Slice",
    "Split",
    "Squeeze",
    "Unsqueeze",
    "Identity",
    "MaxPool",
    "Relu",
    "Clip",
    "Pad",
    "Gather",
    "Max",
    "Min",
    "Dropout",
    "Tile",
    "Expand",
    "GlobalMaxPool",
    "ReduceMax",
    "ReduceMin",
    "DepthToSpace",
    "SpaceToDepth",
];

/// Operators none of whose outputs are floats.
const NOT_FLOAT: &[&str] = &[
    "Shape",
    "Size",
    "ArgMax",
    "ArgMin",
    "NonZero",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "Not",
    "And",
    "Or",
    "Xor",
    "IsNaN",
    "IsInf",
    "QuantizeLinear",
];

/// The model `onnx` computing its float16 values as float32 rounded to
/// float16 after every operator (see the module); `None` when it holds no
/// float16 value or is not a model.
pub fn fp16_rounded(onnx: &[u8]) -> Option<Vec<u8>> {
    let mut model = ModelProto::parse_from_bytes(onnx).ok()?;
    let graph = model.graph.as_mut()?;
    if !rewrite(graph) {
        return None;
    }
    model.write_to_bytes().ok()
}

fn f16_to_f32(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

/// `t`, a float16 tensor, as float32 (exact).
fn widen(t: &mut TensorProto) {
    let bits: Vec<u16> = if !t.raw_data.is_empty() {
        t.raw_data
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect()
    } else {
        t.int32_data.iter().map(|v| *v as u16).collect()
    };
    let raw: Vec<u8> = bits.iter().flat_map(|b| f16_to_f32(*b).to_le_bytes()).collect();
    t.data_type = FLOAT;
    t.int32_data.clear();
    t.raw_data = raw.into();
}

fn elem_type(v: &onnx_ir::ValueInfoProto) -> Option<i32> {
    let t = v.type_.as_ref().filter(|t| t.has_tensor_type())?;
    Some(t.tensor_type().elem_type)
}

fn set_elem_type(v: &mut onnx_ir::ValueInfoProto, to: i32) {
    if let Some(t) = v.type_.as_mut().filter(|t| t.has_tensor_type()) {
        t.mut_tensor_type().elem_type = to;
    }
}

/// Whether `n` is a `Cast` to float16.
fn casts_to_half(n: &NodeProto) -> bool {
    n.op_type == "Cast" && n.attribute.iter().any(|a| a.name == "to" && a.i == i64::from(FLOAT16))
}

/// A name no value or node of the graph has yet.
struct Names(HashSet<String>);

impl Names {
    /// A `Cast` of `input` to `to` writing `output`, under a fresh node name.
    fn cast(&mut self, input: &str, to: DType, output: &str, meta: &NodeProto) -> NodeProto {
        let mut n = cast(input, to, output, meta);
        n.name = self.fresh(&format!("{output}.cast"));
        n
    }

    fn fresh(&mut self, base: &str) -> String {
        let name = (0..)
            .map(|i| {
                if i == 0 {
                    base.to_string()
                } else {
                    format!("{base}.{i}")
                }
            })
            .find(|n| !self.0.contains(n))
            .unwrap_or_default();
        self.0.insert(name.clone());
        name
    }
}

fn rewrite(graph: &mut GraphProto) -> bool {
    let any_half = graph.initializer.iter().any(|t| t.data_type == FLOAT16)
        || graph
            .input
            .iter()
            .chain(&graph.output)
            .any(|v| elem_type(v) == Some(FLOAT16))
        || graph.node.iter().any(casts_to_half);
    if !any_half {
        return false;
    }
    let mut r = Rounding {
        names: Names(
            graph
                .node
                .iter()
                .flat_map(|n| n.output.iter().chain(&n.input).cloned().chain([n.name.clone()]))
                .chain(graph.input.iter().map(|v| v.name.clone()))
                .chain(graph.initializer.iter().map(|t| t.name.clone()))
                .collect(),
        ),
        half: HashSet::new(),
        renamed: HashMap::new(),
        nodes: Vec::with_capacity(graph.node.len()),
    };
    for t in graph.initializer.iter_mut().filter(|t| t.data_type == FLOAT16) {
        widen(t);
        r.half.insert(t.name.clone());
    }
    for v in graph.input.iter().filter(|v| elem_type(v) == Some(FLOAT16)) {
        let wide = r.names.fresh(&format!("{}.f32", v.name));
        r.nodes
            .push(r.names.cast(&v.name, DType::F32, &wide, &NodeProto::new()));
        r.renamed.insert(v.name.clone(), wide.clone());
        r.half.insert(wide);
    }
    for n in std::mem::take(&mut graph.node) {
        r.node(n);
    }
    for v in graph.output.iter().filter(|v| elem_type(v) == Some(FLOAT16)) {
        r.half_output(&v.name);
    }
    graph.node = r.nodes;
    for v in graph.value_info.iter_mut() {
        if elem_type(v) == Some(FLOAT16) {
            set_elem_type(v, FLOAT);
        }
    }
    true
}

/// The graph being rewritten: the values that hold float16 numbers (kept
/// as float32), the float16 inputs renamed to their float32 copies, and
/// the nodes written so far.
struct Rounding {
    names: Names,
    half: HashSet<String>,
    renamed: HashMap<String, String>,
    nodes: Vec<NodeProto>,
}

impl Rounding {
    /// Writes `n` reading float32 values: a `Cast` to float16 becomes a
    /// round trip through float16, an operator computing on float16
    /// values has each output rounded, others are kept.
    fn node(&mut self, mut n: NodeProto) {
        for i in n.input.iter_mut() {
            if let Some(r) = self.renamed.get(i) {
                *i = r.clone();
            }
        }
        let mut widened = false;
        for a in n.attribute.iter_mut() {
            if let Some(t) = a.t.as_mut()
                && t.data_type == FLOAT16
            {
                widen(t);
                widened = true;
            }
        }
        let op_type = n.op_type.clone();
        let op = op_type.as_str();
        let reads_half = n.input.iter().any(|i| self.half.contains(i));
        if widened || (reads_half && EXACT.contains(&op)) {
            self.half.extend(n.output.iter().cloned());
        }
        if casts_to_half(&n) {
            let y = n.output[0].clone();
            let narrow = self.names.fresh(&format!("{y}.f16"));
            n.output[0] = narrow.clone();
            let back = self.names.cast(&narrow, DType::F32, &y, &n);
            self.nodes.push(n);
            self.nodes.push(back);
            self.half.insert(y);
            return;
        }
        if !reads_half || op == "Cast" || op == "Constant" || EXACT.contains(&op) || NOT_FLOAT.contains(&op) {
            self.nodes.push(n);
            return;
        }
        let meta = n.clone();
        let mut after = Vec::new();
        for slot in 0..n.output.len() {
            let y = n.output[slot].clone();
            if y.is_empty() {
                continue;
            }
            let wide = self.names.fresh(&format!("{y}.unrounded"));
            let narrow = self.names.fresh(&format!("{y}.f16"));
            n.output[slot] = wide.clone();
            after.push(self.names.cast(&wide, DType::F16, &narrow, &meta));
            after.push(self.names.cast(&narrow, DType::F32, &y, &meta));
            self.half.insert(y);
        }
        self.nodes.push(n);
        self.nodes.extend(after);
    }

    /// Keeps graph output `name` float16: the value computed under it
    /// takes a new name and a final `Cast` writes `name`.
    fn half_output(&mut self, name: &str) {
        let inner = self.names.fresh(&format!("{name}.f32"));
        for n in self.nodes.iter_mut() {
            for o in n.output.iter_mut().filter(|o| **o == name) {
                *o = inner.clone();
            }
            for i in n.input.iter_mut().filter(|i| **i == name) {
                *i = inner.clone();
            }
        }
        self.nodes
            .push(self.names.cast(&inner, DType::F16, name, &NodeProto::new()));
    }
}

#[cfg(test)]
#[path = "fp16_host_tests.rs"]
mod tests;
