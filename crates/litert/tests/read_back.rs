//! A lowered subgraph read back for pricing (`litert::cost_graph`): the
//! operators of the file as graph operators on the NCHW view, with the
//! shapes the ONNX graph has where they meet, and the PAD a stride-2
//! convolution needs counted.

use graph_ir::ops::{Conv, Flatten, Gemm, GlobalAveragePool, Unary, UnaryOp};
use graph_ir::{Fact, Graph, Op, Tensor};

fn model() -> Graph {
    let mut g = Graph::new("small");
    let x = g.add_input("x", Fact::f32(vec![1, 3, 8, 8])).unwrap();
    let w = g
        .add_const("w", Tensor::from_f32(vec![4, 3, 3, 3], &[0.01; 108]))
        .unwrap();
    let b = g.add_const("b", Tensor::from_f32(vec![4], &[0.1; 4])).unwrap();
    let conv = Conv {
        strides: [2, 2],
        pads: [1, 1, 1, 1],
        ..Conv::default()
    };
    let c = g.add_node("conv", Op::Conv(conv), &[x, w, b]).unwrap();
    let r = g
        .add_node("relu", Op::Unary(Unary { op: UnaryOp::Relu }), &[c.out(0)])
        .unwrap();
    let p = g
        .add_node("pool", Op::GlobalAveragePool(GlobalAveragePool), &[r.out(0)])
        .unwrap();
    let f = g
        .add_node("flat", Op::Flatten(Flatten { axis: 1 }), &[p.out(0)])
        .unwrap();
    let fw = g.add_const("fw", Tensor::from_f32(vec![5, 4], &[0.2; 20])).unwrap();
    let fb = g.add_const("fb", Tensor::from_f32(vec![5], &[0.0; 5])).unwrap();
    let gemm = Gemm {
        alpha: 1.0,
        beta: 1.0,
        trans_a: false,
        trans_b: true,
    };
    let y = g.add_node("fc", Op::Gemm(gemm), &[f.out(0), fw, fb]).unwrap();
    g.set_outputs(vec![("y".into(), y.out(0))]).unwrap();
    g
}

#[test]
fn a_lowered_subgraph_reads_back_with_its_inserted_pad() {
    let g = model();
    let m = litert::lower(&g, "sg0").unwrap();
    assert_eq!(m.inputs[0].shape, [1, 8, 8, 3], "NHWC input");
    assert!(m.inputs[0].nhwc);
    assert_eq!(m.outputs[0].shape, [1, 5]);
    let back = litert::cost_graph(&m.bytes, "sg0.tflite").unwrap();
    let ops: Vec<&str> = back
        .compute_order()
        .unwrap()
        .into_iter()
        .map(|id| back.node(id).op.name())
        .collect();
    assert_eq!(ops, ["Pad", "Conv", "Relu", "ReduceMean", "Reshape", "Gemm"], "{ops:?}");
    let input = back.inputs()[0];
    assert_eq!(back.node(input).outputs[0].shape, [1, 3, 8, 8], "seen NCHW");
    let (_, out) = back.outputs()[0];
    assert_eq!(back.fact(out).unwrap().shape, [1, 5]);
}

#[test]
fn bytes_that_are_not_a_litert_file_are_named() {
    let err = litert::cost_graph(b"not a model at all", "x.tflite").unwrap_err();
    assert!(err.to_string().starts_with("x.tflite: "), "{err}");
}
