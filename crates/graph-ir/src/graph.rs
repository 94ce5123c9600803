//! The graph: named nodes with typed ops, per-output facts, wired from a
//! producer's output slot to a consumer's input slot.

use crate::error::GraphError;
use crate::ops::Op;
use crate::tensor::{Fact, Tensor};
use petgraph::Direction;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::{EdgeRef, NodeIndexable};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

/// The largest value (in bytes) a node may produce; larger facts are
/// rejected at wiring time so sizes and costs never overflow.
pub const MAX_VALUE_BYTES: usize = 1 << 40;

/// Identifies a node of one graph. Ids are never reused within a graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u32);

impl NodeId {
    fn index(self) -> NodeIndex {
        NodeIndex::new(self.0 as usize)
    }

    fn from_index(i: NodeIndex) -> NodeId {
        NodeId(i.index() as u32)
    }
}

/// Output `slot` of node `node`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Outlet {
    pub node: NodeId,
    pub slot: usize,
}

impl NodeId {
    /// The node's output `slot`.
    pub fn out(self, slot: usize) -> Outlet {
        Outlet { node: self, slot }
    }
}

/// A node: a named operator, the outlets it reads, the facts it produces and
/// free-form annotations (processor, meeting point, stage, branch, ...).
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: Op,
    pub inputs: Vec<Outlet>,
    pub outputs: Vec<Fact>,
    pub annotations: BTreeMap<String, String>,
}

/// Edge weight: the consumer's input slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Wire {
    to_slot: usize,
}

/// A dataflow graph of typed operators with static facts on every value.
///
/// Every node is shape-inferred when it is added; [`Graph::check`] re-infers
/// all of them. Weights are [`Op::Const`] nodes owned by the graph.
#[derive(Clone, Debug)]
pub struct Graph {
    pub name: String,
    g: StableDiGraph<Node, Wire>,
    names: HashMap<String, NodeId>,
    inputs: Vec<NodeId>,
    outputs: Vec<(String, Outlet)>,
    /// Model-level key/value metadata (kept through ONNX round trips).
    pub metadata: BTreeMap<String, String>,
}

impl Graph {
    pub fn new(name: impl Into<String>) -> Graph {
        Graph {
            name: name.into(),
            g: StableDiGraph::default(),
            names: HashMap::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            metadata: BTreeMap::new(),
        }
    }

    /// Adds a graph input with the given fact.
    pub fn add_input(&mut self, name: impl Into<String>, fact: Fact) -> Result<Outlet, GraphError> {
        let id = self.add_node(name, Op::Input(fact), &[])?;
        self.inputs.push(id);
        Ok(id.out(0))
    }

    /// Adds a constant (weight) node owning `tensor`.
    pub fn add_const(&mut self, name: impl Into<String>, tensor: Tensor) -> Result<Outlet, GraphError> {
        Ok(self.add_node(name, Op::Const(tensor), &[])?.out(0))
    }

    /// Adds a node reading `inputs`, inferring its output facts.
    /// Fails, naming the node, if the name is taken, an input does not exist
    /// or the op rejects its input facts.
    pub fn add_node(&mut self, name: impl Into<String>, op: Op, inputs: &[Outlet]) -> Result<NodeId, GraphError> {
        let name = name.into();
        if self.names.contains_key(&name) {
            return Err(GraphError::DuplicateName { name });
        }
        let outputs = self.infer_with(&name, &op, inputs)?;
        let node = Node {
            name: name.clone(),
            op,
            inputs: inputs.to_vec(),
            outputs,
            annotations: BTreeMap::new(),
        };
        let id = NodeId::from_index(self.g.add_node(node));
        for (to_slot, o) in inputs.iter().enumerate() {
            self.g.add_edge(o.node.index(), id.index(), Wire { to_slot });
        }
        self.names.insert(name, id);
        Ok(id)
    }

    fn infer_with(&self, name: &str, op: &Op, inputs: &[Outlet]) -> Result<Vec<Fact>, GraphError> {
        let facts = inputs
            .iter()
            .enumerate()
            .map(|(slot, o)| {
                self.fact(*o).ok_or_else(|| GraphError::BadOutlet {
                    node: name.to_string(),
                    slot,
                    outlet_slot: o.slot,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let err = |reason: String| GraphError::Inference {
            node: name.to_string(),
            op: op.name(),
            reason,
        };
        let outputs = op.infer(&facts).map_err(err)?;
        for f in &outputs {
            if f.checked_bytes().is_none_or(|b| b > MAX_VALUE_BYTES) {
                return Err(err(format!("output {f} would exceed {} GiB", MAX_VALUE_BYTES >> 30)));
            }
        }
        Ok(outputs)
    }

    /// The node with this id, if it exists.
    pub fn get(&self, id: NodeId) -> Option<&Node> {
        self.g.node_weight(id.index())
    }

    /// The node with this id. Ids come from this graph, so a missing one is a
    /// programming error.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.g[id.index()]
    }

    /// Looks a node up by name.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.names.get(name).copied()
    }

    /// The fact of an outlet, if the outlet exists.
    pub fn fact(&self, o: Outlet) -> Option<&Fact> {
        self.get(o.node)?.outputs.get(o.slot)
    }

    /// The tensor behind an outlet produced by a [`Op::Const`] node.
    pub fn const_tensor(&self, o: Outlet) -> Option<&Tensor> {
        match &self.get(o.node)?.op {
            Op::Const(t) => Some(t),
            _ => None,
        }
    }

    /// Number of nodes (constants and inputs included).
    pub fn len(&self) -> usize {
        self.g.node_count()
    }

    pub fn is_empty(&self) -> bool {
        self.g.node_count() == 0
    }

    /// Graph inputs in declaration order.
    pub fn inputs(&self) -> &[NodeId] {
        &self.inputs
    }

    /// Graph outputs in declaration order, with their names.
    pub fn outputs(&self) -> &[(String, Outlet)] {
        &self.outputs
    }

    /// Declares the graph outputs.
    pub fn set_outputs(&mut self, outputs: Vec<(String, Outlet)>) -> Result<(), GraphError> {
        for (name, o) in &outputs {
            if self.fact(*o).is_none() {
                return Err(GraphError::BadOutput { name: name.clone() });
            }
        }
        self.outputs = outputs;
        Ok(())
    }

    /// All node ids in insertion order.
    pub fn node_ids(&self) -> Vec<NodeId> {
        let mut ids: Vec<NodeId> = self.g.node_indices().map(NodeId::from_index).collect();
        ids.sort_unstable();
        ids
    }

    /// Consumers of an outlet as `(node, input slot)`, sorted.
    pub fn consumers(&self, o: Outlet) -> Vec<(NodeId, usize)> {
        let mut out: Vec<(NodeId, usize)> = self
            .g
            .edges_directed(o.node.index(), Direction::Outgoing)
            .map(|e| (NodeId::from_index(e.target()), e.weight().to_slot))
            .filter(|&(n, slot)| self.node(n).inputs[slot] == o)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Nodes that read any output of `id`, sorted and deduplicated.
    pub fn successors(&self, id: NodeId) -> Vec<NodeId> {
        let mut out: Vec<NodeId> = self
            .g
            .neighbors_directed(id.index(), Direction::Outgoing)
            .map(NodeId::from_index)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether an outlet is a graph output.
    pub fn is_output(&self, o: Outlet) -> bool {
        self.outputs.iter().any(|(_, x)| *x == o)
    }

    /// A deterministic topological order (ties broken by insertion order).
    pub fn topo_order(&self) -> Result<Vec<NodeId>, GraphError> {
        let mut indegree: HashMap<NodeId, usize> = HashMap::new();
        for id in self.node_ids() {
            indegree.insert(id, self.g.edges_directed(id.index(), Direction::Incoming).count());
        }
        let mut ready: BinaryHeap<Reverse<NodeId>> = indegree
            .iter()
            .filter(|(_, d)| **d == 0)
            .map(|(id, _)| Reverse(*id))
            .collect();
        let mut order = Vec::with_capacity(self.len());
        while let Some(Reverse(id)) = ready.pop() {
            order.push(id);
            for e in self.g.edges_directed(id.index(), Direction::Outgoing) {
                let t = NodeId::from_index(e.target());
                let d = indegree.get_mut(&t).expect("edge target is a node");
                *d -= 1;
                if *d == 0 {
                    ready.push(Reverse(t));
                }
            }
        }
        if order.len() != self.len() {
            let stuck = self
                .node_ids()
                .into_iter()
                .find(|id| indegree[id] > 0)
                .expect("some node is left");
            return Err(GraphError::Cycle {
                node: self.node(stuck).name.clone(),
            });
        }
        Ok(order)
    }

    /// The nodes that compute (every node but inputs and constants), in
    /// [`Graph::topo_order`].
    pub fn compute_order(&self) -> Result<Vec<NodeId>, GraphError> {
        Ok(self.computing(self.topo_order()?))
    }

    /// Those of `ids` that compute (not inputs or constants), in the order given.
    pub fn computing(&self, ids: impl IntoIterator<Item = NodeId>) -> Vec<NodeId> {
        ids.into_iter()
            .filter(|id| !matches!(self.node(*id).op, Op::Input(_) | Op::Const(_)))
            .collect()
    }

    /// Re-infers every node in topological order and compares with the stored facts.
    pub fn check(&self) -> Result<(), GraphError> {
        for id in self.topo_order()? {
            let node = self.node(id);
            let inferred = self.infer_with(&node.name, &node.op, &node.inputs)?;
            if inferred.len() != node.outputs.len() {
                return Err(GraphError::Inference {
                    node: node.name.clone(),
                    op: node.op.name(),
                    reason: format!("stores {} outputs, infers {}", node.outputs.len(), inferred.len()),
                });
            }
            for (slot, (stored, inferred)) in node.outputs.iter().zip(inferred).enumerate() {
                if *stored != inferred {
                    return Err(GraphError::FactMismatch {
                        node: node.name.clone(),
                        slot,
                        stored: stored.clone(),
                        inferred,
                    });
                }
            }
        }
        for (name, o) in &self.outputs {
            if self.fact(*o).is_none() {
                return Err(GraphError::BadOutput { name: name.clone() });
            }
        }
        Ok(())
    }

    /// Sets an annotation on a node (replacing any previous value).
    pub fn annotate(&mut self, id: NodeId, key: impl Into<String>, value: impl Into<String>) {
        self.g[id.index()].annotations.insert(key.into(), value.into());
    }

    /// A name not yet used in this graph, `base` itself when free.
    pub fn unique_name(&self, base: &str) -> String {
        if !self.names.contains_key(base) {
            return base.to_string();
        }
        (1..)
            .map(|i| format!("{base}_{i}"))
            .find(|n| !self.names.contains_key(n))
            .expect("an unused name exists")
    }

    /// Replaces the op of a node and re-infers it; consumers must still accept
    /// the new facts (run [`Graph::check`] after a batch of edits).
    pub fn replace_op(&mut self, id: NodeId, op: Op) -> Result<(), GraphError> {
        let node = self.node(id);
        let outputs = self.infer_with(&node.name, &op, &node.inputs.clone())?;
        let n = &mut self.g[id.index()];
        n.op = op;
        n.outputs = outputs;
        Ok(())
    }

    /// Re-infers one node from its current inputs.
    pub(crate) fn reinfer(&mut self, id: NodeId) -> Result<(), GraphError> {
        let node = self.node(id);
        let outputs = self.infer_with(&node.name, &node.op, &node.inputs)?;
        self.g[id.index()].outputs = outputs;
        Ok(())
    }

    /// Makes input `slot` of `id` read `from`.
    pub(crate) fn set_input(&mut self, id: NodeId, slot: usize, from: Outlet) {
        let old = self.node(id).inputs[slot];
        if let Some(e) = self
            .g
            .edges_directed(id.index(), Direction::Incoming)
            .find(|e| e.weight().to_slot == slot && NodeId::from_index(e.source()) == old.node)
            .map(|e| e.id())
        {
            self.g.remove_edge(e);
        }
        self.g.add_edge(from.node.index(), id.index(), Wire { to_slot: slot });
        self.g[id.index()].inputs[slot] = from;
    }

    /// Makes every consumer of `old` (except those in `skip`) and every graph
    /// output naming `old` read `new` instead.
    pub(crate) fn shunt(&mut self, old: Outlet, new: Outlet, skip: &[NodeId]) {
        for (n, slot) in self.consumers(old) {
            if !skip.contains(&n) {
                self.set_input(n, slot, new);
            }
        }
        for (_, o) in self.outputs.iter_mut() {
            if *o == old {
                *o = new;
            }
        }
    }

    /// Removes a node; its consumers must be gone already.
    pub(crate) fn remove(&mut self, id: NodeId) -> Result<(), GraphError> {
        let node = self.node(id);
        if let Some(c) = self.successors(id).first() {
            return Err(GraphError::Patch {
                reason: format!("cannot remove `{}`: `{}` still reads it", node.name, self.node(*c).name),
            });
        }
        if self.outputs.iter().any(|(_, o)| o.node == id) {
            return Err(GraphError::Patch {
                reason: format!("cannot remove `{}`: it is a graph output", node.name),
            });
        }
        let name = node.name.clone();
        self.names.remove(&name);
        self.inputs.retain(|i| *i != id);
        self.g.remove_node(id.index());
        Ok(())
    }

    /// Removes nodes that no graph output depends on (graph inputs stay).
    /// Returns how many were removed.
    pub fn prune_dead(&mut self) -> usize {
        let mut live = vec![false; self.g.node_bound()];
        let mut stack: Vec<NodeId> = self.outputs.iter().map(|(_, o)| o.node).collect();
        stack.extend(self.inputs.iter().copied());
        while let Some(id) = stack.pop() {
            if std::mem::replace(&mut live[id.0 as usize], true) {
                continue;
            }
            stack.extend(self.node(id).inputs.iter().map(|o| o.node));
        }
        let dead: Vec<NodeId> = self.node_ids().into_iter().filter(|id| !live[id.0 as usize]).collect();
        for id in &dead {
            let name = self.node(*id).name.clone();
            self.names.remove(&name);
            self.g.remove_node(id.index());
        }
        dead.len()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_value_past_the_size_limit_is_named_by_its_fact() {
        use crate::ops::{CoordMode, NearestMode, Resize, ResizeMode, ResizeTarget};
        let mut g = Graph::new("g");
        let x = g.add_input("x", Fact::f32([1, 1, 1024, 1024])).unwrap();
        let up = Op::Resize(Resize {
            mode: ResizeMode::Nearest(NearestMode::Floor),
            coord: CoordMode::Asymmetric,
            target: ResizeTarget::Scales([1048576.0, 1048576.0]),
        });
        let e = g.add_node("up", up, &[x]).unwrap_err().to_string();
        assert!(
            e.contains("output f32[1x1x1073741824x1073741824] would exceed 1024 GiB") && !e.contains("Fact"),
            "{e}"
        );
    }

    use super::*;
    use crate::builder::{Builder, ConvSpec};
    use crate::ops::{Conv, Unary, UnaryOp};

    #[test]
    fn inference_errors_name_the_node() {
        let mut g = Graph::new("t");
        let x = g.add_input("x", Fact::f32([1, 3, 8, 8])).unwrap();
        let w = g.add_const("w", Tensor::without_data(Fact::f32([4, 2, 3, 3]))).unwrap();
        let err = g.add_node("conv1", Op::Conv(Conv::default()), &[x, w]).unwrap_err();
        assert!(err.to_string().starts_with("node `conv1` (Conv):"), "{err}");
        let err = g.add_input("x", Fact::f32([1])).unwrap_err();
        assert_eq!(err, GraphError::DuplicateName { name: "x".into() });
    }

    #[test]
    fn rewiring_into_a_cycle_is_detected() {
        let mut g = Graph::new("t");
        let x = g.add_input("x", Fact::f32([1, 4])).unwrap();
        let relu = Op::Unary(Unary { op: UnaryOp::Relu });
        let a = g.add_node("a", relu.clone(), &[x]).unwrap();
        let b = g.add_node("b", relu, &[a.out(0)]).unwrap();
        g.rewire(a, 0, b.out(0)).unwrap();
        assert!(matches!(g.topo_order(), Err(GraphError::Cycle { .. })));
        assert!(g.check().is_err());
    }

    #[test]
    fn costs_of_a_conv() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 8, 16, 16]).unwrap();
        let y = b.conv("conv", x, ConvSpec::new(16, 3, 2).group(2).bias()).unwrap();
        let g = b.finish("y", y).unwrap();
        let c = g.node_cost(g.find("conv").unwrap());
        assert_eq!(c.macs, 16 * 8 * 8 * 4 * 9);
        assert_eq!(c.flops, 2 * c.macs + 16 * 8 * 8);
        assert_eq!(c.params, 16 * 4 * 9 + 16);
        assert_eq!(c.activation_bytes, 16 * 8 * 8 * 4);
        assert_eq!(g.total_cost().params, c.params);
    }

    #[test]
    fn random_weights_are_deterministic_and_named() {
        let build = || {
            let mut b = Builder::new("t");
            let x = b.input("x", &[1, 3, 8, 8]).unwrap();
            let y = b.conv_bn("c", x, ConvSpec::new(4, 3, 1), true).unwrap();
            b.finish("y", y).unwrap()
        };
        let (mut g1, mut g2) = (build(), build());
        assert_eq!(g1.fill_missing_weights(5), 5);
        g2.fill_missing_weights(5);
        let w = |g: &Graph, n: &str| g.const_tensor(g.find(n).unwrap().out(0)).unwrap().to_f32_vec().unwrap();
        assert_eq!(w(&g1, "c.weight"), w(&g2, "c.weight"));
        assert_ne!(w(&g1, "c.weight")[..4], w(&g1, "c.bn.weight")[..4]);
        assert!(w(&g1, "c.bn.running_var").iter().all(|v| *v >= 0.5));
        assert_eq!(g1.fill_missing_weights(6), 0, "filled weights are kept");
    }
}
