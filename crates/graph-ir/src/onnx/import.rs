//! Reading an ONNX model into a [`Graph`].

use super::ImportError;
use super::import_ops::lower;
use super::node_ctx::{Lowered, NodeCtx, Src};
use super::tensor_proto::tensor_from_proto;
use crate::graph::{Graph, NodeId, Outlet};
use crate::tensor::{DType, Fact};
use bytes::Bytes;
use onnx_ir::{Message, ModelProto, NodeProto, ValueInfoProto};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::str::FromStr;

/// The shape to give a graph input, by name or (unnamed) for the first input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputShape {
    pub name: Option<String>,
    pub dims: Vec<usize>,
}

impl FromStr for InputShape {
    type Err = String;

    /// Parses `1,3,224,224` or `input:1,3,224,224` (`x` also separates dims).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, dims) = match s.rsplit_once(':') {
            Some((n, d)) => (Some(n.to_string()), d),
            None => (None, s),
        };
        let dims = dims
            .split([',', 'x'])
            .map(|d| {
                d.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|&v| v > 0)
                    .ok_or_else(|| format!("`{d}` in input shape `{s}` is not a positive integer"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(InputShape { name, dims })
    }
}

/// How to import a model.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Shapes overriding the model's declared input shapes.
    pub input_shapes: Vec<InputShape>,
    /// Fill weights that have no data with this seed (structure-only models).
    pub random_weights: Option<u64>,
}

/// Reads and imports an ONNX file: a regular file of at most
/// [`MAX_MODEL_BYTES`](crate::plain_file::MAX_MODEL_BYTES) (a FIFO, device
/// or directory is refused before anything is read).
pub fn import_file(path: impl AsRef<Path>, options: &ImportOptions) -> Result<Graph, ImportError> {
    use crate::plain_file::{Links, MAX_MODEL_BYTES, read_plain};
    let path = path.as_ref();
    let bytes = read_plain(path, MAX_MODEL_BYTES, Links::Follow)?;
    import_bytes(Bytes::from(bytes), &path.display().to_string(), options)
}

/// The newest default-domain opset the importer reads: that of the ONNX
/// release its per-operator tests are built from (onnx 1.23).
pub const NEWEST_OPSET: i64 = 28;

/// The newest IR version the importer reads: that of onnx 1.23.
pub const NEWEST_IR_VERSION: i64 = 14;

/// The default-domain opset of a model's opset imports, after refusing a
/// version below 1 in any domain, a domain declared twice (`""` and
/// `ai.onnx` are one domain) and a default opset newer than [`NEWEST_OPSET`].
fn default_opset<'a>(imports: impl IntoIterator<Item = (&'a str, i64)>) -> Result<Option<i64>, ImportError> {
    let domain_of = |d: &str| {
        if d.is_empty() {
            "ai.onnx".to_string()
        } else {
            d.to_string()
        }
    };
    let mut seen: HashMap<String, i64> = HashMap::new();
    for (domain, version) in imports {
        let domain = domain_of(domain);
        let refuse = |reason: String| ImportError::Opset {
            domain: domain.clone(),
            version,
            reason,
        };
        if version < 1 {
            return Err(refuse("is not a version (opset versions start at 1)".into()));
        }
        if let Some(first) = seen.get(&domain) {
            return Err(refuse(format!(
                "is declared beside version {first}; a model imports each domain once"
            )));
        }
        seen.insert(domain, version);
    }
    let Some(&opset) = seen.get("ai.onnx") else {
        return Ok(None);
    };
    if opset > NEWEST_OPSET {
        return Err(ImportError::Model {
            reason: format!(
                "opset {opset} is newer than this importer knows (up to {NEWEST_OPSET}); operators may have changed meaning since: export the model at opset {NEWEST_OPSET} or older"
            ),
        });
    }
    Ok(Some(opset))
}

/// Fails on the first name of the graph (node, value, input, output,
/// initializer) holding a control character such as a newline: every
/// message that names it would break across lines. The name is shown
/// escaped.
fn printable_names(g: &onnx_ir::GraphProto) -> Result<(), ImportError> {
    let bad = |what: &str, name: &str| -> Result<(), ImportError> {
        if name.chars().any(char::is_control) {
            return Err(ImportError::Model {
                reason: format!("{what} name {name:?} holds a control character; names must be printable"),
            });
        }
        Ok(())
    };
    for vi in g.input.iter().chain(&g.output) {
        bad("graph value", &vi.name)?;
    }
    for t in &g.initializer {
        bad("initializer", &t.name)?;
    }
    for n in &g.node {
        bad("node", &n.name)?;
        for v in n.input.iter().chain(&n.output) {
            bad("tensor", v)?;
        }
    }
    Ok(())
}

/// Imports an ONNX model from its serialized bytes; `label` names the source in errors.
pub fn import_bytes(bytes: Bytes, label: &str, options: &ImportOptions) -> Result<Graph, ImportError> {
    let (model, opset) = decode(&bytes, label)?;
    let proto = model.graph.as_ref().expect("checked above");
    printable_names(proto)?;
    let mut imp = Importer {
        graph: Graph::new(if proto.name.is_empty() {
            "model"
        } else {
            proto.name.as_str()
        }),
        values: HashMap::new(),
        opset,
        fold_budget: std::cell::Cell::new(super::fold::fold_budget(bytes.len())),
    };
    for p in &model.metadata_props {
        imp.graph.metadata.insert(p.key.clone(), p.value.clone());
    }
    imp.inputs(proto, options)?;
    imp.initializers(proto)?;
    let known: HashSet<&str> = imp.values.keys().map(|s| s.as_str()).collect();
    for i in topo_order(&proto.node, &known)? {
        imp.node(&proto.node[i], i)?;
    }
    let outputs = imp.outputs(proto)?;
    let mut graph = imp.graph;
    graph.set_outputs(outputs)?;
    graph.prune_dead();
    if let Some(seed) = options.random_weights {
        graph.fill_missing_weights(seed);
    }
    graph.check()?;
    Ok(graph)
}

/// The model in `bytes` and the opset of its default domain; refuses bytes
/// that are not ONNX and IR versions newer than [`NEWEST_IR_VERSION`].
fn decode(bytes: &Bytes, label: &str) -> Result<(ModelProto, i64), ImportError> {
    let not_onnx = |reason: String| ImportError::NotOnnx {
        path: label.to_string(),
        reason,
    };
    let model = ModelProto::parse_from_tokio_bytes(bytes).map_err(|e| {
        not_onnx(format!(
            "protobuf decoding failed: {e}; the file may be truncated or not ONNX"
        ))
    })?;
    if model.ir_version <= 0 || model.graph.is_none() || model.opset_import.is_empty() {
        return Err(not_onnx("no IR version, graph or opset import".into()));
    }
    if model.ir_version > NEWEST_IR_VERSION {
        return Err(ImportError::IrVersion {
            version: model.ir_version,
            newest: NEWEST_IR_VERSION,
        });
    }
    let opset = default_opset(model.opset_import.iter().map(|o| (o.domain.as_str(), o.version)))?
        .ok_or_else(|| not_onnx("no opset for the default ONNX domain".into()))?;
    Ok((model, opset))
}

/// The static fact of a graph input: the declared shape with a dynamic batch
/// fixed to 1, unless an `--input-shape` gives it.
fn input_fact(vi: &ValueInfoProto, index: usize, options: &ImportOptions) -> Result<Fact, ImportError> {
    let err = |reason: String| ImportError::Input {
        name: vi.name.clone(),
        reason,
    };
    let tt = vi
        .type_
        .as_ref()
        .filter(|t| t.has_tensor_type())
        .map(|t| t.tensor_type())
        .ok_or_else(|| err("is not a tensor".into()))?;
    let dtype =
        DType::from_onnx(tt.elem_type).ok_or_else(|| err(format!("element type {} is not supported", tt.elem_type)))?;
    let declared: Vec<Option<i64>> = tt
        .shape
        .as_ref()
        .map(|s| s.dim.iter().map(|d| d.has_dim_value().then(|| d.dim_value())).collect())
        .ok_or_else(|| err("has no declared shape; give one with --input-shape".into()))?;
    let given = options
        .input_shapes
        .iter()
        .find(|s| s.name.as_deref() == Some(vi.name.as_str()))
        .or_else(|| {
            options
                .input_shapes
                .iter()
                .find(|s| s.name.is_none())
                .filter(|_| index == 0)
        });
    if let Some(g) = given {
        if g.dims.len() != declared.len() {
            return Err(err(format!(
                "--input-shape {:?} has rank {}, the model declares rank {}",
                g.dims,
                g.dims.len(),
                declared.len()
            )));
        }
        return Ok(Fact::new(dtype, g.dims.clone()));
    }
    let dims = declared
        .iter()
        .enumerate()
        .map(|(i, d)| match (i, d) {
            (_, Some(v)) if *v > 0 => Ok(*v as usize),
            (i, Some(v)) => Err(err(format!(
                "dimension {i} is declared {v}, which is not a size; fix it with --input-shape {}:...",
                vi.name
            ))),
            (0, None) => Ok(1),
            (i, None) => Err(err(format!(
                "dimension {i} is dynamic; fix it with --input-shape {}:...",
                vi.name
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Fact::new(dtype, dims))
}

/// The name the importer gives the file's node `index`: its own, or
/// `<op_type>_<index>` when it has none.
fn node_label(node: &NodeProto, index: usize) -> String {
    if node.name.is_empty() {
        format!("{}_{index}", node.op_type)
    } else {
        node.name.clone()
    }
}

/// Node indices in a dependency order (stable with respect to the file's
/// order); reports dangling inputs and cycles by node name.
fn topo_order(nodes: &[NodeProto], known: &HashSet<&str>) -> Result<Vec<usize>, ImportError> {
    let display = |i: usize| node_label(&nodes[i], i);
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            let other = match producer.insert(o.as_str(), i) {
                Some(p) => format!("node `{}` writes it too", display(p)),
                None if known.contains(o.as_str()) => "it is a graph input or initializer".to_string(),
                None => continue,
            };
            return Err(ImportError::Node {
                node: display(i),
                op_type: n.op_type.clone(),
                reason: format!("writes tensor `{o}`, and {other} (ONNX allows one writer per tensor)"),
            });
        }
    }
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for input in n.input.iter().filter(|s| !s.is_empty()) {
            match producer.get(input.as_str()) {
                Some(&p) => {
                    deps[i].push(p);
                    users[p].push(i);
                }
                None if known.contains(input.as_str()) => {}
                None => {
                    return Err(ImportError::DanglingInput {
                        node: display(i),
                        op_type: n.op_type.clone(),
                        input: input.clone(),
                    });
                }
            }
        }
    }
    let mut pending: Vec<usize> = deps.iter().map(|d| d.len()).collect();
    let mut ready: std::collections::BTreeSet<usize> = (0..nodes.len()).filter(|&i| pending[i] == 0).collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &u in &users[i] {
            pending[u] -= 1;
            if pending[u] == 0 {
                ready.insert(u);
            }
        }
    }
    if order.len() < nodes.len() {
        let stuck = (0..nodes.len()).find(|&i| pending[i] > 0).expect("a node is left");
        return Err(ImportError::Cycle {
            node: display(stuck),
            op_type: nodes[stuck].op_type.clone(),
        });
    }
    Ok(order)
}

struct Importer {
    graph: Graph,
    values: HashMap<String, Outlet>,
    opset: i64,
    fold_budget: std::cell::Cell<usize>,
}

impl Importer {
    /// The graph's declared inputs (those no initializer defines), with
    /// their facts; refuses an `--input-shape` naming no input.
    fn inputs(&mut self, proto: &onnx_ir::GraphProto, options: &ImportOptions) -> Result<(), ImportError> {
        let initializers: HashSet<&str> = proto.initializer.iter().map(|t| t.name.as_str()).collect();
        let declared: Vec<&ValueInfoProto> = proto
            .input
            .iter()
            .filter(|i| !initializers.contains(i.name.as_str()))
            .collect();
        for (k, vi) in declared.iter().enumerate() {
            let fact = input_fact(vi, k, options)?;
            let outlet = self.graph.add_input(vi.name.clone(), fact)?;
            for p in &vi.metadata_props {
                self.graph.annotate(outlet.node, p.key.clone(), p.value.clone());
            }
            self.values.insert(vi.name.clone(), outlet);
        }
        for shape in &options.input_shapes {
            if let Some(n) = &shape.name
                && !declared.iter().any(|vi| &vi.name == n)
            {
                return Err(ImportError::Input {
                    name: n.clone(),
                    reason: "--input-shape names an input the model does not have".into(),
                });
            }
        }
        Ok(())
    }

    /// The graph's initializers as constants.
    fn initializers(&mut self, proto: &onnx_ir::GraphProto) -> Result<(), ImportError> {
        for t in &proto.initializer {
            let tensor = tensor_from_proto(t)?;
            let name = self.graph.unique_name(&t.name);
            let outlet = self.graph.add_const(name, tensor)?;
            for p in &t.metadata_props {
                self.graph.annotate(outlet.node, p.key.clone(), p.value.clone());
            }
            self.values.insert(t.name.clone(), outlet);
        }
        Ok(())
    }

    /// The graph's outputs by name; refuses one no imported node produces.
    fn outputs(&self, proto: &onnx_ir::GraphProto) -> Result<Vec<(String, Outlet)>, ImportError> {
        let mut outputs = Vec::new();
        for o in &proto.output {
            let Some(outlet) = self.values.get(&o.name).copied() else {
                let writer = proto.node.iter().enumerate().find_map(|(i, n)| {
                    let k = n.output.iter().position(|x| *x == o.name)?;
                    Some((k, i, n))
                });
                return Err(match writer {
                    Some((k, i, n)) => ImportError::Node {
                        node: node_label(n, i),
                        op_type: n.op_type.clone(),
                        reason: format!(
                            "graph output `{}` is its output {k}, which the importer does not produce (only its first output is supported)",
                            o.name
                        ),
                    },
                    None => ImportError::Output { name: o.name.clone() },
                });
            };
            outputs.push((o.name.clone(), outlet));
        }
        Ok(outputs)
    }

    fn node(&mut self, proto: &NodeProto, index: usize) -> Result<(), ImportError> {
        let name = self.graph.unique_name(&node_label(proto, index));
        let inputs = proto
            .input
            .iter()
            .map(|i| {
                if i.is_empty() {
                    None
                } else {
                    self.values.get(i).copied()
                }
            })
            .collect();
        let ctx = NodeCtx {
            proto,
            name: name.clone(),
            inputs,
            opset: self.opset,
            fold_budget: &self.fold_budget,
        };
        let unsupported = || ImportError::Unsupported {
            op_type: proto.op_type.clone(),
            node: name.clone(),
            domain: if proto.domain.is_empty() {
                "ai.onnx".into()
            } else {
                proto.domain.clone()
            },
            opset: self.opset,
        };
        if !(proto.domain.is_empty() || proto.domain == "ai.onnx") {
            return Err(unsupported());
        }
        let lowered = lower(&ctx, &self.graph)?.ok_or_else(unsupported)?;
        let mut created = None;
        let outlets: Vec<Outlet> = match lowered {
            Lowered::Alias(o) => o,
            Lowered::Consts(ts) => {
                let mut outs = Vec::new();
                for (t, out_name) in ts.into_iter().zip(&proto.output) {
                    let n = self
                        .graph
                        .unique_name(if out_name.is_empty() { &name } else { out_name });
                    outs.push(self.graph.add_const(n, t)?);
                }
                outs
            }
            Lowered::Op(op, inputs) => {
                let id = self.graph.add_node(name, op, &inputs)?;
                created = Some(id);
                (0..self.graph.node(id).outputs.len()).map(|s| id.out(s)).collect()
            }
            Lowered::Chain(steps) => {
                let last = steps.len().saturating_sub(1);
                let mut ids = Vec::with_capacity(steps.len());
                for (i, step) in steps.into_iter().enumerate() {
                    let step_name = if i == last {
                        name.clone()
                    } else {
                        self.graph.unique_name(&format!("{name}.{}", step.suffix))
                    };
                    let mut inputs = Vec::with_capacity(step.inputs.len());
                    for (k, src) in step.inputs.into_iter().enumerate() {
                        inputs.push(match src {
                            Src::Value(o) => o,
                            Src::Step(j) => NodeId::out(ids[j], 0),
                            Src::Const(t) => {
                                let n = self.graph.unique_name(&format!("{name}.{}.in{k}", step.suffix));
                                self.graph.add_const(n, t)?
                            }
                        });
                    }
                    ids.push(self.graph.add_node(step_name, step.op, &inputs)?);
                }
                let id = *ids.last().ok_or_else(|| ImportError::Node {
                    node: name.clone(),
                    op_type: proto.op_type.clone(),
                    reason: "lowered to no node".into(),
                })?;
                created = Some(id);
                (0..self.graph.node(id).outputs.len()).map(|s| id.out(s)).collect()
            }
        };
        for (value, outlet) in proto.output.iter().zip(outlets) {
            if !value.is_empty() {
                self.values.insert(value.clone(), outlet);
            }
        }
        if let Some(id) = created {
            for p in &proto.metadata_props {
                self.graph.annotate(id, p.key.clone(), p.value.clone());
            }
        }
        Ok(())
    }
}
