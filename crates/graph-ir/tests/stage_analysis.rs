//! Stage analysis on the shapes of real architectures built here: every
//! stage holds a convolution, modules joined by a Concat are blocks, a
//! channel shuffle's rank-5 values do not end the stages, and the head says
//! why it starts where it does.

use graph_ir::analysis::{Structure, analyze};
use graph_ir::builder::{Builder, ConvSpec};
use graph_ir::ops::{Concat, Op, Pool, PoolKind, Reshape, Split, Transpose};
use graph_ir::{Graph, Outlet};

fn blocks(s: &Structure) -> Vec<usize> {
    s.stages.iter().map(|st| st.blocks.len()).collect()
}

/// Share of the model's MACs in the head.
fn head_share(g: &Graph, s: &Structure) -> f64 {
    g.cost_of(&s.head.nodes).macs as f64 / g.total_cost().macs as f64
}

fn every_stage_computes(g: &Graph, s: &Structure) {
    for st in &s.stages {
        assert!(g.cost_of(&st.nodes()).macs > 0, "stage {} has no MACs", st.index);
    }
}

fn concat(b: &mut Builder, name: &str, parts: &[Outlet]) -> Outlet {
    b.node(name, Op::Concat(Concat { axis: 1 }), parts).unwrap()
}

/// ShuffleNetV2 unit: split the channels, transform one half, concatenate,
/// shuffle through a rank-5 value; a stride-2 unit transforms both copies.
fn shuffle_unit(b: &mut Builder, name: &str, x: Outlet, c: usize, stride: usize) -> Outlet {
    let half = c / 2;
    let branch = |b: &mut Builder, tag: &str, x: Outlet| {
        let y = b
            .conv_bn(&format!("{name}.{tag}.pw1"), x, ConvSpec::new(half, 1, 1), true)
            .unwrap();
        let y = b
            .conv_bn(
                &format!("{name}.{tag}.dw"),
                y,
                ConvSpec::new(half, 3, stride).group(half),
                false,
            )
            .unwrap();
        b.conv_bn(&format!("{name}.{tag}.pw2"), y, ConvSpec::new(half, 1, 1), true)
            .unwrap()
    };
    let joined = if stride == 1 {
        let split = Op::Split(Split {
            axis: 1,
            sizes: vec![half, half],
        });
        let left = b.node(&format!("{name}.split"), split, &[x]).unwrap();
        let right = Outlet { slot: 1, ..left };
        let right = branch(b, "r", right);
        concat(b, &format!("{name}.concat"), &[left, right])
    } else {
        let cin = x_channels(b, x);
        let left = b
            .conv_bn(&format!("{name}.l.dw"), x, ConvSpec::new(cin, 3, 2).group(cin), false)
            .unwrap();
        let left = b
            .conv_bn(&format!("{name}.l.pw"), left, ConvSpec::new(half, 1, 1), true)
            .unwrap();
        let right = branch(b, "r", x);
        concat(b, &format!("{name}.concat"), &[left, right])
    };
    let [n, _, h, w] = shape4(b, joined);
    let r5 = |shape: Vec<i64>| {
        Op::Reshape(Reshape {
            shape,
            allowzero: false,
        })
    };
    let y = b
        .node(
            &format!("{name}.r5"),
            r5(vec![n as i64, 2, half as i64, h as i64, w as i64]),
            &[joined],
        )
        .unwrap();
    let y = b
        .node(
            &format!("{name}.t"),
            Op::Transpose(Transpose {
                perm: vec![0, 2, 1, 3, 4],
            }),
            &[y],
        )
        .unwrap();
    b.node(
        &format!("{name}.r4"),
        r5(vec![n as i64, c as i64, h as i64, w as i64]),
        &[y],
    )
    .unwrap()
}

fn shape4(b: &Builder, x: Outlet) -> [usize; 4] {
    let s = &b.graph().fact(x).unwrap().shape;
    [s[0], s[1], s[2], s[3]]
}

fn x_channels(b: &Builder, x: Outlet) -> usize {
    shape4(b, x)[1]
}

#[test]
fn shufflenet_v2_units_form_stages_despite_the_rank_5_shuffle() {
    let mut b = Builder::new("shufflenetv2");
    let x = b.input("x", &[1, 3, 64, 64]).unwrap();
    let mut y = b.conv_bn("stem", x, ConvSpec::new(24, 3, 2), true).unwrap();
    y = b.max_pool("stem.pool", y, 3, 2).unwrap();
    for (s, c) in [48, 96, 192].into_iter().enumerate() {
        y = shuffle_unit(&mut b, &format!("s{s}.u0"), y, c, 2);
        for u in 1..3 {
            y = shuffle_unit(&mut b, &format!("s{s}.u{u}"), y, c, 1);
        }
    }
    let y = b.classifier("head", y, 10).unwrap();
    let g = b.finish("y", y).unwrap();
    let s = analyze(&g).unwrap();
    assert_eq!(blocks(&s), [3, 3, 3], "{}", s.head_reason);
    assert!(head_share(&g, &s) < 0.05, "{}", head_share(&g, &s));
    every_stage_computes(&g, &s);
    assert!(
        s.head_reason.contains("reduces the spatial dimensions away"),
        "{}",
        s.head_reason
    );
}

/// SqueezeNet fire module: squeeze 1x1, then 1x1 and 3x3 expands concatenated.
fn fire(b: &mut Builder, name: &str, x: Outlet, squeeze: usize, expand: usize) -> Outlet {
    let s = b
        .conv(&format!("{name}.squeeze"), x, ConvSpec::new(squeeze, 1, 1).bias())
        .unwrap();
    let s = b.relu(&format!("{name}.squeeze.relu"), s).unwrap();
    let e1 = b
        .conv(&format!("{name}.e1"), s, ConvSpec::new(expand, 1, 1).bias())
        .unwrap();
    let e1 = b.relu(&format!("{name}.e1.relu"), e1).unwrap();
    let e3 = b
        .conv(&format!("{name}.e3"), s, ConvSpec::new(expand, 3, 1).bias())
        .unwrap();
    let e3 = b.relu(&format!("{name}.e3.relu"), e3).unwrap();
    concat(b, &format!("{name}.concat"), &[e1, e3])
}

#[test]
fn squeezenet_fire_modules_are_blocks_and_the_late_ones_are_not_head() {
    let mut b = Builder::new("squeezenet");
    let x = b.input("x", &[1, 3, 96, 96]).unwrap();
    let y = b.conv("conv1", x, ConvSpec::new(64, 3, 2).bias()).unwrap();
    let y = b.relu("conv1.relu", y).unwrap();
    let mut y = b.max_pool("pool1", y, 3, 2).unwrap();
    let fires = [
        (16, 64),
        (16, 64),
        (32, 128),
        (32, 128),
        (48, 192),
        (48, 192),
        (64, 256),
        (64, 256),
    ];
    for (i, (sq, ex)) in fires.into_iter().enumerate() {
        if i == 2 || i == 4 {
            y = b.max_pool(&format!("pool{i}"), y, 3, 2).unwrap();
        }
        y = fire(&mut b, &format!("fire{}", i + 2), y, sq, ex);
    }
    let y = b.conv("conv10", y, ConvSpec::new(10, 1, 1).bias()).unwrap();
    let y = b.relu("conv10.relu", y).unwrap();
    let pooled = b.node("gap", Op::GlobalAveragePool(Default::default()), &[y]).unwrap();
    let g = b.finish("y", pooled).unwrap();
    let s = analyze(&g).unwrap();
    every_stage_computes(&g, &s);
    let in_stages: usize = s.stages.iter().map(|st| st.blocks.len()).sum();
    assert_eq!(in_stages, 8, "every fire module is a block: {:?}", blocks(&s));
    assert!(head_share(&g, &s) < 0.1, "{}", head_share(&g, &s));
}

#[test]
fn vgg_with_an_identity_average_pool_has_no_empty_stage() {
    let mut b = Builder::new("vgg11");
    let x = b.input("x", &[1, 3, 64, 64]).unwrap();
    let mut y = b.conv_bn("c0", x, ConvSpec::new(16, 3, 1), true).unwrap();
    y = b.max_pool("p0", y, 2, 2).unwrap();
    for (s, c) in [32, 64, 64].into_iter().enumerate() {
        y = b.conv_bn(&format!("s{s}.a"), y, ConvSpec::new(c, 3, 1), true).unwrap();
        y = b.conv_bn(&format!("s{s}.b"), y, ConvSpec::new(c, 3, 1), true).unwrap();
        y = b.max_pool(&format!("s{s}.pool"), y, 2, 2).unwrap();
    }
    let avg = Pool {
        kind: PoolKind::Average {
            count_include_pad: false,
        },
        kernel: [1, 1],
        strides: [1, 1],
        pads: [0; 4],
        dilations: [1, 1],
        ceil_mode: false,
    };
    let y = b.node("avgpool", Op::Pool(avg), &[y]).unwrap();
    let y = b.classifier("head", y, 10).unwrap();
    let g = b.finish("y", y).unwrap();
    let s = analyze(&g).unwrap();
    every_stage_computes(&g, &s);
    assert_eq!(blocks(&s), [1, 1, 1]);
    assert!(s.head.nodes.iter().any(|id| g.node(*id).name == "avgpool"));
}

#[test]
fn dense_layers_that_append_features_do_not_split_a_block() {
    let mut b = Builder::new("densenet");
    let x = b.input("x", &[1, 3, 32, 32]).unwrap();
    let mut y = b.conv_bn("stem", x, ConvSpec::new(16, 3, 2), true).unwrap();
    for d in 0..2 {
        for l in 0..3 {
            let f = b
                .conv_bn(&format!("d{d}.l{l}"), y, ConvSpec::new(8, 3, 1), true)
                .unwrap();
            y = concat(&mut b, &format!("d{d}.l{l}.cat"), &[y, f]);
        }
        let c = x_channels(&b, y) / 2;
        y = b.conv_bn(&format!("t{d}"), y, ConvSpec::new(c, 1, 1), true).unwrap();
        y = b.max_pool(&format!("t{d}.pool"), y, 2, 2).unwrap();
    }
    let y = b.classifier("head", y, 10).unwrap();
    let g = b.finish("y", y).unwrap();
    let s = analyze(&g).unwrap();
    every_stage_computes(&g, &s);
    assert_eq!(blocks(&s), [1, 1], "one dense block and transition per stage");
}
