//! Per-part figures of a [`Structure`]: shapes, channels, MACs, FLOPs, params.

use super::{Segment, Structure};
use crate::cost::NodeCost;
use crate::graph::{Graph, NodeId, Outlet};
use serde::Serialize;

/// Figures for the stem, one stage or the head.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartSummary {
    /// `stem`, `stage` or `head`.
    pub kind: &'static str,
    /// The stage's index, counted from 0 as plans and errors count it (0
    /// for stem and head too: `kind` tells them apart).
    pub index: usize,
    /// Blocks in the stage (transition included); 0 for stem and head.
    pub blocks: usize,
    /// Identity-residual blocks among them.
    pub residual_blocks: usize,
    pub input_shape: Vec<usize>,
    pub output_shape: Vec<usize>,
    /// Output channels (dimension 1 of the output).
    pub channels: usize,
    pub macs: u64,
    pub flops: u64,
    pub params: u64,
    pub activation_bytes: u64,
    /// This part's MACs over the model's total MACs.
    pub mac_share: f64,
    /// Number of operator nodes (constants excluded).
    pub nodes: usize,
}

/// Figures for every part and the totals.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub stem: PartSummary,
    pub stages: Vec<PartSummary>,
    pub head: PartSummary,
    pub total: NodeCost,
    /// Why the head starts where it does.
    pub head_reason: String,
}

fn shape_of(g: &Graph, o: Outlet) -> Vec<usize> {
    g.fact(o).map(|f| f.shape.clone()).unwrap_or_default()
}

fn part(
    g: &Graph,
    kind: &'static str,
    index: usize,
    input: Outlet,
    output: Outlet,
    nodes: &[NodeId],
    total_macs: u64,
) -> PartSummary {
    let c = g.cost_of(nodes);
    let output_shape = shape_of(g, output);
    PartSummary {
        kind,
        index,
        blocks: 0,
        residual_blocks: 0,
        input_shape: shape_of(g, input),
        channels: output_shape.get(1).copied().unwrap_or(0),
        output_shape,
        macs: c.macs,
        flops: c.flops,
        params: c.params,
        activation_bytes: c.activation_bytes,
        mac_share: if total_macs == 0 {
            0.0
        } else {
            c.macs as f64 / total_macs as f64
        },
        nodes: nodes.len(),
    }
}

impl Structure {
    /// Computes the figures of every part on `g` (the graph this was found in).
    pub fn summary(&self, g: &Graph) -> Summary {
        let total = g.total_cost();
        let seg = |kind, s: &Segment| part(g, kind, 0, s.input, s.output, &s.nodes, total.macs);
        let stages = self
            .stages
            .iter()
            .map(|st| PartSummary {
                blocks: st.blocks.len(),
                residual_blocks: st.residual_blocks(),
                ..part(g, "stage", st.index, st.input(), st.output(), &st.nodes(), total.macs)
            })
            .collect();
        Summary {
            stem: seg("stem", &self.stem),
            stages,
            head: seg("head", &self.head),
            total,
            head_reason: self.head_reason.clone(),
        }
    }
}
