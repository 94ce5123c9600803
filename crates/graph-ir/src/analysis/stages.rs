//! Grouping units into stem, stages and head.

use super::blocks::{boundaries, residual_blocks, stem_end};
use super::cuts::MainPath;
use super::{AnalysisError, Block, BlockKind, Segment, Stage, Structure};
use crate::graph::Graph;
use crate::ops::Op;

/// Finds stem, stages and head of a single-input, single-output CNN.
pub fn analyze(g: &Graph) -> Result<Structure, AnalysisError> {
    if g.inputs().len() != 1 || g.outputs().len() != 1 {
        return Err(AnalysisError::NotSingleInputOutput {
            inputs: g.inputs().len(),
            outputs: g.outputs().len(),
        });
    }
    let mp = MainPath::new(g)?;
    let stem = stem_end(g, &mp).ok_or(AnalysisError::NoConvolution)?;
    let residuals = residual_blocks(g, &mp);
    let (bounds, head) = boundaries(g, &mp, stem, &residuals);
    let segment = |a: usize, b: usize| Segment {
        input: mp.cuts[a],
        output: mp.cuts[b],
        nodes: mp.between(mp.cuts[a], mp.cuts[b]),
    };
    let bounds: Vec<usize> = bounds.into_iter().collect();
    let mut stages: Vec<Stage> = Vec::new();
    for w in bounds.windows(2) {
        let (a, b) = (w[0], w[1]);
        let kind = if residuals.iter().any(|r| r.entry == a && r.exit == b) {
            BlockKind::Residual
        } else {
            BlockKind::Transition
        };
        let block = Block {
            kind,
            segment: segment(a, b),
        };
        let joins = kind == BlockKind::Residual
            && stages
                .last()
                .is_some_and(|s| g.fact(s.output()) == g.fact(block.segment.output));
        match stages.last_mut() {
            Some(s) if joins => s.blocks.push(block),
            _ => stages.push(Stage {
                index: stages.len(),
                blocks: vec![block],
            }),
        }
    }
    let input = g.inputs()[0].out(0);
    let stem_seg = Segment {
        input,
        output: mp.cuts[stem],
        nodes: mp.order[1..=mp.pos[&mp.cuts[stem].node]]
            .iter()
            .copied()
            .filter(|id| !matches!(g.node(*id).op, Op::Input(_)))
            .collect(),
    };
    let last = mp.cuts.len() - 1;
    let head_seg = segment(head, last);
    Ok(Structure {
        stem: stem_seg,
        stages,
        head: head_seg,
    })
}
