//! Meeting points copied to every processor that reads them.
//!
//! Where branches meet, a Concat ([`keys::MEETING_POINT`]) joins their
//! outputs on one processor. When the next stage is branched again, the
//! other processors then wait for that Concat to run and for its result to
//! be handed back, and the Concat is a subgraph of its own (its output is
//! read elsewhere, so nothing can join it). Copied to every processor that
//! reads it, each processor joins the branch outputs itself, the copy
//! opens that processor's next subgraph, and the branch outputs cross
//! between processors at once in both directions. The function is the same:
//! every copy computes the same value from the same inputs.

use crate::partition::processor_of;
use graph_ir::{Graph, GraphError, Op, keys};

/// `g` with every Concat meeting point copied once per other processor that
/// reads its output; those readers read the copy. A meeting point that only
/// other processors read (and no graph output) is removed. Nodes without a
/// processor annotation are on `default`.
pub fn replicate_meeting_points(g: &Graph, default: &str) -> Result<Graph, GraphError> {
    let mut out = g.clone();
    let mut removed_any = false;
    for id in g.topo_order()? {
        let node = g.node(id);
        let meets = node
            .annotations
            .get(keys::MEETING_POINT)
            .is_some_and(|v| !v.is_empty() && v != "false");
        if !meets || !matches!(node.op, Op::Concat(_)) || node.outputs.len() != 1 {
            continue;
        }
        let home = processor_of(g, id, default);
        let mut by_processor: Vec<(&str, Vec<(graph_ir::NodeId, usize)>)> = Vec::new();
        for (c, slot) in g.consumers(id.out(0)) {
            let p = processor_of(g, c, default);
            if p == home {
                continue;
            }
            match by_processor.iter_mut().find(|(q, _)| *q == p) {
                Some((_, v)) => v.push((c, slot)),
                None => by_processor.push((p, vec![(c, slot)])),
            }
        }
        for (p, readers) in &by_processor {
            let copy = out.add_node(format!("{}@{p}", node.name), node.op.clone(), &node.inputs)?;
            for (k, v) in &node.annotations {
                out.annotate(copy, k.clone(), v.clone());
            }
            out.annotate(copy, keys::PROCESSOR, p.to_string());
            for (c, slot) in readers {
                out.rewire(*c, *slot, copy.out(0))?;
            }
        }
        removed_any |= !by_processor.is_empty() && out.consumers(id.out(0)).is_empty() && !g.is_output(id.out(0));
    }
    if removed_any {
        out.prune_dead();
    }
    out.check()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::partition;
    use crate::testing::two_branch;
    use graph_ir::builder::Builder;
    use graph_ir::ops::{Concat, UnaryOp};
    use tract_onnx::prelude::{IntoTValue, Tensor, tvec};

    /// Two branched stages in a row: x → (a0 on cpu0, a1 on cpu1) → meet on
    /// cpu0 → (b0 on cpu0, b1 on cpu1) → meet on cpu0 → y.
    fn two_stages() -> Graph {
        let mut b = Builder::new("two-stages");
        let x = b.input("x", &[1, 4, 8, 8]).unwrap();
        let a0 = b.relu("a0", x).unwrap();
        let a1 = b.unary("a1", x, UnaryOp::Sigmoid).unwrap();
        let m1 = b.node("m1", Op::Concat(Concat { axis: 1 }), &[a0, a1]).unwrap();
        let b0 = b.relu("b0", m1).unwrap();
        let b1 = b.unary("b1", m1, UnaryOp::Sigmoid).unwrap();
        let m2 = b.node("m2", Op::Concat(Concat { axis: 1 }), &[b0, b1]).unwrap();
        let mut g = b.finish("y", m2).unwrap();
        for id in g.node_ids() {
            let name = g.node(id).name.clone();
            let p = if name.ends_with('1') && !name.starts_with('m') {
                "cpu1"
            } else {
                "cpu0"
            };
            g.annotate(id, keys::PROCESSOR, p);
            g.annotate(
                id,
                keys::MEETING_POINT,
                if name.starts_with('m') { "true" } else { "false" },
            );
        }
        g
    }

    #[test]
    fn a_meeting_point_read_on_two_processors_is_copied_and_opens_each_next_subgraph() {
        let g = two_stages();
        let before = partition(&g, "cpu0").unwrap();
        assert_eq!(before.subgraphs.len(), 6, "{before:#?}");
        let r = replicate_meeting_points(&g, "cpu0").unwrap();
        let names: Vec<String> = r.node_ids().iter().map(|id| r.node(*id).name.clone()).collect();
        assert!(
            names.contains(&"m1@cpu1".to_string()) && names.contains(&"m1".to_string()),
            "{names:?}"
        );
        assert!(!names.iter().any(|n| n.starts_with("m2@")), "{names:?}");
        let after = partition(&r, "cpu0").unwrap();
        let shape: Vec<(String, usize)> = after
            .subgraphs
            .iter()
            .map(|s| (s.processor.clone(), s.nodes.len()))
            .collect();
        let want: Vec<(String, usize)> = [("cpu0", 1), ("cpu1", 1), ("cpu0", 2), ("cpu1", 2), ("cpu0", 1)]
            .iter()
            .map(|(p, n)| (p.to_string(), *n))
            .collect();
        assert_eq!(shape, want, "{after:#?}");
        assert!(after.subgraphs[2].meeting_point && after.subgraphs[3].meeting_point);
    }

    #[test]
    fn the_copied_graph_computes_the_same_outputs() {
        let g = two_stages();
        let r = replicate_meeting_points(&g, "cpu0").unwrap();
        let x = Tensor::from_shape(&[1, 4, 8, 8], &crate::npy::random_values(5, 256)).unwrap();
        let run = |g: &Graph| {
            let bytes = graph_ir::onnx::export_bytes(g).unwrap();
            let c = crate::engine::Engine::compile(&crate::engine::TractEngine::new(1), &bytes).unwrap();
            c.run(tvec![x.clone().into_tvalue()]).unwrap().remove(0)
        };
        assert_eq!(run(&g), run(&r));
    }

    #[test]
    fn the_runtime_runs_the_copies_and_matches_the_whole_graph() {
        let g = two_stages();
        let rt = crate::Runtime::load(&g, &crate::ProcessorConfig::default_set(2), crate::default_factory()).unwrap();
        assert_eq!(rt.partition().subgraphs.len(), 5, "{:#?}", rt.partition());
        let x = Tensor::from_shape(&[1, 4, 8, 8], &crate::npy::random_values(6, 256)).unwrap();
        let bytes = graph_ir::onnx::export_bytes(&g).unwrap();
        let whole = crate::engine::Engine::compile(&crate::engine::TractEngine::new(1), &bytes).unwrap();
        let want = whole.run(tvec![x.clone().into_tvalue()]).unwrap().remove(0);
        assert_eq!(rt.run(vec![x.into_tvalue()]).unwrap().remove(0), want);
    }

    #[test]
    fn meeting_points_read_on_their_own_processor_only_stay_as_they_are() {
        let g = two_branch(8, 2).unwrap();
        let r = replicate_meeting_points(&g, "cpu0").unwrap();
        assert_eq!(r.node_ids().len(), g.node_ids().len());
        assert_eq!(partition(&r, "cpu0").unwrap(), partition(&g, "cpu0").unwrap());
    }
}
