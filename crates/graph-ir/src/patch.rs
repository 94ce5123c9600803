//! Rewrites as patches: a patch records new nodes, rewirings and removals and
//! is applied to a graph all at once. Either the whole patch applies and the
//! result passes [`Graph::check`], or the graph is left untouched.

use crate::error::GraphError;
use crate::graph::{Graph, NodeId, Outlet};
use crate::ops::Op;
use crate::tensor::Tensor;

/// A value a patch can wire: an outlet of the graph, or output `slot` of the
/// patch's `index`-th new node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchOutlet {
    Graph(Outlet),
    New { index: usize, slot: usize },
}

impl From<Outlet> for PatchOutlet {
    fn from(o: Outlet) -> Self {
        PatchOutlet::Graph(o)
    }
}

/// A node a patch will create (its position among the patch's new nodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatchNode(pub usize);

impl PatchNode {
    pub fn out(self, slot: usize) -> PatchOutlet {
        PatchOutlet::New { index: self.0, slot }
    }
}

#[derive(Clone, Debug)]
enum Step {
    Add {
        name: String,
        op: Op,
        inputs: Vec<PatchOutlet>,
        annotations: Vec<(String, String)>,
    },
    Shunt {
        from: Outlet,
        to: PatchOutlet,
    },
    Remove(NodeId),
    Rewire {
        node: NodeId,
        slot: usize,
        to: PatchOutlet,
    },
    Annotate {
        node: NodeId,
        key: String,
        value: String,
    },
}

/// A batch of edits to a graph.
#[derive(Clone, Debug, Default)]
pub struct Patch {
    steps: Vec<Step>,
    added: usize,
}

impl Patch {
    pub fn new() -> Patch {
        Patch::default()
    }

    /// Adds a node reading `inputs`.
    pub fn add_node(&mut self, name: impl Into<String>, op: Op, inputs: Vec<PatchOutlet>) -> PatchNode {
        self.steps.push(Step::Add {
            name: name.into(),
            op,
            inputs,
            annotations: Vec::new(),
        });
        self.added += 1;
        PatchNode(self.added - 1)
    }

    /// Adds a constant node.
    pub fn add_const(&mut self, name: impl Into<String>, tensor: Tensor) -> PatchOutlet {
        self.add_node(name, Op::Const(tensor), vec![]).out(0)
    }

    /// Annotates a node the patch creates.
    pub fn annotate_new(&mut self, node: PatchNode, key: impl Into<String>, value: impl Into<String>) {
        let mut seen = 0;
        for step in &mut self.steps {
            if let Step::Add { annotations, .. } = step {
                if seen == node.0 {
                    annotations.push((key.into(), value.into()));
                    return;
                }
                seen += 1;
            }
        }
    }

    /// Annotates an existing node.
    pub fn annotate(&mut self, node: NodeId, key: impl Into<String>, value: impl Into<String>) {
        self.steps.push(Step::Annotate {
            node,
            key: key.into(),
            value: value.into(),
        });
    }

    /// Makes every pre-existing consumer of `from`, and any graph output naming
    /// it, read `to` instead. Nodes created by this patch keep reading `from`.
    /// `to` may have another fact: every node is re-inferred when the patch is
    /// applied, and the patch fails if a consumer rejects the new fact.
    pub fn shunt(&mut self, from: Outlet, to: impl Into<PatchOutlet>) {
        self.steps.push(Step::Shunt { from, to: to.into() });
    }

    /// Makes input `slot` of the existing node `node` read `to` (other
    /// consumers of what it read are left alone).
    pub fn rewire(&mut self, node: NodeId, slot: usize, to: impl Into<PatchOutlet>) {
        self.steps.push(Step::Rewire {
            node,
            slot,
            to: to.into(),
        });
    }

    /// Removes a node (after all shunts). Nodes left without a path to a graph
    /// output are removed as well when the patch is applied.
    pub fn remove(&mut self, node: NodeId) {
        self.steps.push(Step::Remove(node));
    }
}

impl Graph {
    /// Applies a patch atomically; returns the ids of the nodes it created, in
    /// creation order.
    pub fn apply(&mut self, patch: Patch) -> Result<Vec<NodeId>, GraphError> {
        let mut g = self.clone();
        let mut created: Vec<NodeId> = Vec::new();
        let resolve = |created: &[NodeId], p: PatchOutlet| -> Result<Outlet, GraphError> {
            match p {
                PatchOutlet::Graph(o) => Ok(o),
                PatchOutlet::New { index, slot } => {
                    created
                        .get(index)
                        .map(|id| id.out(slot))
                        .ok_or_else(|| GraphError::Patch {
                            reason: format!("new node {index} is used before it is added"),
                        })
                }
            }
        };
        let mut removals = Vec::new();
        for step in patch.steps {
            match step {
                Step::Add {
                    name,
                    op,
                    inputs,
                    annotations,
                } => {
                    let inputs = inputs
                        .into_iter()
                        .map(|p| resolve(&created, p))
                        .collect::<Result<Vec<_>, _>>()?;
                    let id = g.add_node(name, op, &inputs)?;
                    for (k, v) in annotations {
                        g.annotate(id, k, v);
                    }
                    created.push(id);
                }
                Step::Shunt { from, to } => {
                    let to = resolve(&created, to)?;
                    if g.fact(from).is_none() || g.fact(to).is_none() {
                        return Err(GraphError::Patch {
                            reason: "shunt names an outlet that does not exist".into(),
                        });
                    }
                    g.shunt(from, to, &created);
                }
                Step::Remove(id) => removals.push(id),
                Step::Rewire { node, slot, to } => {
                    let to = resolve(&created, to)?;
                    let ok = g.get(node).is_some_and(|n| slot < n.inputs.len()) && g.fact(to).is_some();
                    if !ok {
                        return Err(GraphError::Patch {
                            reason: format!("rewire names input {slot} of a node, or an outlet, that does not exist"),
                        });
                    }
                    g.set_input(node, slot, to);
                }
                Step::Annotate { node, key, value } => {
                    if g.get(node).is_none() {
                        return Err(GraphError::Patch {
                            reason: "annotation names a node that does not exist".into(),
                        });
                    }
                    g.annotate(node, key, value);
                }
            }
        }
        for id in removals {
            if g.get(id).is_some() {
                g.remove(id)?;
            }
        }
        g.prune_dead();
        created.retain(|id| g.get(*id).is_some());
        for id in g.topo_order()? {
            g.reinfer(id)?;
        }
        g.check()?;
        *self = g;
        Ok(created)
    }

    /// Rewires input `slot` of `node` to `from` and re-infers `node` alone.
    pub fn rewire(&mut self, node: NodeId, slot: usize, from: Outlet) -> Result<(), GraphError> {
        let name = self.node(node).name.clone();
        if slot >= self.node(node).inputs.len() || self.fact(from).is_none() {
            return Err(GraphError::BadOutlet {
                node: name,
                slot,
                outlet_slot: from.slot,
            });
        }
        self.set_input(node, slot, from);
        self.reinfer(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{Builder, ConvSpec};
    use crate::ops::{Unary, UnaryOp};

    fn conv_net() -> Graph {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 4, 8, 8]).unwrap();
        let y = b.conv("conv", x, ConvSpec::new(8, 3, 1)).unwrap();
        let y = b.batch_norm("bn", y).unwrap();
        b.finish("y", y).unwrap()
    }

    #[test]
    fn insert_after_with_shunt() {
        let mut g = conv_net();
        let bn = g.find("bn").unwrap().out(0);
        let mut p = Patch::new();
        let relu = p.add_node("relu", Op::Unary(Unary { op: UnaryOp::Relu }), vec![bn.into()]);
        p.shunt(bn, relu.out(0));
        let created = g.apply(p).unwrap();
        assert_eq!(created.len(), 1);
        assert_eq!(g.outputs()[0].1, created[0].out(0));
        assert_eq!(g.node(created[0]).inputs, vec![bn]);
    }

    #[test]
    fn bypass_removes_dead_nodes() {
        let mut g = conv_net();
        let before = g.len();
        let (conv, bn) = (g.find("conv").unwrap(), g.find("bn").unwrap());
        let mut p = Patch::new();
        p.shunt(bn.out(0), conv.out(0));
        g.apply(p).unwrap();
        assert!(g.find("bn").is_none() && g.find("bn.running_var").is_none());
        assert_eq!(g.len(), before - 5);
    }

    #[test]
    fn failing_patch_leaves_graph_untouched() {
        let mut g = conv_net();
        let before = (g.len(), g.outputs().to_vec());
        let bn = g.find("bn").unwrap().out(0);
        let mut p = Patch::new();
        let w = p.add_const("w", Tensor::from_f32([2, 3, 1, 1], &[0.0; 6]));
        let bad = p.add_node("bad", Op::Conv(Default::default()), vec![bn.into(), w]);
        p.shunt(bn, bad.out(0));
        let err = g.apply(p).unwrap_err();
        assert!(err.to_string().contains("`bad`"), "{err}");
        assert_eq!((g.len(), g.outputs().to_vec()), before);
    }

    #[test]
    fn rewire_moves_one_consumer_only() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 4, 8, 8]).unwrap();
        let a = b.unary("a", x, UnaryOp::Relu).unwrap();
        let c = b.unary("c", x, UnaryOp::Sigmoid).unwrap();
        let y = b.add("y", a, c).unwrap();
        let mut g = b.finish("y", y).unwrap();
        let (xo, cn) = (g.inputs()[0].out(0), g.find("c").unwrap());
        let mut p = Patch::new();
        let t = p.add_node("t", Op::Unary(Unary { op: UnaryOp::Tanh }), vec![xo.into()]);
        p.rewire(cn, 0, t.out(0));
        let created = g.apply(p).unwrap();
        assert_eq!(g.node(cn).inputs, vec![created[0].out(0)]);
        assert_eq!(g.node(g.find("a").unwrap()).inputs, vec![xo]);
    }

    #[test]
    fn removing_a_used_node_fails() {
        let mut g = conv_net();
        let conv = g.find("conv").unwrap();
        let mut p = Patch::new();
        p.remove(conv);
        assert!(matches!(g.apply(p), Err(GraphError::Patch { .. })));
    }
}
