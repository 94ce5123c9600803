//! Grouping units into stem, stages and head.

use super::blocks::{boundaries, residual_blocks, stem_end};
use super::cuts::MainPath;
use super::{AnalysisError, Block, BlockKind, Segment, Stage, Structure};
use crate::graph::Graph;
use crate::ops::Op;

/// Finds stem, stages and head of a single-input CNN. With several outputs
/// (a segmentation or detection head), the head holds every node after the
/// last value all outputs depend on, and its `output` is the first output.
pub fn analyze(g: &Graph) -> Result<Structure, AnalysisError> {
    if g.inputs().len() != 1 || g.outputs().is_empty() {
        return Err(AnalysisError::NotSingleInputOutput {
            inputs: g.inputs().len(),
            outputs: g.outputs().len(),
        });
    }
    let mp = MainPath::new(g)?;
    let stem = stem_end(g, &mp).ok_or(AnalysisError::NoConvolution)?;
    let residuals = residual_blocks(g, &mp);
    let (bounds, head, head_reason) = boundaries(g, &mp, stem, &residuals);
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
        let keeps_shape = g.fact(block.segment.input) == g.fact(block.segment.output);
        let joins = (kind == BlockKind::Residual || keeps_shape)
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
    let head_seg = if g.outputs().len() == 1 {
        segment(head, last)
    } else {
        Segment {
            input: mp.cuts[head],
            output: g.outputs()[0].1,
            nodes: mp.order[mp.pos[&mp.cuts[head].node] + 1..].to_vec(),
        }
    };
    Ok(Structure {
        stem: stem_seg,
        stages,
        head: head_seg,
        head_reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::BlockKind;
    use crate::builder::{Builder, ConvSpec};
    use crate::ops::UnaryOp;

    fn blocks(s: &Structure) -> Vec<usize> {
        s.stages.iter().map(|st| st.blocks.len()).collect()
    }

    #[test]
    fn resnet_like() {
        let mut b = Builder::new("r");
        let x = b.input("x", &[1, 3, 32, 32]).unwrap();
        let y = b.conv_bn("stem", x, ConvSpec::new(16, 3, 1), true).unwrap();
        let y = b.max_pool("pool", y, 3, 2).unwrap();
        let y = b.basic_block("l1.0", y, 16, 1).unwrap();
        let y = b.basic_block("l1.1", y, 16, 1).unwrap();
        let y = b.basic_block("l2.0", y, 32, 2).unwrap();
        let y = b.basic_block("l2.1", y, 32, 1).unwrap();
        let y = b.basic_block("l2.2", y, 32, 1).unwrap();
        let y = b.classifier("head", y, 10).unwrap();
        let g = b.finish("y", y).unwrap();
        let s = analyze(&g).unwrap();
        assert_eq!(blocks(&s), [2, 3]);
        assert_eq!(s.stages[1].blocks[0].kind, BlockKind::Transition);
        assert_eq!(s.stages[1].residual_blocks(), 2);
        assert_eq!(g.node(s.stem.output.node).name, "pool");
        assert_eq!(s.head.nodes.len(), 3);
        let total = s.stem.nodes.len() + s.head.nodes.len() + s.stages.iter().map(|st| st.nodes().len()).sum::<usize>();
        assert_eq!(
            total,
            g.len()
                - 1
                - g.node_ids()
                    .iter()
                    .filter(|i| matches!(g.node(**i).op, Op::Const(_)))
                    .count()
        );
    }

    #[test]
    fn a_constant_among_the_outputs_is_not_on_the_main_path() {
        let mut b = Builder::new("c");
        let x = b.input("x", &[1, 3, 8, 8]).unwrap();
        let y = b.conv_bn("c1", x, ConvSpec::new(8, 3, 1), true).unwrap();
        let mut g = b.finish("y", y).unwrap();
        let w = g.add_const("w", crate::Tensor::from_f32([2], &[1.0, 2.0])).unwrap();
        g.set_outputs(vec![("y".into(), y), ("w".into(), w)]).unwrap();
        let s = analyze(&g).unwrap();
        assert!(s.stages.is_empty());
    }

    #[test]
    fn plain_cnn_splits_at_pooling() {
        let mut b = Builder::new("v");
        let x = b.input("x", &[1, 3, 32, 32]).unwrap();
        let y = b.conv_bn("c1", x, ConvSpec::new(8, 3, 1), true).unwrap();
        let y = b.conv_bn("c2", y, ConvSpec::new(8, 3, 1), true).unwrap();
        let y = b.max_pool("p2", y, 2, 2).unwrap();
        let y = b.conv_bn("c3", y, ConvSpec::new(16, 3, 1), true).unwrap();
        let y = b.max_pool("p3", y, 2, 2).unwrap();
        let y = b.classifier("head", y, 10).unwrap();
        let g = b.finish("y", y).unwrap();
        let s = analyze(&g).unwrap();
        assert_eq!(blocks(&s), [1, 1]);
        assert_eq!(g.node(s.stages[0].output().node).name, "p2");
    }

    #[test]
    fn inverted_residuals_split_at_linear_bottlenecks() {
        let mut b = Builder::new("m");
        let x = b.input("x", &[1, 3, 32, 32]).unwrap();
        let stem = b.conv_bn("stem", x, ConvSpec::new(16, 3, 2), false).unwrap();
        let stem = b
            .unary(
                "stem.act",
                stem,
                UnaryOp::Clip {
                    min: Some(0.0),
                    max: Some(6.0),
                },
            )
            .unwrap();
        let ir = |b: &mut Builder, name: &str, x, cin: usize, cout: usize, stride| {
            let e = b
                .conv_bn(&format!("{name}.expand"), x, ConvSpec::new(cin * 4, 1, 1), true)
                .unwrap();
            let d = b
                .conv_bn(
                    &format!("{name}.dw"),
                    e,
                    ConvSpec::new(cin * 4, 3, stride).group(cin * 4),
                    true,
                )
                .unwrap();
            let p = b
                .conv_bn(&format!("{name}.project"), d, ConvSpec::new(cout, 1, 1), false)
                .unwrap();
            if cin == cout && stride == 1 {
                b.add(&format!("{name}.add"), x, p).unwrap()
            } else {
                p
            }
        };
        let y = ir(&mut b, "b1", stem, 16, 8, 1);
        let y = ir(&mut b, "b2", y, 8, 24, 2);
        let y = ir(&mut b, "b3", y, 24, 24, 1);
        let y = b.classifier("head", y, 10).unwrap();
        let g = b.finish("y", y).unwrap();
        let s = analyze(&g).unwrap();
        assert_eq!(blocks(&s), [1, 2]);
        assert_eq!(g.node(s.stem.output.node).name, "stem.act");
    }

    #[test]
    fn rejects_graphs_without_convolution() {
        let mut b = Builder::new("n");
        let x = b.input("x", &[1, 4, 2, 2]).unwrap();
        let y = b.relu("r", x).unwrap();
        let g = b.finish("y", y).unwrap();
        assert_eq!(analyze(&g), Err(AnalysisError::NoConvolution));
    }
}
