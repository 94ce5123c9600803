//! A ConvNeXt-style network built here (a 4x4 stride-4 patchify stem,
//! blocks of a depthwise 7x7 convolution, LayerNorm over channels-last
//! values, a Gelu MLP of matrix products and a residual, stages joined by
//! LayerNorm and a 2x2 stride-2 downsampling convolution) imports, gets its
//! stages, plans, branches and runs on the runtime equal to onnxruntime.

mod common;

use common::*;
use graph_ir::Op;
use graph_ir::builder::{Builder, ConvSpec};
use graph_ir::ops::*;

const WIDTHS: [usize; 3] = [16, 32, 64];

fn transpose(b: &mut Builder, name: &str, x: graph_ir::Outlet, perm: [usize; 4]) -> graph_ir::Outlet {
    let op = Op::Transpose(Transpose { perm: perm.to_vec() });
    b.node(name, op, &[x]).unwrap()
}

/// LayerNorm over the channels of an NCHW value, through channels-last.
fn channel_norm(b: &mut Builder, name: &str, x: graph_ir::Outlet, c: usize) -> graph_ir::Outlet {
    let t = transpose(b, &format!("{name}.nhwc"), x, [0, 2, 3, 1]);
    let t = layer_norm(b, name, t, c);
    transpose(b, &format!("{name}.nchw"), t, [0, 3, 1, 2])
}

fn layer_norm(b: &mut Builder, name: &str, x: graph_ir::Outlet, c: usize) -> graph_ir::Outlet {
    let scale = b.param(&format!("{name}.weight"), &[c]).unwrap();
    let bias = b.param(&format!("{name}.bias"), &[c]).unwrap();
    let op = Op::LayerNorm(LayerNorm {
        axis: -1,
        epsilon: 1e-6,
    });
    b.node(name, op, &[x, scale, bias]).unwrap()
}

fn linear(b: &mut Builder, name: &str, x: graph_ir::Outlet, cin: usize, cout: usize) -> graph_ir::Outlet {
    let w = b.param(&format!("{name}.weight"), &[cin, cout]).unwrap();
    let y = b.node(name, Op::MatMul(MatMul), &[x, w]).unwrap();
    let bias = b.param(&format!("{name}.bias"), &[cout]).unwrap();
    b.add(&format!("{name}.add"), y, bias).unwrap()
}

fn block(b: &mut Builder, name: &str, x: graph_ir::Outlet, c: usize) -> graph_ir::Outlet {
    let y = b
        .conv(&format!("{name}.dw"), x, ConvSpec::new(c, 7, 1).group(c).bias())
        .unwrap();
    let y = transpose(b, &format!("{name}.nhwc"), y, [0, 2, 3, 1]);
    let y = layer_norm(b, &format!("{name}.norm"), y, c);
    let y = linear(b, &format!("{name}.pw1"), y, c, 4 * c);
    let y = b
        .unary(&format!("{name}.gelu"), y, UnaryOp::Gelu { tanh: false })
        .unwrap();
    let y = linear(b, &format!("{name}.pw2"), y, 4 * c, c);
    let y = transpose(b, &format!("{name}.nchw"), y, [0, 3, 1, 2]);
    b.add(&format!("{name}.residual"), x, y).unwrap()
}

fn convnext_style() -> graph_ir::Graph {
    let mut b = Builder::new("convnext-style");
    let x = b.input("x", &[1, 3, 64, 64]).unwrap();
    let mut y = b.conv("stem", x, ConvSpec::new(WIDTHS[0], 4, 4).bias()).unwrap();
    y = channel_norm(&mut b, "stem.norm", y, WIDTHS[0]);
    for (s, &c) in WIDTHS.iter().enumerate() {
        if s > 0 {
            y = channel_norm(&mut b, &format!("down{s}.norm"), y, WIDTHS[s - 1]);
            y = b.conv(&format!("down{s}"), y, ConvSpec::new(c, 2, 2).bias()).unwrap();
        }
        for k in 0..2 {
            y = block(&mut b, &format!("stage{s}.block{k}"), y, c);
        }
    }
    let pooled = b.node("pool", Op::GlobalAveragePool(GlobalAveragePool), &[y]).unwrap();
    let flat = b.node("flatten", Op::Flatten(Flatten { axis: 1 }), &[pooled]).unwrap();
    let flat = layer_norm(&mut b, "head.norm", flat, WIDTHS[2]);
    let out = b.linear("head.fc", flat, 10).unwrap();
    b.finish("y", out).unwrap()
}

#[test]
fn a_convnext_style_model_gets_stages_plans_branches_and_runs_equal_to_onnxruntime() {
    let dir = scratch("convnext");
    let host = arg(&repo().join("configs/devices/host.toml"));
    let structure = dir.join("structure.onnx");
    graph_ir::onnx::export_file(&convnext_style(), &structure).expect("export");
    let model = dir.join("convnext.onnx");
    stretch_ok(&["convert", &arg(&structure), "--random-weights", "1", "-o", &arg(&model)]);
    reference(&["check", &arg(&model)]);
    let inspect: serde_json::Value =
        serde_json::from_str(&stretch_ok(&["inspect", &arg(&model), "--json"])).expect("inspect json");
    let stages = inspect["stages"].as_array().expect("stages");
    assert!(stages.len() >= 2, "{:#}", inspect["stages"]);
    let branched = dir.join("branched.onnx");
    let text = stretch_ok(&[
        "stretch",
        &arg(&model),
        "--device",
        &host,
        "--alpha",
        "1",
        "-o",
        &arg(&branched),
    ]);
    let g = graph_ir::onnx::import_file(&branched, &Default::default()).expect("import the branched model");
    let branches = g
        .node_ids()
        .into_iter()
        .filter(|&id| g.node(id).annotations.contains_key(graph_ir::keys::BRANCH))
        .count();
    assert!(branches > 0, "nothing was branched:\n{text}");
    let x = dir.join("x.npy");
    let y = dir.join("y.npy");
    let data = (0..3 * 64 * 64)
        .map(|k| ((k * 7919) % 2000) as f32 / 1000.0 - 1.0)
        .collect();
    let input = scheduler_rt::npy::Array {
        shape: vec![1, 3, 64, 64],
        data,
    };
    scheduler_rt::npy::write(&x, &input).expect("write input");
    stretch_ok(&["run", &arg(&branched), "--input", &arg(&x), "--output", &arg(&y)]);
    let report = reference(&["expect", &arg(&branched), &arg(&x), &arg(&y), "--rtol", "1e-4"]);
    assert!(report.contains("max abs diff"), "{report}");
}
