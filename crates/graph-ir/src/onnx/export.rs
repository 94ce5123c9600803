//! Writing a [`Graph`] as an ONNX model.

use super::ExportError;
use super::tensor_proto::tensor_to_proto;
use crate::graph::{Graph, NodeId, Outlet};
use crate::ops::*;
use crate::tensor::{Fact, Tensor};
use onnx_ir::{AttributeProto, AttributeType, GraphProto, Message, ModelProto, NodeProto, TypeProto, ValueInfoProto};
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

fn attr(name: &str) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.to_string();
    a
}

fn int(name: &str, v: i64) -> AttributeProto {
    let mut a = attr(name);
    a.type_ = AttributeType::INT.into();
    a.i = v;
    a
}

pub(super) fn ints(name: &str, v: impl IntoIterator<Item = i64>) -> AttributeProto {
    let mut a = attr(name);
    a.type_ = AttributeType::INTS.into();
    a.ints = v.into_iter().collect();
    a
}

fn float(name: &str, v: f32) -> AttributeProto {
    let mut a = attr(name);
    a.type_ = AttributeType::FLOAT.into();
    a.f = v;
    a
}

fn string(name: &str, v: &str) -> AttributeProto {
    let mut a = attr(name);
    a.type_ = AttributeType::STRING.into();
    a.s = v.as_bytes().to_vec().into();
    a
}

/// Whether `pool` must be written with `ceil_mode`: only where rounding
/// down would give fewer windows than it has. Where a ceiling's last
/// window would start in the end padding, ONNX drops it (and opset-17 shape
/// inference does not), leaving the floor's count: written without
/// `ceil_mode`, the windows and their divisors are the same.
fn ceil_needed(pool: &Pool, x: Option<&Fact>, out: &Fact) -> bool {
    let Some(x) = x.filter(|x| x.rank() == 4 && pool.ceil_mode) else {
        return pool.ceil_mode;
    };
    (0..2).any(|i| {
        let pads = (pool.pads[i], pool.pads[i + 2]);
        let floor = crate::ops::window_out(
            x.shape[2 + i],
            pool.kernel[i],
            pool.strides[i],
            pool.dilations[i],
            pads,
            false,
        );
        floor.map_or(true, |f| f != out.shape[2 + i])
    })
}

fn usizes(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
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
        let refuse = |reason: &str| ExportError::Node {
            node: node.name.clone(),
            op: node.op.name(),
            opset: EXPORT_OPSET,
            reason: reason.to_string(),
        };
        let a = &mut p.attribute;
        match &node.op {
            Op::Input(_) | Op::Const(_) => unreachable!("handled above"),
            Op::Conv(c) => {
                let w = graph.fact(node.inputs[1]).expect("checked graph");
                a.push(ints("kernel_shape", usizes(&w.shape[2..])));
                a.push(ints("strides", usizes(&c.strides)));
                a.push(ints("pads", usizes(&c.pads)));
                a.push(ints("dilations", usizes(&c.dilations)));
                a.push(int("group", c.group as i64));
            }
            Op::BatchNorm(b) => {
                a.push(float("epsilon", b.epsilon));
                a.push(float("momentum", b.momentum));
            }
            Op::Unary(u) => match u.op {
                UnaryOp::HardSigmoid { alpha, beta } => {
                    a.push(float("alpha", alpha));
                    a.push(float("beta", beta));
                }
                UnaryOp::LeakyRelu { alpha } | UnaryOp::Elu { alpha } => a.push(float("alpha", alpha)),
                UnaryOp::Selu { alpha, gamma } => {
                    a.push(float("alpha", alpha));
                    a.push(float("gamma", gamma));
                }
                UnaryOp::Clip { min, max } => {
                    let name = node.name.clone();
                    let min = min.map(|v| self.operand(&name, "min", Tensor::from_f32([], &[v])));
                    let max = max.map(|v| self.operand(&name, "max", Tensor::from_f32([], &[v])));
                    match (min, max) {
                        (Some(lo), Some(hi)) => p.input.extend([lo, hi]),
                        (Some(lo), None) => p.input.push(lo),
                        (None, Some(hi)) => p.input.extend([String::new(), hi]),
                        (None, None) => {}
                    }
                }
                _ => {}
            },
            Op::Binary(_) | Op::GlobalAveragePool(_) | Op::GlobalMaxPool(_) | Op::MatMul(_) => {}
            Op::LayerNorm(n) => {
                a.push(int("axis", n.axis));
                a.push(float("epsilon", n.epsilon));
            }
            Op::DepthToSpace(d) => {
                a.push(int("blocksize", d.block as i64));
                a.push(string("mode", d.order.onnx_name()));
            }
            Op::SpaceToDepth(s) => a.push(int("blocksize", s.block as i64)),
            Op::QuantizeLinear(q) => a.push(int("axis", q.axis)),
            Op::DequantizeLinear(d) => a.push(int("axis", d.axis)),
            Op::Cast(c) => a.push(int("to", c.to.onnx_code() as i64)),
            Op::Concat(c) => a.push(int("axis", c.axis)),
            Op::Softmax(sm) => a.push(int("axis", sm.axis)),
            Op::InstanceNorm(n) => a.push(float("epsilon", n.epsilon)),
            Op::Lrn(l) => {
                a.push(int("size", l.size as i64));
                a.push(float("alpha", l.alpha));
                a.push(float("beta", l.beta));
                a.push(float("bias", l.bias));
            }
            Op::Split(s) => {
                a.push(int("axis", s.axis));
                let sizes: Vec<i64> = usizes(&s.sizes);
                let name = self.operand(&node.name, "split", Tensor::from_i64([sizes.len()], &sizes));
                p.input.push(name);
            }
            Op::Slice(s) => {
                for (what, v) in [
                    ("starts", &s.starts),
                    ("ends", &s.ends),
                    ("axes", &s.axes),
                    ("steps", &s.steps),
                ] {
                    let name = self.operand(&node.name, what, Tensor::from_i64([v.len()], v));
                    p.input.push(name);
                }
            }
            Op::Reshape(r) => {
                if r.allowzero {
                    a.push(int("allowzero", 1));
                }
                let name = self.operand(&node.name, "shape", Tensor::from_i64([r.shape.len()], &r.shape));
                p.input.push(name);
            }
            Op::Flatten(f) => a.push(int("axis", f.axis)),
            Op::Transpose(t) => a.push(ints("perm", usizes(&t.perm))),
            Op::Pool(pool) => {
                a.push(ints("kernel_shape", usizes(&pool.kernel)));
                a.push(ints("strides", usizes(&pool.strides)));
                a.push(ints("pads", usizes(&pool.pads)));
                a.push(int(
                    "ceil_mode",
                    ceil_needed(pool, graph.fact(node.inputs[0]), &node.outputs[0]) as i64,
                ));
                match pool.kind {
                    PoolKind::Max => a.push(ints("dilations", usizes(&pool.dilations))),
                    PoolKind::Average { count_include_pad } => {
                        if pool.dilations != [1, 1] {
                            return Err(refuse("AveragePool dilations need opset 19"));
                        }
                        a.push(int("count_include_pad", count_include_pad as i64));
                    }
                }
            }
            Op::Reduce(r) => {
                if !r.axes.is_empty() {
                    match r.kind {
                        ReduceKind::Mean => a.push(ints("axes", r.axes.iter().copied())),
                        ReduceKind::Sum => {
                            let name = node.name.clone();
                            let axes = self.operand(&name, "axes", Tensor::from_i64([r.axes.len()], &r.axes));
                            p.input.push(axes);
                        }
                    }
                }
                a.push(int("keepdims", r.keepdims as i64));
            }
            Op::ConvTranspose(c) => {
                let w = graph.fact(node.inputs[1]).expect("checked graph");
                a.push(ints("kernel_shape", usizes(&w.shape[2..])));
                a.push(ints("strides", usizes(&c.strides)));
                a.push(ints("pads", usizes(&c.pads)));
                a.push(ints("dilations", usizes(&c.dilations)));
                a.push(ints("output_padding", usizes(&c.output_padding)));
                a.push(int("group", c.group as i64));
            }
            Op::Tile(t) => {
                let name = node.name.clone();
                let reps = usizes(&t.repeats);
                let reps = self.operand(&name, "repeats", Tensor::from_i64([reps.len()], &reps));
                p.input.push(reps);
            }
            Op::Gather(gt) => a.push(int("axis", gt.axis)),
            Op::Resize(r) => {
                let name = node.name.clone();
                a.push(string("coordinate_transformation_mode", r.coord.onnx_name()));
                match r.mode {
                    ResizeMode::Nearest(m) => {
                        a.push(string("mode", "nearest"));
                        a.push(string("nearest_mode", m.onnx_name()));
                    }
                    ResizeMode::Linear => a.push(string("mode", "linear")),
                    ResizeMode::Cubic {
                        a: coeff,
                        exclude_outside,
                    } => {
                        a.push(string("mode", "cubic"));
                        a.push(float("cubic_coeff_a", coeff));
                        a.push(int("exclude_outside", exclude_outside as i64));
                    }
                }
                p.input.push(String::new());
                match r.target {
                    ResizeTarget::Scales([h, w]) => {
                        let scales = self.operand(&name, "scales", Tensor::from_f32([4], &[1.0, 1.0, h, w]));
                        p.input.push(scales);
                    }
                    ResizeTarget::Sizes(_) => {
                        let out = &node.outputs[0].shape;
                        let sizes = usizes(out);
                        let sizes = self.operand(&name, "sizes", Tensor::from_i64([4], &sizes));
                        p.input.extend([String::new(), sizes]);
                    }
                }
            }
            Op::Gemm(gm) => {
                a.push(float("alpha", gm.alpha));
                a.push(float("beta", gm.beta));
                a.push(int("transA", gm.trans_a as i64));
                a.push(int("transB", gm.trans_b as i64));
            }
            Op::Pad(pd) => {
                a.push(string("mode", pd.mode.onnx_name()));
                let name = node.name.clone();
                let pads = self.operand(&name, "pads", Tensor::from_i64([pd.pads.len()], &pd.pads));
                p.input.push(pads);
                if pd.mode == PadMode::Constant {
                    let v = self.operand(&name, "value", Tensor::from_f32([], &[pd.value]));
                    p.input.push(v);
                }
            }
        }
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
