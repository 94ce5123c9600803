//! Half precision for the nodes of fp16 processors.
//!
//! Every computing node of an fp16 processor computes in fp16: its float
//! constants are stored as fp16 (one copy per constant), a value it reads
//! from another processor or the graph input enters through a Cast to fp16
//! placed in its own subgraph, and a value it produces that another
//! processor reads, or that is a graph output, leaves through a Cast to
//! fp32 placed in the producer's subgraph. Values fp16 nodes hand to
//! other subgraphs, and the graph's inputs and outputs, stay fp32; every
//! inserted node carries the `processor`, `stage` and `branch` of the node
//! it serves. Resize's `roi` and `scales` stay fp32 (ONNX types them apart
//! from the data).

use crate::error::QuantizeError;
use crate::precision_map::PrecisionMap;
use crate::qdq::{Writer, served_annotations};
use bytes::Bytes;
use graph_ir::ops::Cast;
use graph_ir::{DType, Fact, Graph, NodeId, Op, Outlet, Patch, PatchOutlet, Tensor};
use predictor::Precision;
use std::collections::{HashMap, HashSet};

/// What the pass did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fp16Report {
    /// Nodes computing in fp16.
    pub nodes: usize,
    /// Float constants stored as fp16.
    pub constants: usize,
    /// Casts inserted at the fp16 nodes' boundaries.
    pub casts: usize,
}

/// Whether input `slot` of `op` takes the node's data type (so an fp16
/// node reads it as fp16).
fn data_typed(op: &Op, slot: usize) -> bool {
    !matches!((op, slot), (Op::Resize(_), 1 | 2))
}

/// The nodes of fp16 processors that compute (not constants, inputs or
/// quantization nodes), in topological order.
pub fn fp16_nodes(g: &Graph, map: &PrecisionMap) -> Result<Vec<NodeId>, QuantizeError> {
    let mut out = Vec::new();
    for id in g.topo_order()? {
        let n = g.node(id);
        let computes = !matches!(
            n.op,
            Op::Const(_) | Op::Input(_) | Op::QuantizeLinear(_) | Op::DequantizeLinear(_) | Op::Cast(_)
        );
        if computes && map.of(n)? == Precision::Fp16 {
            out.push(id);
        }
    }
    Ok(out)
}

fn annotations(g: &Graph, id: NodeId) -> Vec<(String, String)> {
    served_annotations(g.node(id))
}

/// `t` (f32) as an fp16 tensor, rounded to nearest, ties to even.
fn half_tensor(t: &Tensor) -> Option<Tensor> {
    let values = t.to_f32_vec()?;
    let bytes: Vec<u8> = values
        .iter()
        .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
        .collect();
    Tensor::from_bytes(Fact::new(DType::F16, t.shape().to_vec()), Bytes::from(bytes)).ok()
}

/// Rewrites the nodes of `map`'s fp16 processors to compute in fp16.
pub fn to_fp16(g: &Graph, map: &PrecisionMap) -> Result<(Graph, Fp16Report), QuantizeError> {
    let order = fp16_nodes(g, map)?;
    let half_nodes: HashSet<NodeId> = order.iter().copied().collect();
    let mut report = Fp16Report {
        nodes: order.len(),
        ..Fp16Report::default()
    };
    let mut w = Writer {
        g,
        patch: Patch::new(),
        used: HashSet::new(),
    };
    let mut constants: HashMap<NodeId, PatchOutlet> = HashMap::new();
    let mut entering: HashMap<Outlet, PatchOutlet> = HashMap::new();
    for &id in &order {
        let n = g.node(id);
        for (slot, o) in n.inputs.iter().enumerate() {
            if !data_typed(&n.op, slot) || g.fact(*o).is_none_or(|f| f.dtype != DType::F32) {
                continue;
            }
            let producer = g.node(o.node);
            let to = if let Op::Const(t) = &producer.op {
                if let Some(c) = constants.get(&o.node) {
                    *c
                } else {
                    let Some(h) = half_tensor(t) else { continue };
                    let c = w.node(
                        format!("{}_fp16", producer.name),
                        Op::Const(h),
                        vec![],
                        &annotations(g, id),
                    );
                    report.constants += 1;
                    constants.insert(o.node, c);
                    c
                }
            } else if half_nodes.contains(&o.node) {
                continue;
            } else if let Some(c) = entering.get(o) {
                *c
            } else {
                let c = w.node(
                    format!("{}_to_fp16", producer.name),
                    Op::Cast(Cast { to: DType::F16 }),
                    vec![(*o).into()],
                    &annotations(g, id),
                );
                report.casts += 1;
                entering.insert(*o, c);
                c
            };
            w.patch.rewire(id, slot, to);
        }
        for (slot, fact) in n.outputs.iter().enumerate() {
            let o = id.out(slot);
            if fact.dtype != DType::F32 {
                continue;
            }
            let readers = g.consumers(o);
            let leaves = g.is_output(o) || readers.iter().any(|(c, _)| !half_nodes.contains(c));
            if !leaves {
                continue;
            }
            let base = if slot == 0 {
                n.name.clone()
            } else {
                format!("{}.{slot}", n.name)
            };
            let back = w.node(
                format!("{base}_to_fp32"),
                Op::Cast(Cast { to: DType::F32 }),
                vec![o.into()],
                &annotations(g, id),
            );
            report.casts += 1;
            w.patch.shunt(o, back);
            for (c, s) in readers {
                if half_nodes.contains(&c) {
                    w.patch.rewire(c, s, o);
                }
            }
        }
    }
    let mut out = g.clone();
    out.apply(w.patch)?;
    Ok((out, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::builder::{Builder, ConvSpec};
    use graph_ir::keys;

    #[test]
    fn fp16_nodes_read_half_constants_and_casts_keep_the_boundaries_fp32() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 3, 8, 8]).unwrap();
        let y = b.conv("conv0", x, ConvSpec::new(4, 3, 1).bias()).unwrap();
        let y = b.relu("relu", y).unwrap();
        let y = b.conv("conv1", y, ConvSpec::new(4, 3, 1)).unwrap();
        let mut g = b.finish("y", y).unwrap();
        g.fill_missing_weights(1);
        for id in g.node_ids() {
            let p = if g.node(id).name.starts_with("conv1") {
                "cpu"
            } else {
                "gpu"
            };
            g.annotate(id, keys::PROCESSOR, p);
        }
        let map = PrecisionMap::new(
            [
                ("cpu".to_string(), Precision::Fp32),
                ("gpu".to_string(), Precision::Fp16),
            ]
            .into(),
            None,
        );
        let (h, report) = to_fp16(&g, &map).unwrap();
        assert_eq!(
            report,
            Fp16Report {
                nodes: 2,
                constants: 2,
                casts: 2
            }
        );
        let node = |name: &str| h.node(h.find(name).unwrap());
        assert_eq!(node("conv0").outputs[0].dtype, DType::F16);
        assert_eq!(h.node(node("conv0").inputs[0].node).name, "x_to_fp16");
        assert_eq!(h.const_tensor(node("conv0").inputs[1]).unwrap().dtype(), DType::F16);
        let conv1 = node("conv1");
        assert_eq!(h.node(conv1.inputs[0].node).name, "relu_to_fp32");
        assert_eq!(conv1.outputs[0].dtype, DType::F32);
        assert_eq!(
            node("relu_to_fp32")
                .annotations
                .get(keys::PROCESSOR)
                .map(String::as_str),
            Some("gpu")
        );
        assert_eq!(h.inputs().len(), 1);
        assert_eq!(h.node(h.inputs()[0]).outputs[0].dtype, DType::F32);
        h.check().unwrap();
    }
}
