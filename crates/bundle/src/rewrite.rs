//! Processor-specific rewrites that keep the function: where a device
//! profile says a processor lacks an operator form (`lacks`), its nodes of
//! that form are rewritten into an exact equivalent before export, or the
//! export is refused naming the node and why.
//!
//! `GroupedConv` (a convolution of `g > 1` groups that is not depthwise):
//! per group, a Slice of its input channels and one ungrouped convolution
//! on its rows of the weights and bias, then a Concat of their outputs
//! (NN-Stretch §7.2 does this for the GPU; Slice rather than Split, which
//! the TFLite GPU delegate does not parse).

use crate::error::BundleError;
use graph_ir::ops::{Concat, Conv, Slice};
use graph_ir::{Graph, NodeId, Op, Patch, PatchOutlet, Tensor, keys};
use predictor::DeviceProfile;

/// `g` with every node a processor lacks rewritten; one line per rewrite.
pub fn rewrite(
    g: &Graph,
    device: &DeviceProfile,
    default_processor: &str,
) -> Result<(Graph, Vec<String>), BundleError> {
    let mut patch = Patch::new();
    let mut done = Vec::new();
    for id in g
        .topo_order()
        .map_err(|e| BundleError::Export { reason: e.to_string() })?
    {
        let n = g.node(id);
        let processor = n
            .annotations
            .get(keys::PROCESSOR)
            .map(String::as_str)
            .unwrap_or(default_processor);
        let Some(p) = device.processors.get(processor) else {
            continue;
        };
        let lacks = p.lacks.as_deref().unwrap_or_default();
        if let Op::Conv(c) = &n.op
            && lacks.iter().any(|l| l == "GroupedConv")
            && is_grouped(g, id, c)
        {
            split_groups(g, id, c, &mut patch)?;
            done.push(format!(
                "{}: grouped convolution ({} groups) on {processor} as {} slices and convolutions + concat",
                n.name, c.group, c.group
            ));
        }
    }
    let mut out = g.clone();
    out.apply(patch)
        .map_err(|e| BundleError::Export { reason: e.to_string() })?;
    Ok((out, done))
}

fn is_grouped(g: &Graph, id: NodeId, c: &Conv) -> bool {
    let depthwise = g
        .fact(g.node(id).inputs[0])
        .is_some_and(|f| f.shape.get(1) == Some(&c.group));
    c.group > 1 && !depthwise
}

fn refuse(g: &Graph, id: NodeId, why: &str) -> BundleError {
    BundleError::Export {
        reason: format!(
            "node `{}`: its processor lacks grouped convolution and the rewrite cannot keep its function: {why}",
            g.node(id).name
        ),
    }
}

/// Rows `[from, to)` of `t` along axis 0, of any type; `None` for a
/// tensor without data or of rank 0.
fn rows(t: &Tensor, from: usize, to: usize) -> Option<Tensor> {
    let shape = t.shape().to_vec();
    if shape.is_empty() || to > shape[0] {
        return None;
    }
    let per: usize = shape[1..].iter().product::<usize>() * t.dtype().size();
    let raw = t.raw()?;
    let mut s = shape;
    s[0] = to - from;
    Tensor::from_bytes(graph_ir::Fact::new(t.dtype(), s), raw.slice(from * per..to * per)).ok()
}

/// Rows `[from, to)` of the weights or bias at `o`: a float constant (fp32
/// or fp16), or a per-channel (axis 0) or per-tensor DequantizeLinear of
/// constants, rewritten as the same DequantizeLinear of their rows.
fn part(g: &Graph, o: graph_ir::Outlet, from: usize, to: usize, name: &str, patch: &mut Patch) -> Option<PatchOutlet> {
    let n = g.node(o.node);
    match &n.op {
        Op::Const(t) if t.dtype().is_float() => Some(patch.add_const(name.to_string(), rows(t, from, to)?)),
        Op::DequantizeLinear(dq) if dq.axis == 0 || dq.axis == -(g.fact(o)?.rank() as i64) => {
            let mut inputs = Vec::new();
            for (k, i) in n.inputs.iter().enumerate() {
                let t = g.const_tensor(*i)?;
                let sliced = if k == 0 || t.volume() > 1 {
                    rows(t, from, to)?
                } else {
                    t.clone()
                };
                inputs.push(patch.add_const(format!("{name}/{}", ["q", "scale", "zero_point"][k.min(2)]), sliced));
            }
            let node = patch.add_node(name.to_string(), n.op.clone(), inputs);
            for (k, v) in &n.annotations {
                patch.annotate_new(node, k.clone(), v.clone());
            }
            Some(node.out(0))
        }
        _ => None,
    }
}

fn split_groups(g: &Graph, id: NodeId, c: &Conv, patch: &mut Patch) -> Result<(), BundleError> {
    let n = g.node(id);
    let groups = c.group;
    let w = g
        .fact(n.inputs[1])
        .ok_or_else(|| refuse(g, id, "its weights have no known shape"))?;
    let cin = g
        .fact(n.inputs[0])
        .and_then(|f| f.shape.get(1).copied())
        .ok_or_else(|| refuse(g, id, "its input has no known channel count"))?;
    let cout = w.shape[0];
    if !cin.is_multiple_of(groups) || !cout.is_multiple_of(groups) {
        return Err(refuse(
            g,
            id,
            &format!("{cin} input or {cout} output channels do not divide into {groups} groups"),
        ));
    }
    let (per_in, per_out) = (cin / groups, cout / groups);
    let ann: Vec<(String, String)> = n
        .annotations
        .iter()
        .filter(|(k, _)| k.as_str() != keys::MEETING_POINT)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let annotate = |patch: &mut Patch, node: graph_ir::PatchNode, first: bool| {
        for (k, v) in &ann {
            patch.annotate_new(node, k.clone(), v.clone());
        }
        if first && let Some(v) = n.annotations.get(keys::MEETING_POINT) {
            patch.annotate_new(node, keys::MEETING_POINT, v.clone());
        }
    };
    let mut parts: Vec<PatchOutlet> = Vec::new();
    for k in 0..groups {
        let slice = patch.add_node(
            format!("{}/in{k}", n.name),
            Op::Slice(Slice {
                starts: vec![(k * per_in) as i64],
                ends: vec![((k + 1) * per_in) as i64],
                axes: vec![1],
                steps: vec![1],
            }),
            vec![n.inputs[0].into()],
        );
        annotate(patch, slice, k == 0);
        let (from, to) = (k * per_out, (k + 1) * per_out);
        let unsliceable = |what: &str| {
            refuse(
                g,
                id,
                &format!(
                    "its {what} is neither a float constant nor a DequantizeLinear of constants along the output channels"
                ),
            )
        };
        let wk =
            part(g, n.inputs[1], from, to, &format!("{}/w{k}", n.name), patch).ok_or_else(|| unsliceable("weight"))?;
        let mut inputs = vec![slice.out(0), wk];
        if let Some(b) = n.inputs.get(2) {
            inputs.push(part(g, *b, from, to, &format!("{}/b{k}", n.name), patch).ok_or_else(|| unsliceable("bias"))?);
        }
        let conv = patch.add_node(
            format!("{}/g{k}", n.name),
            Op::Conv(Conv { group: 1, ..c.clone() }),
            inputs,
        );
        annotate(patch, conv, false);
        parts.push(conv.out(0));
    }
    let concat = patch.add_node(format!("{}/concat", n.name), Op::Concat(Concat { axis: 1 }), parts);
    annotate(patch, concat, false);
    patch.shunt(id.out(0), concat.out(0));
    patch.remove(id);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::builder::{Builder, ConvSpec};

    fn device() -> DeviceProfile {
        let text = r#"
name = "t"
description = "a gpu without grouped convolutions"
[processors.gpu]
kind = "gpu"
peak_gflops = { value = 1.0, source = "test" }
efficiency = { value = 1.0, source = "test" }
bandwidth_gbs = { value = 1.0, source = "test" }
kernel_overhead_us = { value = 1.0, source = "test" }
lacks = ["GroupedConv"]
"#;
        DeviceProfile::parse(text, "t.toml").unwrap()
    }

    #[test]
    fn a_grouped_convolution_becomes_slices_convolutions_and_a_concat() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 4, 5, 5]).unwrap();
        let y = b.conv("grouped", x, ConvSpec::new(6, 3, 1).group(2).bias()).unwrap();
        let y = b.conv("dw", y, ConvSpec::new(6, 3, 1).group(6)).unwrap();
        let mut g = b.finish("y", y).unwrap();
        g.fill_missing_weights(1);
        let (out, done) = rewrite(&g, &device(), "gpu").unwrap();
        assert_eq!(done.len(), 1, "{done:?}");
        let count = |kind: &str| {
            out.node_ids()
                .iter()
                .filter(|id| out.node(**id).op.name() == kind)
                .count()
        };
        assert_eq!((count("Slice"), count("Conv"), count("Concat")), (2, 3, 1));
        let w = out
            .const_tensor(out.node(out.find("grouped/g1").unwrap()).inputs[1])
            .unwrap();
        assert_eq!(w.shape(), &[3, 2, 3, 3]);
        let original = g.const_tensor(g.node(g.find("grouped").unwrap()).inputs[1]).unwrap();
        let half = original.to_f32_vec().unwrap().len() / 2;
        assert_eq!(w.to_f32_vec().unwrap(), original.to_f32_vec().unwrap()[half..]);
    }

    #[test]
    fn a_grouped_convolution_with_computed_weights_is_refused_by_name() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 4, 5, 5]).unwrap();
        let y = b.conv("grouped", x, ConvSpec::new(4, 1, 1).group(2)).unwrap();
        let mut g = b.finish("y", y).unwrap();
        g.fill_missing_weights(1);
        let conv = g.find("grouped").unwrap();
        let w = g.node(conv).inputs[1];
        let relu = g
            .add_node(
                "w_relu",
                Op::Unary(graph_ir::ops::Unary {
                    op: graph_ir::ops::UnaryOp::Relu,
                }),
                &[w],
            )
            .unwrap();
        g.rewire(conv, 1, relu.out(0)).unwrap();
        let e = rewrite(&g, &device(), "gpu").unwrap_err().to_string();
        assert!(
            e.contains("node `grouped`") && e.contains("its weight is neither a float constant nor a DequantizeLinear"),
            "{e}"
        );
    }
}
