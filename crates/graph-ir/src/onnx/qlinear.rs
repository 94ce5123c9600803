//! QDQ patterns in the integer form onnxruntime runs them in, for engines
//! that do not fuse QDQ themselves (tract 0.23).
//!
//! onnxruntime turns `DequantizeLinear → Conv → QuantizeLinear` into one
//! integer kernel, and `DequantizeLinear → Add → QuantizeLinear` into
//! `QLinearAdd`, before it runs a file; tract runs the patterns as
//! written, in float on dequantized values, which rounds a few values
//! differently and, through a deep model, moves its outputs by several
//! quantization steps. [`fuse_qdq`] writes onnxruntime's arithmetic into
//! the file, so both engines compute the same values.

use super::qlinear_view::View;
use onnx_ir::{GraphProto, Message, ModelProto, NodeProto};
use std::collections::HashMap;

/// Rewrites the QDQ patterns onnxruntime fuses into integer kernels so
/// that tract computes what onnxruntime computes:
///
/// - **Convolutions**: `DequantizeLinear(xq, sx, zx)` (8-bit, per tensor)
///   and `DequantizeLinear(wq, sw, 0)` (an int8 initializer, per tensor or
///   per output channel) feed a `Conv`, optionally with
///   `DequantizeLinear(bq, sx·sw, 0)` (an int32 initializer) as its bias,
///   whose output is quantized (below). onnxruntime sums `(x − zx)·w + b`
///   in int32 and requantizes at `m = sx · sw / sy` (float32). Where the
///   weights and bias bound every partial sum below 2²⁴, the rewrite is a
///   float `Conv` on the integer values, exact
///   ([`super::qlinear_conv_float`]); otherwise one `QLinearConv` (integer
///   kernels) with `m` given as its weight scale and input and output
///   scales 1 (tract would otherwise divide by `sy` as a multiplication by
///   its reciprocal, an ulp away). Either keeps the `Conv`'s name,
///   attributes and metadata.
/// - **`Gemm`s** of the same form (`transB` = 1, no `transA`, `alpha` and
///   `beta` 1; weights per tensor or per output row) where the bound
///   holds: the float form, as onnxruntime's `QGemm` sums and requantizes
///   alike. Other `Gemm`s stay as written.
/// - **Additions** of two dequantized activations (per tensor, one 8-bit
///   type) whose output is quantized: the arithmetic of onnxruntime's
///   `QLinearAdd` on x86 ([`super::qlinear_add`]), in float64 nodes.
/// - **Quantizations** left (per tensor, of a float value): the quotient
///   by the scale as onnxruntime divides, before tract rounds it
///   ([`super::qlinear_quantize`]).
///
/// An output is quantized when the node's only reader is
/// `QuantizeLinear(·, sy, zy)` (per tensor, the same 8-bit type), or a
/// `Relu` whose only reader it is when `zy` is the lowest value of its type
/// (quantizing then clamps exactly as the `Relu` does), or a `Clip` with
/// constant bounds whose only reader it is when onnxruntime removes it
/// (`ClipQuantFusion`: its range covers the values quantized to the
/// lowest to the highest integer but half a step, a ReLU6 before a scale
/// of at most 6/255). The
/// `QuantizeLinear`'s output becomes the rewrite's; dequantizations no node
/// reads any more are removed; any other node stays as it is.
///
/// Returns the rewritten model and what was fused, or `None` when nothing
/// has the form or the bytes are not a model (the engine then reports its
/// own reason).
pub fn fuse_qdq(onnx: &[u8]) -> Option<(Vec<u8>, Fused)> {
    let mut model = ModelProto::parse_from_bytes(onnx).ok()?;
    let graph = model.graph.as_mut()?;
    let fused = fuse_graph(graph);
    if fused.products + fused.adds + fused.quantizations == 0 {
        return None;
    }
    let bytes = model.write_to_bytes().ok()?;
    Some((bytes, fused))
}

/// What [`fuse_qdq`] rewrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fused {
    /// Convolutions and `Gemm`s rewritten (both forms).
    pub products: usize,
    /// Of those, the ones computed in float on their integer values; the
    /// others are `QLinearConv`.
    pub float_products: usize,
    /// The names of the products rewritten.
    pub product_names: Vec<String>,
    /// Additions now computed as `QLinearAdd` computes them.
    pub adds: usize,
    /// Other quantizations now dividing by their scale.
    pub quantizations: usize,
}

fn fuse_graph(graph: &mut GraphProto) -> Fused {
    let mut fused = Fused::default();
    let fusions = {
        let view = View::new(graph);
        let mut out = Vec::new();
        for (i, n) in graph.node.iter().enumerate() {
            if !n.domain.is_empty() {
                continue;
            }
            let f = match n.op_type.as_str() {
                "Conv" | "Gemm" => view.product_fusion(i).inspect(|f| {
                    fused.products += 1;
                    fused.float_products += usize::from(f.nodes.len() > 1);
                    fused.product_names.push(n.name.clone());
                }),
                "Add" => super::qlinear_add::fusion(&view, i).inspect(|_| fused.adds += 1),
                _ => None,
            };
            out.extend(f);
        }
        out
    };
    let mut removed = std::collections::HashSet::new();
    let mut replacements: HashMap<usize, Vec<NodeProto>> = HashMap::new();
    for f in fusions {
        removed.extend(f.removed);
        graph.initializer.extend(f.initializers);
        replacements.insert(f.quantize, f.nodes);
    }
    replace(graph, &removed, replacements);
    remove_unread_dequantizations(graph);
    let mut replacements = HashMap::new();
    let mut initializers = Vec::new();
    {
        let view = View::new(graph);
        for (i, n) in graph.node.iter().enumerate() {
            if n.op_type == "QuantizeLinear"
                && n.domain.is_empty()
                && let Some((nodes, constants)) = super::qlinear_quantize::rewrite(&view, i)
            {
                replacements.insert(i, nodes);
                initializers.extend(constants);
                fused.quantizations += 1;
            }
        }
    }
    graph.initializer.extend(initializers);
    replace(graph, &Default::default(), replacements);
    fused
}

/// Rebuilds the node list: `replacements` at their indices, without `removed`.
fn replace(
    graph: &mut GraphProto,
    removed: &std::collections::HashSet<usize>,
    mut replacements: HashMap<usize, Vec<NodeProto>>,
) {
    let old = std::mem::take(&mut graph.node);
    for (i, node) in old.into_iter().enumerate() {
        if let Some(new) = replacements.remove(&i) {
            graph.node.extend(new);
        } else if !removed.contains(&i) {
            graph.node.push(node);
        }
    }
}

/// Drops `DequantizeLinear` nodes whose output no node reads and the graph
/// does not return, until none is left.
fn remove_unread_dequantizations(graph: &mut GraphProto) {
    loop {
        let mut read: HashMap<&str, usize> = HashMap::new();
        for n in &graph.node {
            for i in &n.input {
                *read.entry(i.as_str()).or_default() += 1;
            }
        }
        for o in &graph.output {
            *read.entry(o.name.as_str()).or_default() += 1;
        }
        let dead: Vec<usize> = graph
            .node
            .iter()
            .enumerate()
            .filter(|(_, n)| n.op_type == "DequantizeLinear" && n.output.iter().all(|o| !read.contains_key(o.as_str())))
            .map(|(i, _)| i)
            .collect();
        if dead.is_empty() {
            return;
        }
        let mut k = 0;
        graph.node.retain(|_| {
            let keep = !dead.contains(&k);
            k += 1;
            keep
        });
    }
}

#[cfg(test)]
#[path = "qlinear_tests.rs"]
mod tests;
