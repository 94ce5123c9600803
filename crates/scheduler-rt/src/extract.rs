//! A subgraph as a graph of its own, ready for an engine.

use crate::error::RuntimeError;
use crate::partition::Subgraph;
use graph_ir::{Graph, GraphError, Op, Outlet};
use std::collections::HashMap;

/// The name a value keeps across subgraph files: its producer's name, with
/// `:slot` for outputs after the first (unique in a graph).
pub fn value_name(g: &Graph, o: Outlet) -> String {
    let n = &g.node(o.node).name;
    if o.slot == 0 {
        n.clone()
    } else {
        format!("{n}:{}", o.slot)
    }
}

/// The graph computing `sub`'s outputs from its inputs: one graph input per
/// entry of [`Subgraph::inputs`] and one output per entry of
/// [`Subgraph::outputs`], in those orders, each named [`value_name`] as in
/// `g` (so a caller feeds and reads every file by the same names), with
/// copies of the constants it reads.
pub fn extract(g: &Graph, sub: &Subgraph) -> Result<Graph, GraphError> {
    let mut out = Graph::new(format!("{}.{}", g.name, sub.name));
    let mut map: HashMap<Outlet, Outlet> = HashMap::new();
    for o in &sub.inputs {
        let fact = g.fact(*o).cloned().ok_or_else(|| GraphError::Patch {
            reason: format!("subgraph {} reads a missing value", sub.name),
        })?;
        map.insert(*o, out.add_input(value_name(g, *o), fact)?);
    }
    for &id in &sub.nodes {
        let node = g.node(id);
        let mut inputs = Vec::with_capacity(node.inputs.len());
        for o in &node.inputs {
            let mapped = match (map.get(o), &g.node(o.node).op) {
                (Some(m), _) => *m,
                (None, Op::Const(t)) => {
                    let c = out.add_const(g.node(o.node).name.clone(), t.clone())?;
                    map.insert(*o, c);
                    c
                }
                (None, _) => {
                    return Err(GraphError::Patch {
                        reason: format!("subgraph {}: node {} reads a value from outside", sub.name, node.name),
                    });
                }
            };
            inputs.push(mapped);
        }
        let new = out.add_node(node.name.clone(), node.op.clone(), &inputs)?;
        for slot in 0..node.outputs.len() {
            map.insert(id.out(slot), new.out(slot));
        }
    }
    let outputs = sub.outputs.iter().map(|o| (value_name(g, *o), map[o])).collect();
    out.set_outputs(outputs)?;
    Ok(out)
}

/// [`extract`], written as the ONNX bytes an engine compiles.
pub fn extract_onnx(g: &Graph, sub: &Subgraph) -> Result<Vec<u8>, RuntimeError> {
    graph_ir::onnx::export_bytes(&extract(g, sub)?).map_err(|e| RuntimeError::Export {
        subgraph: sub.name.clone(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::partition;
    use crate::testing::two_branch;

    #[test]
    fn extracted_subgraphs_check_and_keep_their_facts() {
        let g = two_branch(8, 1).unwrap();
        let p = partition(&g, "cpu0").unwrap();
        for s in &p.subgraphs {
            let e = extract(&g, s).unwrap();
            e.check().unwrap();
            assert_eq!(e.inputs().len(), s.inputs.len());
            for (o, (name, eo)) in s.outputs.iter().zip(e.outputs()) {
                assert_eq!(g.fact(*o), e.fact(*eo));
                assert_eq!(*name, value_name(&g, *o), "outputs keep the model's names");
            }
            for (o, id) in s.inputs.iter().zip(e.inputs()) {
                assert_eq!(e.node(*id).name, value_name(&g, *o), "inputs keep the model's names");
            }
            graph_ir::onnx::export_bytes(&e).unwrap();
        }
    }
}
