//! Cutting an annotated graph into processor-level subgraphs.
//!
//! A subgraph is a run of compute nodes on one processor in which only the
//! first node reads values from another subgraph; it ends after a node whose
//! output another processor reads, so that processor never waits for more
//! than the value it needs. Constants are not placed: each subgraph carries
//! copies of the ones it reads. A node computed from constants alone (the
//! DequantizeLinear of an int8 weight), a DequantizeLinear of a computed
//! value, and a QuantizeLinear of another processor's value, join the
//! subgraph of their first reader, just before it, so a quantized file is
//! cut like its float original and each subgraph starts with the
//! dequantization its integer kernels fuse. Nodes without a [`keys::PROCESSOR`]
//! annotation run on the default processor, so an unannotated model is one
//! subgraph.

use graph_ir::{Graph, NodeId, Op, Outlet, keys};
use std::collections::{HashMap, HashSet};

/// A run of nodes on one processor, compiled and run as one unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Subgraph {
    /// `sg<index>@<processor>`, unique within the partition.
    pub name: String,
    pub processor: String,
    /// Compute nodes in topological order.
    pub nodes: Vec<NodeId>,
    /// Values read from graph inputs or other subgraphs, in first-use order.
    pub inputs: Vec<Outlet>,
    /// Values other subgraphs or the graph's outputs read, in production order.
    pub outputs: Vec<Outlet>,
    /// Whether the first node is annotated as a meeting point.
    pub meeting_point: bool,
}

/// The subgraphs of a graph in a topological order: every subgraph's inputs
/// are graph inputs or outputs of earlier subgraphs.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    pub subgraphs: Vec<Subgraph>,
}

impl Partition {
    /// The processors used, in order of first use.
    pub fn processors(&self) -> Vec<&str> {
        let mut seen = Vec::new();
        for s in &self.subgraphs {
            if !seen.contains(&s.processor.as_str()) {
                seen.push(s.processor.as_str());
            }
        }
        seen
    }

    /// Per subgraph: whether no other subgraph of the same request can run
    /// beside it, because every other one must finish before it starts or
    /// may only start after it ends (the stem, the head, stages kept whole,
    /// a meeting point's merge). Such a subgraph leaves the other
    /// processors idle.
    pub fn alone(&self) -> Vec<bool> {
        let n = self.subgraphs.len();
        let mut producer: HashMap<Outlet, usize> = HashMap::new();
        for (i, s) in self.subgraphs.iter().enumerate() {
            for o in &s.outputs {
                producer.insert(*o, i);
            }
        }
        let mut before: Vec<HashSet<usize>> = vec![HashSet::new(); n];
        for (i, s) in self.subgraphs.iter().enumerate() {
            let mut all = HashSet::new();
            for o in &s.inputs {
                if let Some(&j) = producer.get(o) {
                    all.insert(j);
                    all.extend(before[j].iter().copied());
                }
            }
            before[i] = all;
        }
        (0..n)
            .map(|i| (0..n).all(|j| j == i || before[i].contains(&j) || before[j].contains(&i)))
            .collect()
    }
}

/// The processor `node` is placed on.
pub fn processor_of<'g>(g: &'g Graph, node: NodeId, default: &'g str) -> &'g str {
    g.node(node)
        .annotations
        .get(keys::PROCESSOR)
        .map(String::as_str)
        .unwrap_or(default)
}

fn is_placed(op: &Op) -> bool {
    !matches!(op, Op::Input(_) | Op::Const(_))
}

fn is_meeting_point(g: &Graph, node: NodeId) -> bool {
    g.node(node)
        .annotations
        .get(keys::MEETING_POINT)
        .is_some_and(|v| !v.is_empty() && v != "false")
}

/// Nodes placed just before their first reader, in its subgraph: those
/// whose every input is a constant or another such node (the
/// DequantizeLinear of an int8 weight), the DequantizeLinear of a
/// computed value, and the QuantizeLinear of a value from another
/// processor (or a graph input), each read on its own processor only.
fn led_by_reader(g: &Graph, order: &[NodeId], default: &str) -> HashSet<NodeId> {
    let mut constant = HashSet::new();
    let mut out = HashSet::new();
    for &id in order {
        let node = g.node(id);
        if !is_placed(&node.op) {
            continue;
        }
        if node
            .inputs
            .iter()
            .all(|o| matches!(g.node(o.node).op, Op::Const(_)) || constant.contains(&o.node))
        {
            constant.insert(id);
            out.insert(id);
        } else if joins_reader(g, id, default, &out) {
            out.insert(id);
        }
    }
    out
}

/// Whether `id` is placed with its readers: a DequantizeLinear of a
/// computed value, or a QuantizeLinear of a graph input, of another
/// processor's value or of a node placed with its readers, read only on
/// its own processor and not a graph output.
fn joins_reader(g: &Graph, id: NodeId, default: &str, led: &HashSet<NodeId>) -> bool {
    let node = g.node(id);
    if g.is_output(id.out(0)) {
        return false;
    }
    let p = processor_of(g, id, default);
    let from = node.inputs[0].node;
    let led_here = match node.op {
        Op::DequantizeLinear(_) => !matches!(g.node(from).op, Op::Const(_)),
        Op::QuantizeLinear(_) => match g.node(from).op {
            Op::Input(_) => true,
            Op::Const(_) => false,
            _ => led.contains(&from) || processor_of(g, from, default) != p,
        },
        _ => false,
    };
    led_here
        && g.consumers(id.out(0))
            .iter()
            .all(|(c, _)| processor_of(g, *c, default) == p)
}

/// The subgraph a graph output's DequantizeLinear joins even when it is
/// closed: the one of its QuantizeLinear, on the same processor (its
/// other readers dequantize in their own subgraphs, so the value it
/// hands on is ready either way).
fn dequantizes_its_own(g: &Graph, id: NodeId, subgraphs: &[Subgraph], producers: &[usize], p: &str) -> Option<usize> {
    let [s] = producers else { return None };
    (matches!(g.node(id).op, Op::DequantizeLinear(_)) && subgraphs[*s].processor == p).then_some(*s)
}

/// The not yet placed nodes of `led` that `id` reads (and those they
/// read), each after what it reads.
fn to_pull(g: &Graph, id: NodeId, led: &HashSet<NodeId>, owner: &HashMap<NodeId, usize>, out: &mut Vec<NodeId>) {
    for o in &g.node(id).inputs {
        if led.contains(&o.node) && !owner.contains_key(&o.node) && !out.contains(&o.node) {
            to_pull(g, o.node, led, owner, out);
            out.push(o.node);
        }
    }
}

/// Partitions `g`; unannotated nodes go to `default`.
pub fn partition(g: &Graph, default: &str) -> Result<Partition, graph_ir::GraphError> {
    let order = g.topo_order()?;
    let led = led_by_reader(g, &order, default);
    let mut owner: HashMap<NodeId, usize> = HashMap::new();
    let mut open: HashMap<String, usize> = HashMap::new();
    let mut closed: HashSet<usize> = HashSet::new();
    let mut subgraphs: Vec<Subgraph> = Vec::new();
    let mut deps: Vec<HashSet<usize>> = Vec::new();
    for &id in &order {
        let node = g.node(id);
        if !is_placed(&node.op) || (led.contains(&id) && !(0..node.outputs.len()).any(|k| g.is_output(id.out(k)))) {
            continue;
        }
        let p = processor_of(g, id, default);
        let mut pulled = Vec::new();
        to_pull(g, id, &led, &owner, &mut pulled);
        let producers: Vec<usize> = pulled
            .iter()
            .chain([&id])
            .flat_map(|n| &g.node(*n).inputs)
            .filter_map(|o| owner.get(&o.node).copied())
            .collect();
        let joinable = open
            .get(p)
            .copied()
            .filter(|s| !closed.contains(s) && producers.iter().all(|o| o == s || deps[*s].contains(o)))
            .or_else(|| dequantizes_its_own(g, id, &subgraphs, &producers, p));
        let s = match joinable {
            Some(s) => s,
            None => {
                subgraphs.push(Subgraph {
                    name: format!("sg{}@{p}", subgraphs.len()),
                    processor: p.to_string(),
                    nodes: Vec::new(),
                    inputs: Vec::new(),
                    outputs: Vec::new(),
                    meeting_point: is_meeting_point(g, id),
                });
                deps.push(producers.iter().copied().collect());
                open.insert(p.to_string(), subgraphs.len() - 1);
                subgraphs.len() - 1
            }
        };
        for &n in &pulled {
            owner.insert(n, s);
        }
        subgraphs[s].nodes.extend(pulled);
        subgraphs[s].nodes.push(id);
        owner.insert(id, s);
        let read_elsewhere = (0..node.outputs.len()).any(|slot| {
            g.consumers(id.out(slot))
                .iter()
                .any(|(c, _)| processor_of(g, *c, default) != p)
        });
        if read_elsewhere {
            closed.insert(s);
        }
    }
    for (i, s) in subgraphs.iter_mut().enumerate() {
        for &id in &s.nodes {
            for o in &g.node(id).inputs {
                let external = match g.node(o.node).op {
                    Op::Const(_) => false,
                    Op::Input(_) => true,
                    _ => owner.get(&o.node) != Some(&i),
                };
                if external && !s.inputs.contains(o) {
                    s.inputs.push(*o);
                }
            }
        }
    }
    let mut read: Vec<(usize, Outlet)> = Vec::new();
    for (i, s) in subgraphs.iter().enumerate() {
        for o in &s.inputs {
            read.push((i, *o));
        }
    }
    for (i, s) in subgraphs.iter_mut().enumerate() {
        for &id in &s.nodes {
            for slot in 0..g.node(id).outputs.len() {
                let o = id.out(slot);
                if g.is_output(o) || read.iter().any(|(j, r)| *j != i && *r == o) {
                    s.outputs.push(o);
                }
            }
        }
    }
    Ok(Partition { subgraphs })
}

/// The subgraph computing `nodes` (topological order): inputs are the
/// non-constant values they read from outside, outputs the values read
/// outside them or by the graph's outputs.
pub fn subgraph_of(g: &Graph, name: String, nodes: Vec<NodeId>) -> Subgraph {
    let inside: HashSet<NodeId> = nodes.iter().copied().collect();
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    for &id in &nodes {
        for o in &g.node(id).inputs {
            if !inside.contains(&o.node) && !matches!(g.node(o.node).op, Op::Const(_)) && !inputs.contains(o) {
                inputs.push(*o);
            }
        }
        for slot in 0..g.node(id).outputs.len() {
            let o = id.out(slot);
            if g.is_output(o) || g.consumers(o).iter().any(|(c, _)| !inside.contains(c)) {
                outputs.push(o);
            }
        }
    }
    Subgraph {
        name,
        processor: String::new(),
        nodes,
        inputs,
        outputs,
        meeting_point: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::two_branch;

    #[test]
    fn unannotated_graph_is_one_subgraph() {
        let mut plain = graph_ir::builder::Builder::new("plain");
        let x = plain.input("x", &[1, 3, 8, 8]).unwrap();
        let y = plain.relu("r", x).unwrap();
        let y = plain.relu("r2", y).unwrap();
        let plain = plain.finish("y", y).unwrap();
        let p = partition(&plain, "cpu0").unwrap();
        assert_eq!(p.subgraphs.len(), 1);
        assert_eq!(p.subgraphs[0].processor, "cpu0");
        assert_eq!(p.subgraphs[0].nodes.len(), 2);
        assert_eq!(p.subgraphs[0].inputs, vec![plain.inputs()[0].out(0)]);
        assert_eq!(p.subgraphs[0].outputs, vec![plain.outputs()[0].1]);
    }

    #[test]
    fn two_branches_give_stem_branches_and_meeting_point() {
        let g = two_branch(8, 2).unwrap();
        let p = partition(&g, "cpu0").unwrap();
        let procs: Vec<&str> = p.subgraphs.iter().map(|s| s.processor.as_str()).collect();
        assert_eq!(procs, ["cpu0", "cpu0", "cpu1", "cpu0"], "{p:#?}");
        let stem_out = p.subgraphs[0].outputs.clone();
        assert_eq!(stem_out.len(), 1);
        assert_eq!(p.subgraphs[1].inputs, stem_out);
        assert_eq!(p.subgraphs[2].inputs, stem_out);
        let merge = &p.subgraphs[3];
        assert!(merge.meeting_point);
        assert_eq!(merge.inputs.len(), 2);
        assert!(merge.inputs.contains(&p.subgraphs[1].outputs[0]));
        assert!(merge.inputs.contains(&p.subgraphs[2].outputs[0]));
        assert_eq!(merge.outputs, vec![g.outputs()[0].1]);
        let placed = g.node_ids().into_iter().filter(|id| is_placed(&g.node(*id).op)).count();
        assert_eq!(p.subgraphs.iter().map(|s| s.nodes.len()).sum::<usize>(), placed);
    }

    #[test]
    fn every_subgraph_reads_only_earlier_values() {
        let g = crate::testing::three_branch(8).unwrap();
        let p = partition(&g, "cpu0").unwrap();
        let mut available: Vec<Outlet> = g.inputs().iter().map(|i| i.out(0)).collect();
        for s in &p.subgraphs {
            for i in &s.inputs {
                assert!(available.contains(i), "{} reads {i:?} before it exists", s.name);
            }
            available.extend(s.outputs.iter().copied());
        }
        assert_eq!(p.processors(), ["cpu0", "cpu1", "cpu2"]);
    }

    #[test]
    fn only_subgraphs_nothing_runs_beside_are_alone() {
        let g = two_branch(8, 2).unwrap();
        let p = partition(&g, "cpu0").unwrap();
        assert_eq!(p.alone(), [true, false, false, true], "{p:#?}");
        let g = crate::testing::three_branch(8).unwrap();
        let p = partition(&g, "cpu0").unwrap();
        let alone = p.alone();
        assert!(alone[0] && alone[alone.len() - 1], "{alone:?}");
        assert!(alone.iter().filter(|a| !**a).count() >= 3, "{alone:?}");
    }
}
