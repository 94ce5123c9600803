//! Burn's DepthToSpace and SpaceToDepth in both orders against values
//! written out by hand from the ONNX definitions. (The exported form of a
//! CRD SpaceToDepth, an opset-17 composition through rank-6 values, cannot
//! be re-imported for training, so tests/lowering.rs compares only its DCR
//! form with onnxruntime.)

use graph_ir::ops::{DepthOrder, DepthToSpace, Op, SpaceToDepth};
use graph_ir::{Fact, Graph};
use training::{Backend, Inference};

fn run(op: Op, input: [usize; 4]) -> Vec<f32> {
    let mut g = Graph::new("one");
    let x = g.add_input("x", Fact::f32(input)).expect("input");
    let y = g.add_node("op", op, &[x]).expect("node").out(0);
    g.set_outputs(vec![("y".into(), y)]).expect("outputs");
    let inf = Inference::new(&g, &Backend::Flex.device()).expect("lower");
    let data: Vec<f32> = (0..input.iter().product::<usize>()).map(|v| v as f32).collect();
    inf.scores(&data, 1)
}

#[test]
fn blocks_move_as_onnx_defines() {
    // x[0, 0, i, j] = 4i + j on a 4x4 map; block (by, bx) of output (i, j)
    // is x[2i + by, 2j + bx]. Both orders give channel `by·2 + bx` for one
    // input channel.
    let s2d = |order| Op::SpaceToDepth(SpaceToDepth { block: 2, order });
    let want: Vec<f32> = [0., 2., 8., 10., 1., 3., 9., 11., 4., 6., 12., 14., 5., 7., 13., 15.].to_vec();
    assert_eq!(run(s2d(DepthOrder::Dcr), [1, 1, 4, 4]), want);
    assert_eq!(run(s2d(DepthOrder::Crd), [1, 1, 4, 4]), want);
    // Two input channels (x[c, i, j] = 4c + 2i + j on 2x2 maps, one block
    // each): DCR puts the block offset first (channel k·2 + c), CRD the
    // channel first (channel c·4 + k).
    let dcr: Vec<f32> = [0., 4., 1., 5., 2., 6., 3., 7.].to_vec();
    let crd: Vec<f32> = [0., 1., 2., 3., 4., 5., 6., 7.].to_vec();
    assert_eq!(run(s2d(DepthOrder::Dcr), [1, 2, 2, 2]), dcr);
    assert_eq!(run(s2d(DepthOrder::Crd), [1, 2, 2, 2]), crd);
    // DepthToSpace of the same order undoes each.
    let d2s = |order| Op::DepthToSpace(DepthToSpace { block: 2, order });
    let back: Vec<f32> = [0., 2., 4., 6., 1., 3., 5., 7.].to_vec();
    assert_eq!(run(d2s(DepthOrder::Dcr), [1, 8, 1, 1]), back);
    assert_eq!(
        run(d2s(DepthOrder::Crd), [1, 8, 1, 1]),
        (0..8).map(|v| v as f32).collect::<Vec<_>>()
    );
}
