//! Per-node and total work: MACs, FLOPs, parameters and activation bytes.

use crate::graph::{Graph, NodeId};
use crate::ops::{Cost, Op};
use serde::Serialize;
use std::collections::HashSet;
use std::ops::AddAssign;

/// Work and size attributed to a node or a set of nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NodeCost {
    /// Multiply-accumulates of Conv, Gemm and MatMul.
    pub macs: u64,
    /// Floating-point operations (2 per MAC plus element-wise work).
    pub flops: u64,
    /// Elements of the float constants this node reads (each constant is
    /// counted at its first consumer only).
    pub params: u64,
    /// Bytes of the values this node produces.
    pub activation_bytes: u64,
}

impl AddAssign for NodeCost {
    fn add_assign(&mut self, o: NodeCost) {
        self.macs = self.macs.saturating_add(o.macs);
        self.flops = self.flops.saturating_add(o.flops);
        self.params = self.params.saturating_add(o.params);
        self.activation_bytes = self.activation_bytes.saturating_add(o.activation_bytes);
    }
}

impl Graph {
    /// Whether node `id` is the first consumer (lowest id, lowest slot) of constant `c`.
    fn owns_const(&self, id: NodeId, c: NodeId) -> bool {
        self.consumers(c.out(0)).first().map(|(n, _)| *n) == Some(id)
    }

    /// Cost of one node. Constants and inputs cost nothing themselves; their
    /// parameters are attributed to their first consumer.
    pub fn node_cost(&self, id: NodeId) -> NodeCost {
        let node = self.node(id);
        if matches!(node.op, Op::Const(_) | Op::Input(_)) {
            return NodeCost::default();
        }
        let inputs: Vec<_> = node.inputs.iter().filter_map(|o| self.fact(*o)).collect();
        let Cost { macs, flops } = node.op.cost(&inputs, &node.outputs);
        let mut seen = HashSet::new();
        let params = node
            .inputs
            .iter()
            .filter(|o| seen.insert(o.node))
            .filter_map(|o| self.const_tensor(*o).map(|t| (o.node, t)))
            .filter(|(c, t)| t.dtype().is_float() && self.owns_const(id, *c))
            .map(|(_, t)| t.volume() as u64)
            .sum();
        NodeCost {
            macs,
            flops,
            params,
            activation_bytes: node.outputs.iter().map(|f| f.bytes() as u64).sum(),
        }
    }

    /// Summed cost of a set of nodes.
    pub fn cost_of<'a>(&self, ids: impl IntoIterator<Item = &'a NodeId>) -> NodeCost {
        let mut total = NodeCost::default();
        for id in ids {
            total += self.node_cost(*id);
        }
        total
    }

    /// Cost of the whole graph. `params` counts every float constant with a consumer.
    pub fn total_cost(&self) -> NodeCost {
        self.cost_of(&self.node_ids())
    }
}
