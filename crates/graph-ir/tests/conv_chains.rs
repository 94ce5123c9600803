//! Property tests on random conv chains built through the IR: every graph
//! passes `check`, and an ONNX export→import round trip keeps every node's
//! op, facts, costs and annotations.

use graph_ir::builder::{Builder, ConvSpec};
use graph_ir::onnx::{ImportOptions, export_bytes, import_bytes};
use graph_ir::{Graph, keys};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Layer {
    out_mult: usize,
    kernel: usize,
    stride: usize,
    depthwise: bool,
    bn: bool,
    relu: bool,
    residual: bool,
}

fn layer() -> impl Strategy<Value = Layer> {
    (
        1usize..4,
        prop::sample::select(vec![1usize, 3, 5]),
        1usize..3,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(out_mult, kernel, stride, depthwise, bn, relu, residual)| Layer {
            out_mult,
            kernel,
            stride,
            depthwise,
            bn,
            relu,
            residual,
        })
}

fn build(channels: usize, size: usize, layers: &[Layer]) -> Graph {
    let mut b = Builder::new("chain");
    let mut x = b.input("x", &[1, channels, size, size]).unwrap();
    let mut c = channels;
    for (i, l) in layers.iter().enumerate() {
        let spec = if l.depthwise {
            ConvSpec::new(c, l.kernel, l.stride).group(c)
        } else {
            ConvSpec::new(4 * l.out_mult, l.kernel, l.stride).bias()
        };
        let mut y = b.conv(&format!("conv{i}"), x, spec).unwrap();
        if l.bn {
            y = b.batch_norm(&format!("bn{i}"), y).unwrap();
        }
        if l.relu {
            y = b.relu(&format!("relu{i}"), y).unwrap();
        }
        if l.residual && b.graph.fact(x) == b.graph.fact(y) {
            y = b.add(&format!("add{i}"), x, y).unwrap();
        }
        c = b.graph.fact(y).unwrap().shape[1];
        x = y;
    }
    let mut g = b.finish("y", x).unwrap();
    g.fill_missing_weights(11);
    for (n, id) in g.node_ids().into_iter().enumerate() {
        g.annotate(id, keys::PROCESSOR, ["cpu", "gpu", "dsp"][n % 3]);
        g.annotate(id, keys::STAGE, (n / 4).to_string());
    }
    g.metadata.insert("stretch.plan".into(), "{\"version\":1}".into());
    g
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn export_import_keeps_the_graph(channels in 1usize..6, size in 5usize..20, layers in prop::collection::vec(layer(), 1..6)) {
        let g = build(channels, size, &layers);
        g.check().unwrap();
        let bytes = export_bytes(&g).unwrap();
        let back = import_bytes(bytes.into(), "chain", &ImportOptions::default()).unwrap();
        back.check().unwrap();
        prop_assert_eq!(back.len(), g.len());
        prop_assert_eq!(back.total_cost(), g.total_cost());
        prop_assert_eq!(&back.metadata, &g.metadata);
        for id in g.node_ids() {
            let a = g.node(id);
            let bid = back.find(&a.name).expect("node kept by name");
            let b = back.node(bid);
            prop_assert_eq!(&a.op, &b.op, "op of {}", a.name);
            prop_assert_eq!(&a.outputs, &b.outputs, "facts of {}", a.name);
            prop_assert_eq!(&a.annotations, &b.annotations, "annotations of {}", a.name);
            prop_assert_eq!(g.node_cost(id), back.node_cost(bid), "cost of {}", a.name);
        }
    }
}
