//! Burn inference through the training lowering matches onnxruntime on every
//! fixture (random weights, 64x64 input), on branched versions of them in
//! both merge modes, and on the zoo models: max abs difference within 1e-4 of
//! the output's scale (`check_onnx.py expect-list`).

mod common;

use common::*;
use graph_ir::onnx::{ImportOptions, import_file};
use scheduler_rt::npy::{Array, write};
use training::{Backend, Inference};

/// Every element-wise activation, binary op and softmax the IR knows
/// beyond ReLU, Add and Mul, InstanceNormalization and LRN (windows of 5
/// and 3: onnxruntime takes odd sizes only), the upsampling ops, between a
/// convolution and a classifier; the
/// values stay finite (Sqrt of an Abs, Pow of a positive base, Exp of a
/// non-positive value).
fn activations_model() -> graph_ir::Graph {
    use graph_ir::builder::{Builder, ConvSpec};
    use graph_ir::ops::{BinaryOp as B, UnaryOp as U};
    let mut b = Builder::new("activations");
    let x = b.input("x", &[1, 3, 8, 8]).unwrap();
    let y = b.conv("conv", x, ConvSpec::new(8, 3, 1).bias()).unwrap();
    let z = b.conv("conv2", x, ConvSpec::new(8, 3, 1).bias()).unwrap();
    let mut u = |name: &str, x, op| b.unary(name, x, op).unwrap();
    let leaky = u("leaky", y, U::LeakyRelu { alpha: 0.1 });
    let elu = u("elu", y, U::Elu { alpha: 0.7 });
    let selu = u("selu", y, U::Selu { alpha: 1.5, gamma: 1.1 });
    let softplus = u("softplus", y, U::Softplus);
    let softsign = u("softsign", y, U::Softsign);
    let abs = u("abs", y, U::Abs);
    let sqrt = u("sqrt", abs, U::Sqrt);
    let neg = u("neg", abs, U::Neg);
    let exp = u("exp", neg, U::Exp);
    let slope = b.param("prelu.slope", &[8, 1, 1]).unwrap();
    let mut terms = vec![
        b.binary("max", leaky, z, B::Max).unwrap(),
        b.binary("min", selu, z, B::Min).unwrap(),
        b.binary("elu_softsign", elu, softsign, B::Mul).unwrap(),
        b.binary("prelu", y, slope, B::PRelu).unwrap(),
        b.binary("pow", softplus, sqrt, B::Pow).unwrap(),
        b.binary("sub", exp, softsign, B::Sub).unwrap(),
    ];
    let mut t = terms.remove(0);
    for (k, o) in terms.into_iter().enumerate() {
        t = b.add(&format!("sum{k}"), t, o).unwrap();
    }
    let t = b.instance_norm("inorm", t).unwrap();
    let lrn = |size| {
        graph_ir::Op::Lrn(graph_ir::ops::Lrn {
            size,
            alpha: 0.5,
            beta: 0.75,
            bias: 1.5,
        })
    };
    let t = b.node("lrn5", lrn(5), &[t]).unwrap();
    let t = b.node("lrn3", lrn(3), &[t]).unwrap();
    let t = upsampling(&mut b, t);
    let sm = b.softmax("softmax", t, 1, false).unwrap();
    let lsm = b.softmax("log_softmax", t, -1, true).unwrap();
    let both = b.add("both", sm, lsm).unwrap();
    let out = b.classifier("head", both, 10).unwrap();
    b.finish("y", out).unwrap()
}

/// ConvTranspose, every Resize the lowering trains exactly, Tile and
/// ReduceSum on a `[1, 8, 8, 8]` value, summed back to that shape.
fn upsampling(b: &mut graph_ir::builder::Builder, t: graph_ir::Outlet) -> graph_ir::Outlet {
    use graph_ir::Op;
    use graph_ir::ops::*;
    let resize = |mode, coord, target| Op::Resize(Resize { mode, coord, target });
    let w = b.param("ct.w", &[8, 4, 3, 3]).unwrap();
    let bias = b.param("ct.b", &[4]).unwrap();
    let ct = ConvTranspose {
        strides: [2, 2],
        pads: [1, 1, 1, 1],
        output_padding: [1, 1],
        ..ConvTranspose::default()
    };
    let ct = b.node("ct", Op::ConvTranspose(ct), &[t, w, bias]).unwrap();
    let floor = ResizeMode::Nearest(NearestMode::Floor);
    let near = resize(floor, CoordMode::Asymmetric, ResizeTarget::Scales([0.5, 0.5]));
    let near = b.node("near", near, &[ct]).unwrap();
    let tiled = b
        .node(
            "tile",
            Op::Tile(Tile {
                repeats: vec![1, 2, 1, 1],
            }),
            &[near],
        )
        .unwrap();
    let bil = resize(ResizeMode::Linear, CoordMode::HalfPixel, ResizeTarget::Sizes([8, 8]));
    let bil = b.node("bilinear", bil, &[ct]).unwrap();
    let sum = Reduce {
        kind: ReduceKind::Sum,
        axes: vec![1],
        keepdims: true,
    };
    let sum = b.node("rsum", Op::Reduce(sum), &[bil]).unwrap();
    let corners = resize(
        ResizeMode::Linear,
        CoordMode::AlignCorners,
        ResizeTarget::Scales([2.0, 2.0]),
    );
    let corners = b.node("corners", corners, &[t]).unwrap();
    let back = resize(floor, CoordMode::Asymmetric, ResizeTarget::Sizes([8, 8]));
    let back = b.node("back", back, &[corners]).unwrap();
    let half = ResizeMode::Nearest(NearestMode::RoundPreferFloor);
    let half = resize(half, CoordMode::HalfPixel, ResizeTarget::Scales([2.0, 2.0]));
    let half = b.node("half", half, &[t]).unwrap();
    let pool = Pool {
        kind: PoolKind::Max,
        kernel: [2, 2],
        strides: [2, 2],
        pads: [0; 4],
        dilations: [1, 1],
        ceil_mode: false,
    };
    let half = b.node("half.pool", Op::Pool(pool), &[half]).unwrap();
    let mut y = b.add("up0", t, tiled).unwrap();
    for (k, o) in [sum, back, half].into_iter().enumerate() {
        y = b.add(&format!("up{}", k + 1), y, o).unwrap();
    }
    y
}

/// The operators of ConvNeXt-style blocks and pixel-shuffle heads: a
/// depthwise 7x7 convolution, LayerNorm over channels-last values, matrix
/// products with a matrix and with a vector, both Gelus, Mish, Erf, Log,
/// DepthToSpace in both orders, SpaceToDepth (DCR: the CRD form is
/// written as a rank-6 composition, see training's depth_space test), bicubic resizing (edge
/// values and excluded outside taps) and GlobalMaxPool.
fn blocks_model() -> graph_ir::Graph {
    use graph_ir::Op;
    use graph_ir::builder::{Builder, ConvSpec};
    use graph_ir::ops::*;
    let mut b = Builder::new("blocks");
    let x = b.input("x", &[1, 3, 8, 8]).unwrap();
    let y = b.conv("stem", x, ConvSpec::new(8, 1, 1).bias()).unwrap();
    let y = b.conv("dw", y, ConvSpec::new(8, 7, 1).group(8).bias()).unwrap();
    let t = |perm: Vec<usize>| Op::Transpose(Transpose { perm });
    let nhwc = b.node("nhwc", t(vec![0, 2, 3, 1]), &[y]).unwrap();
    let (scale, shift) = (b.param("ln.scale", &[8]).unwrap(), b.param("ln.bias", &[8]).unwrap());
    let ln = Op::LayerNorm(LayerNorm {
        axis: -1,
        epsilon: 1e-5,
    });
    let ln = b.node("ln", ln, &[nhwc, scale, shift]).unwrap();
    let w1 = b.param("pw1.w", &[8, 16]).unwrap();
    let h = b.node("pw1", Op::MatMul(MatMul), &[ln, w1]).unwrap();
    let h = b.unary("gelu", h, UnaryOp::Gelu { tanh: false }).unwrap();
    let w2 = b.param("pw2.w", &[16, 8]).unwrap();
    let h = b.node("pw2", Op::MatMul(MatMul), &[h, w2]).unwrap();
    let v = b.param("vec.w", &[8]).unwrap();
    let dot = b.node("dot", Op::MatMul(MatMul), &[h, v]).unwrap();
    let dot = b
        .node(
            "dot.c",
            Op::Reshape(Reshape {
                shape: vec![1, 1, 8, 8],
                allowzero: false,
            }),
            &[dot],
        )
        .unwrap();
    let h = b.node("nchw", t(vec![0, 3, 1, 2]), &[h]).unwrap();
    let y = b.add("residual", y, h).unwrap();
    let y = b.add("plus_dot", y, dot).unwrap();
    let y = b.unary("gelu_tanh", y, UnaryOp::Gelu { tanh: true }).unwrap();
    let y = b.unary("mish", y, UnaryOp::Mish).unwrap();
    let e = b.unary("erf", y, UnaryOp::Erf).unwrap();
    let positive = b.unary("sigmoid", y, UnaryOp::Sigmoid).unwrap();
    let l = b.unary("log", positive, UnaryOp::Log).unwrap();
    let y = b.add("erf_log", e, l).unwrap();
    let d2s = |order| Op::DepthToSpace(DepthToSpace { block: 2, order });
    let dcr = b.node("d2s_dcr", d2s(DepthOrder::Dcr), &[y]).unwrap();
    let crd = b.node("d2s_crd", d2s(DepthOrder::Crd), &[y]).unwrap();
    let both = b.add("d2s", dcr, crd).unwrap();
    let s2d = Op::SpaceToDepth(SpaceToDepth {
        block: 2,
        order: DepthOrder::Dcr,
    });
    let s2d = b.node("s2d", s2d, &[both]).unwrap();
    let y = b.add("s2d_res", y, s2d).unwrap();
    let cubic = |exclude_outside, coord, target| {
        Op::Resize(Resize {
            mode: ResizeMode::Cubic {
                a: -0.75,
                exclude_outside,
            },
            coord,
            target,
        })
    };
    let up = b
        .node(
            "cubic_up",
            cubic(false, CoordMode::HalfPixel, ResizeTarget::Scales([2.0, 2.0])),
            &[y],
        )
        .unwrap();
    let down = cubic(true, CoordMode::Asymmetric, ResizeTarget::Sizes([8, 8]));
    let down = b.node("cubic_down", down, &[up]).unwrap();
    let y = b.add("resized", y, down).unwrap();
    let gmp = b.node("gmp", Op::GlobalMaxPool(GlobalMaxPool), &[y]).unwrap();
    let out = b.classifier("head", gmp, 10).unwrap();
    b.finish("y", out).unwrap()
}

#[test]
fn burn_inference_matches_onnxruntime() {
    let dir = scratch("lowering");
    let host = arg(&repo().join("configs/devices/host.toml"));
    let mut models = Vec::new();
    for f in fixtures() {
        let out = dir.join(f.file_name().expect("name"));
        stretch_ok(&[
            "convert",
            &arg(&f),
            "--input-shape",
            "1,3,64,64",
            "--random-weights",
            "1",
            "-o",
            &arg(&out),
        ]);
        models.push((out, false));
    }
    for f in fixtures().iter().filter(|f| arg(f).ends_with("_bn.onnx")) {
        let stem = f.file_stem().expect("stem").to_string_lossy().into_owned();
        for merge in ["project", "concat"] {
            let out = dir.join(format!("{stem}-{merge}.onnx"));
            stretch_ok(&[
                "stretch",
                &arg(f),
                "--input-shape",
                "1,3,64,64",
                "--random-weights",
                "2",
                "--device",
                &host,
                "--alpha",
                "1",
                "--merge",
                merge,
                "-o",
                &arg(&out),
            ]);
            models.push((out, true));
        }
    }
    let activations = dir.join("activations-structure.onnx");
    graph_ir::onnx::export_file(&activations_model(), &activations).expect("export");
    let filled = dir.join("activations.onnx");
    stretch_ok(&[
        "convert",
        &arg(&activations),
        "--random-weights",
        "3",
        "-o",
        &arg(&filled),
    ]);
    models.push((filled, false));
    let blocks = dir.join("blocks-structure.onnx");
    graph_ir::onnx::export_file(&blocks_model(), &blocks).expect("export");
    let filled = dir.join("blocks.onnx");
    stretch_ok(&["convert", &arg(&blocks), "--random-weights", "5", "-o", &arg(&filled)]);
    models.push((filled, false));
    models.push((repo().join("fixtures/vision/style_transfer_full.onnx"), false));
    for name in ["resnet-mini", "mbnet-mini"] {
        let m = dir.join(format!("{name}.onnx"));
        stretch_ok(&["zoo", name, "--seed", "4", "-o", &arg(&m)]);
        models.push((m.clone(), false));
        for merge in ["project", "concat"] {
            let b = dir.join(format!("{name}-{merge}.onnx"));
            stretch_ok(&[
                "stretch",
                &arg(&m),
                "--device",
                &host,
                "--alpha",
                "1",
                "--merge",
                merge,
                "-o",
                &arg(&b),
            ]);
            models.push((b, true));
        }
    }
    let device = Backend::Flex.device();
    let mut list = String::new();
    for (i, (model, branched)) in models.iter().enumerate() {
        let g = import_file(model, &ImportOptions::default()).expect("import");
        if *branched {
            let branches = g
                .node_ids()
                .into_iter()
                .filter(|&id| g.node(id).annotations.contains_key(graph_ir::keys::BRANCH))
                .count();
            assert!(branches > 0, "{}: nothing was branched", model.display());
        }
        let inf = Inference::new(&g, &device).unwrap_or_else(|e| panic!("{}: {e}", model.display()));
        let [c, h, w] = inf.program.input_shape();
        let n = 1;
        let data: Vec<f32> = (0..n * c * h * w)
            .map(|k| ((k * 7919 + i * 31) % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        let scores = inf.scores(&data, n);
        let (x, y) = (dir.join(format!("x{i}.npy")), dir.join(format!("y{i}.npy")));
        write(
            &x,
            &Array {
                shape: vec![n, c, h, w],
                data,
            },
        )
        .expect("write input");
        let mut shape = g.fact(g.outputs()[0].1).expect("output fact").shape.clone();
        shape[0] = n;
        assert_eq!(shape.iter().product::<usize>(), n * inf.program.classes());
        write(&y, &Array { shape, data: scores }).expect("write output");
        list.push_str(&format!("{} {} {}\n", arg(model), arg(&x), arg(&y)));
    }
    let list_file = dir.join("list.txt");
    std::fs::write(&list_file, list).expect("write list");
    let report = reference(&["expect-list", &arg(&list_file), "--rtol", "1e-4"]);
    assert_eq!(
        report.lines().filter(|l| l.contains("max abs diff")).count(),
        models.len(),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
