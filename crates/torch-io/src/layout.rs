//! Where every node and constant of a graph lives in the generated PyTorch
//! module: a group per part of the model (`stem`, `stage2.branch_gpu`,
//! `stage2.merge`, `head`; `body` for a model without stage annotations),
//! a Python name per layer within its group, and a state-dict key per
//! constant the module holds.

use crate::TorchError;
use graph_ir::ops::{BinaryOp, Op};
use graph_ir::{Graph, NodeId, Outlet, keys};
use std::collections::{BTreeMap, HashMap, HashSet};

/// What a state-dict key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A parameter the optimizer updates.
    Learnable,
    /// A BatchNorm running mean or variance (a buffer).
    Running,
    /// A constant the module keeps but never trains (a buffer).
    Fixed,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Learnable => "learnable",
            Role::Running => "running",
            Role::Fixed => "fixed",
        }
    }
}

/// One tensor of the state dict and the graph constant it is.
#[derive(Clone, Debug)]
pub struct Key {
    /// The state-dict key (`stage2.branch_gpu.conv1.weight`).
    pub key: String,
    /// The constant node (the ONNX initializer).
    pub node: NodeId,
    pub shape: Vec<usize>,
    pub role: Role,
}

/// The module's layout.
pub struct Layout {
    /// Per computing node in graph order: its group path and layer name.
    pub place: HashMap<NodeId, (String, String)>,
    /// Group paths in first-use order.
    pub groups: Vec<String>,
    /// Per constant the module holds, its key; scalars and shape operands
    /// are written into `forward` instead.
    pub keys: Vec<Key>,
    /// Constant node → its key.
    pub key_of: HashMap<NodeId, String>,
}

/// `name` as a Python identifier.
pub fn ident(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    s = s.trim_matches('_').to_string();
    while s.contains("__") {
        s = s.replace("__", "_");
    }
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s = format!("n_{s}");
    }
    if PY_RESERVED.contains(&s.as_str()) {
        s.push('_');
    }
    s
}

const PY_RESERVED: &[&str] = &[
    "and", "as", "assert", "break", "class", "continue", "def", "del", "elif", "else", "except", "finally", "for",
    "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try",
    "while", "with", "yield", "None", "True", "False", "forward", "training",
];

/// The parameter names of a node's constant inputs, by input slot, for the
/// layers the module holds as `torch.nn` modules; other constants get the
/// name `c{slot}`.
fn slot_names(op: &Op) -> &'static [&'static str] {
    match op {
        Op::Conv(_) | Op::ConvTranspose(_) | Op::Gemm(_) => &["", "weight", "bias"],
        Op::BatchNorm(_) => &["", "weight", "bias", "running_mean", "running_var"],
        Op::LayerNorm(_) | Op::InstanceNorm(_) => &["", "weight", "bias"],
        Op::Binary(b) if b.op == BinaryOp::PRelu => &["", "slope"],
        _ => &[],
    }
}

/// Whether constant input `slot` of `op` is held by the module (a key), and
/// with which role; `None`: written into `forward` (a scalar or a shape).
fn held(g: &Graph, op: &Op, slot: usize, c: Outlet) -> Option<Role> {
    let t = g.const_tensor(c)?;
    match op {
        Op::BatchNorm(_) if slot >= 3 => Some(Role::Running),
        Op::Conv(_)
        | Op::ConvTranspose(_)
        | Op::Gemm(_)
        | Op::MatMul(_)
        | Op::BatchNorm(_)
        | Op::LayerNorm(_)
        | Op::InstanceNorm(_) => Some(Role::Learnable),
        Op::Binary(b) if b.op == BinaryOp::PRelu => Some(Role::Learnable),
        Op::Binary(b) if t.volume() > 1 && matches!(b.op, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul) => {
            Some(Role::Learnable)
        }
        _ if t.volume() > 1 && t.dtype().is_float() => Some(Role::Fixed),
        Op::Gather(_) if t.volume() > 1 => Some(Role::Fixed),
        _ => None,
    }
}

/// The layout of `g`; a node without a Python form is refused later by
/// the emitter, a constant read by two layers here.
pub fn layout(g: &Graph) -> Result<Layout, TorchError> {
    let order = g.topo_order().map_err(|e| TorchError::Graph(e.to_string()))?;
    let computing: Vec<NodeId> = order
        .iter()
        .copied()
        .filter(|id| !matches!(g.node(*id).op, Op::Input(_) | Op::Const(_)))
        .collect();
    let staged = computing
        .iter()
        .any(|id| g.node(*id).annotations.contains_key(keys::STAGE));
    if !staged && g.metadata.contains_key(keys::ORIGINAL_FINGERPRINT) {
        return Err(TorchError::Graph(
            "a branched model (it records the model it was branched from) with no stage annotations on its nodes: its stages and branches cannot be named (was it written by a tool that drops ONNX metadata_props?)".into(),
        ));
    }
    let mut seen_stage = false;
    let mut place = HashMap::new();
    let mut groups: Vec<String> = Vec::new();
    let mut used: HashMap<String, HashSet<String>> = HashMap::new();
    let branch_names = branch_names(g, &computing);
    for id in &computing {
        let n = g.node(*id);
        let group = match n.annotations.get(keys::STAGE) {
            Some(stage) => {
                seen_stage = true;
                let s = if stage.chars().all(|c| c.is_ascii_digit()) {
                    stage.clone()
                } else {
                    format!("_{}", ident(stage))
                };
                match n.annotations.get(keys::BRANCH) {
                    Some(b) => format!("stage{s}.{}", branch_names[&(stage.clone(), b.clone())]),
                    None => format!("stage{s}.merge"),
                }
            }
            None if !staged => "body".to_string(),
            None if seen_stage => "head".to_string(),
            None => "stem".to_string(),
        };
        if !groups.contains(&group) {
            groups.push(group.clone());
        }
        let names = used.entry(group.clone()).or_default();
        let base = ident(&n.name);
        let mut name = base.clone();
        let mut k = 1;
        while !names.insert(name.clone()) {
            k += 1;
            name = format!("{base}_{k}");
        }
        place.insert(*id, (group, name));
    }
    let mut keys = Vec::new();
    let mut key_of: HashMap<NodeId, String> = HashMap::new();
    let mut reader: BTreeMap<NodeId, String> = BTreeMap::new();
    for id in &computing {
        let n = g.node(*id);
        let (group, layer) = &place[id];
        let names = slot_names(&n.op);
        for (slot, o) in n.inputs.iter().enumerate() {
            let Some(role) = held(g, &n.op, slot, *o) else {
                continue;
            };
            if let Some(other) = reader.get(&o.node) {
                return Err(TorchError::Shared {
                    constant: g.node(o.node).name.clone(),
                    first: other.clone(),
                    second: n.name.clone(),
                });
            }
            reader.insert(o.node, n.name.clone());
            let param = match names.get(slot).filter(|s| !s.is_empty()) {
                Some(p) => format!("{layer}.{p}"),
                None => format!("{layer}_c{slot}"),
            };
            let key = format!("{group}.{param}");
            key_of.insert(o.node, key.clone());
            keys.push(Key {
                key,
                node: o.node,
                shape: g.node(o.node).outputs[0].shape.clone(),
                role,
            });
        }
    }
    Ok(Layout {
        place,
        groups,
        keys,
        key_of,
    })
}

/// Per (stage, branch) annotation, the branch's group name: `branch_gpu`
/// after its processor, `branch1_gpu` where two branches of a stage share
/// one.
fn branch_names(g: &Graph, computing: &[NodeId]) -> HashMap<(String, String), String> {
    let mut processor: BTreeMap<(String, String), String> = BTreeMap::new();
    for id in computing {
        let a = &g.node(*id).annotations;
        if let (Some(s), Some(b)) = (a.get(keys::STAGE), a.get(keys::BRANCH)) {
            let p = a.get(keys::PROCESSOR).cloned().unwrap_or_default();
            processor.entry((s.clone(), b.clone())).or_insert(p);
        }
    }
    let mut out = HashMap::new();
    for ((s, b), p) in &processor {
        let shared = processor.iter().filter(|((s2, _), p2)| s2 == s && p2 == &p).count() > 1;
        let name = match (p.is_empty(), shared) {
            (true, _) => format!("branch{}", ident(b)),
            (false, false) => format!("branch_{}", ident(p)),
            (false, true) => format!("branch{}_{}", ident(b), ident(p)),
        };
        out.insert((s.clone(), b.clone()), name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::ident;

    #[test]
    fn names_become_python_identifiers() {
        assert_eq!(ident("layer1.0.conv1"), "layer1_0_conv1");
        assert_eq!(ident("/features/0/Conv"), "features_0_Conv");
        assert_eq!(ident("3x"), "n_3x");
        assert_eq!(ident("lambda"), "lambda_");
        assert_eq!(ident("..."), "n_");
    }
}
