//! What the QDQ fusions share: a view of a graph (who produces and reads
//! each value, its initializers), a fusion's replacement nodes, and the
//! helpers that build them.

use super::tensor_proto::tensor_from_proto;
use crate::tensor::DType;
use onnx_ir::{AttributeProto, AttributeType, GraphProto, NodeProto, TensorProto};
use std::collections::HashMap;

/// One pattern to rewrite: the nodes it removes and, at the position of its
/// `QuantizeLinear`, the nodes and constants that replace them.
pub(super) struct Fusion {
    pub(super) removed: Vec<usize>,
    pub(super) quantize: usize,
    pub(super) nodes: Vec<NodeProto>,
    pub(super) initializers: Vec<TensorProto>,
}

/// Who produces and who reads each value, and the initializers by name.
pub(super) struct View<'a> {
    graph: &'a GraphProto,
    producer: HashMap<&'a str, usize>,
    readers: HashMap<&'a str, Vec<usize>>,
    initializers: HashMap<&'a str, &'a TensorProto>,
}

impl<'a> View<'a> {
    pub(super) fn new(graph: &'a GraphProto) -> View<'a> {
        let mut producer = HashMap::new();
        let mut readers: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in graph.node.iter().enumerate() {
            for o in &n.output {
                producer.insert(o.as_str(), i);
            }
            for v in &n.input {
                readers.entry(v.as_str()).or_default().push(i);
            }
        }
        let initializers = graph.initializer.iter().map(|t| (t.name.as_str(), t)).collect();
        View {
            graph,
            producer,
            readers,
            initializers,
        }
    }

    pub(super) fn node(&self, i: usize) -> &'a NodeProto {
        &self.graph.node[i]
    }

    /// The only node reading `value`, when it is not also a graph output.
    pub(super) fn only_reader(&self, value: &str) -> Option<usize> {
        if self.graph.output.iter().any(|o| o.name == value) {
            return None;
        }
        match self.readers.get(value).map(Vec::as_slice) {
            Some([one]) => Some(*one),
            _ => None,
        }
    }

    /// Whether `name` already names a value or constant of the graph.
    pub(super) fn is_taken(&self, name: &str) -> bool {
        self.producer.contains_key(name)
            || self.initializers.contains_key(name)
            || self.graph.input.iter().any(|i| i.name == name)
    }

    /// The names `{prefix}.{suffix}` for a rewrite's new values and
    /// constants, or `None` when the graph already uses one of them.
    pub(super) fn fresh<const N: usize>(&self, prefix: &str, suffixes: [&str; N]) -> Option<[String; N]> {
        let names = suffixes.map(|s| format!("{prefix}.{s}"));
        (!names.iter().any(|n| self.is_taken(n))).then_some(names)
    }

    /// The quantization of `value` (see [`fuse_qdq`]): the `Relu` or
    /// `Clip` between, the `QuantizeLinear`, and its scale and zero point
    /// (type and value).
    pub(super) fn quantized_output(&self, value: &str) -> Option<Quantized<'a>> {
        let mut next = self.only_reader(value)?;
        let mut relu = None;
        let mut clip = None;
        let op = self.node(next).op_type.as_str();
        if (op == "Relu" || op == "Clip") && self.node(next).domain.is_empty() {
            if op == "Clip" {
                clip = Some(self.clip_range(self.node(next))?);
            }
            relu = Some(next);
            next = self.only_reader(&self.node(next).output[0])?;
        }
        let q = self.node(next);
        if q.op_type != "QuantizeLinear" || !q.domain.is_empty() || q.input.len() != 3 || q.output.len() != 1 {
            return None;
        }
        let (scale, zero) = (self.constant(&q.input[1])?, self.constant(&q.input[2])?);
        if scale.1.len() != 1 || zero.1.len() != 1 || !eight_bit(zero.0) {
            return None;
        }
        if clip.is_none() && relu.is_some() && zero.1[0] != lowest(zero.0) {
            return None;
        }
        if let Some((min, max)) = clip {
            let (s, low) = (scale.1[0] as f32, lowest(zero.0) as i64 - zero.1[0] as i64);
            if !(min <= domain_end(s, low, 0.5) && domain_end(s, low + 255, -0.5) <= max) {
                return None;
            }
        }
        Some(Quantized {
            activation: relu,
            index: next,
            node: q,
            scale: scale.1[0],
            zero_type: zero.0,
            zero: zero.1[0],
        })
    }

    /// The range of a `Clip` (constant bounds, as inputs or, before opset
    /// 11, attributes; an absent bound is unbounded), as float32.
    pub(super) fn clip_range(&self, clip: &NodeProto) -> Option<(f32, f32)> {
        let bound = |k: usize, attr: &str, default: f32| match clip.input.get(k).filter(|n| !n.is_empty()) {
            Some(name) => match self.constant(name)?.1.as_slice() {
                [v] => Some(*v as f32),
                _ => None,
            },
            None => Some(clip.attribute.iter().find(|a| a.name == attr).map_or(default, |a| a.f)),
        };
        Some((bound(1, "min", f32::NEG_INFINITY)?, bound(2, "max", f32::INFINITY)?))
    }

    /// The `DequantizeLinear` (default domain, three inputs) producing `value`.
    pub(super) fn dequantize(&self, value: &str) -> Option<&'a NodeProto> {
        let n = self.node(*self.producer.get(value)?);
        (n.op_type == "DequantizeLinear" && n.domain.is_empty() && n.input.len() == 3).then_some(n)
    }

    /// An initializer's dimensions.
    pub(super) fn dims(&self, name: &str) -> Option<Vec<i64>> {
        Some(self.initializers.get(name)?.dims.clone())
    }

    /// An initializer's data type, without reading its values.
    pub(super) fn dtype(&self, name: &str) -> Option<DType> {
        DType::from_onnx(self.initializers.get(name)?.data_type)
    }

    /// An initializer's data type and values as `f64`.
    pub(super) fn constant(&self, name: &str) -> Option<(DType, Vec<f64>)> {
        let t = tensor_from_proto(self.initializers.get(name)?).ok()?;
        Some((t.dtype(), t.to_f64_vec()?))
    }

    pub(super) fn product_fusion(&self, conv: usize) -> Option<Fusion> {
        let c = self.node(conv);
        if !(2..=3).contains(&c.input.len()) || c.output.len() != 1 {
            return None;
        }
        let gemm = c.op_type == "Gemm";
        if gemm {
            let attr = |name: &str| c.attribute.iter().find(|a| a.name == name);
            let int = |name: &str, default: i64| attr(name).map_or(default, |a| a.i);
            let float = |name: &str| attr(name).map_or(1.0, |a| a.f);
            if int("transA", 0) != 0 || int("transB", 0) != 1 || float("alpha") != 1.0 || float("beta") != 1.0 {
                return None;
            }
        }
        let x = self.dequantize(&c.input[0])?;
        let (x_scale, x_zero) = (self.constant(&x.input[1])?, self.constant(&x.input[2])?);
        if x_scale.1.len() != 1 || x_zero.1.len() != 1 || !eight_bit(x_zero.0) {
            return None;
        }
        let w = self.dequantize(&c.input[1])?;
        let w_type = self.dtype(&w.input[0])?;
        let (w_scale, w_zero) = (self.constant(&w.input[1])?, self.constant(&w.input[2])?);
        let per_channel = w_scale.1.len() > 1;
        if w_type != DType::I8 || w_zero.0 != DType::I8 || w_zero.1.iter().any(|z| *z != 0.0) {
            return None;
        }
        if per_channel && axis(w) != 0 {
            return None;
        }
        let bias = match c.input.get(2) {
            None => None,
            Some(b) => {
                let b = self.dequantize(b)?;
                let b_type = self.dtype(&b.input[0])?;
                let (b_scale, b_zero) = (self.constant(&b.input[1])?, self.constant(&b.input[2])?);
                let expected = |k: usize| x_scale.1[0] * w_scale.1[if per_channel { k } else { 0 }];
                let scale_ok = b_scale.1.len() == w_scale.1.len()
                    && b_scale
                        .1
                        .iter()
                        .enumerate()
                        .all(|(k, s)| (s - expected(k)).abs() <= 1e-6 * expected(k).abs());
                if b_type != DType::I32 || b_zero.1.iter().any(|z| *z != 0.0) || !scale_ok {
                    return None;
                }
                Some(b.input[0].clone())
            }
        };
        let out = self.quantized_output(&c.output[0])?;
        let q = out.node;
        let (sx, sy) = (x_scale.1[0] as f32, out.scale as f32);
        let factors: Vec<f32> = w_scale.1.iter().map(|&sw| sx * sw as f32 / sy).collect();
        if let Some(f) = super::qlinear_conv_float::fusion(
            self,
            conv,
            &x.input[0],
            x_zero.0,
            x_zero.1[0],
            &x.input[2],
            &w.input[0],
            bias.as_deref(),
            &factors,
            &out,
        ) {
            return Some(f);
        }
        if gemm {
            return None;
        }
        let [one, requant] = self.fresh(&format!("{}.qconv", q.output[0]), ["one", "requant"])?;
        let multipliers: Vec<u8> = factors.iter().flat_map(|f| f.to_le_bytes()).collect();
        let mut requant_tensor = scalar(&requant, DType::F32, &multipliers);
        if per_channel {
            requant_tensor.dims = vec![w_scale.1.len() as i64];
        }
        let mut node = NodeProto::new();
        node.op_type = "QLinearConv".into();
        node.name = c.name.clone();
        node.attribute = c.attribute.clone();
        node.metadata_props = c.metadata_props.clone();
        node.doc_string = c.doc_string.clone();
        node.input = vec![
            x.input[0].clone(),
            one.clone(),
            x.input[2].clone(),
            w.input[0].clone(),
            requant,
            w.input[2].clone(),
            one.clone(),
            q.input[2].clone(),
        ];
        node.input.extend(bias);
        node.output = q.output.clone();
        Some(Fusion {
            removed: [conv].into_iter().chain(out.activation).collect(),
            quantize: out.index,
            nodes: vec![node],
            initializers: vec![scalar(&one, DType::F32, &1f32.to_le_bytes()), requant_tensor],
        })
    }
}

/// The `QuantizeLinear` that quantizes a node's output.
pub(super) struct Quantized<'a> {
    /// The `Relu` or `Clip` between the node and the `QuantizeLinear`.
    pub(super) activation: Option<usize>,
    pub(super) index: usize,
    pub(super) node: &'a NodeProto,
    pub(super) scale: f64,
    pub(super) zero_type: DType,
    pub(super) zero: f64,
}

pub(super) fn eight_bit(d: DType) -> bool {
    matches!(d, DType::U8 | DType::I8)
}

/// A node of the rewrite: named after its output, with `meta` (the
/// annotations of the node it replaces).
pub(super) fn node(op: &str, inputs: &[&str], output: &str, meta: &NodeProto) -> NodeProto {
    let mut n = NodeProto::new();
    n.op_type = op.into();
    n.name = output.to_string();
    n.input = inputs.iter().map(|s| s.to_string()).collect();
    n.output = vec![output.to_string()];
    n.metadata_props = meta.metadata_props.clone();
    n
}

/// A `Cast` node of the rewrite (see [`node`]).
pub(super) fn cast(input: &str, to: DType, output: &str, meta: &NodeProto) -> NodeProto {
    let mut n = node("Cast", &[input], output, meta);
    let mut attr = AttributeProto::new();
    attr.name = "to".into();
    attr.type_ = AttributeType::INT.into();
    attr.i = i64::from(to.onnx_code());
    n.attribute.push(attr);
    n
}

/// A scalar constant of `dtype` from its little-endian bytes.
pub(super) fn scalar(name: &str, dtype: DType, bytes: &[u8]) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.data_type = dtype.onnx_code();
    t.raw_data = bytes.to_vec().into();
    t
}

/// The lowest value of an 8-bit type.
pub(super) fn lowest(d: DType) -> f64 {
    if d == DType::U8 { 0.0 } else { -128.0 }
}

/// The end of the values `QuantizeLinear(·, scale, zero point)` takes to
/// the integer `biased` steps from the zero point, on its side `half`
/// (0.5: above, -0.5: below), as onnxruntime's `ClipQuantFusion` bounds it
/// (`QuantizeDomain::MinUpper`, `MaxLower`, float32): half a step from the
/// integer, an ulp back toward it when that half is a tie rounding to the
/// even neighbour (odd `biased`; C's remainder, so only above zero).
fn domain_end(scale: f32, biased: i64, half: f32) -> f32 {
    let mut before_round = biased as f32 + half;
    if biased % 2 == 1 {
        before_round = next_toward(before_round, biased as f32);
    }
    before_round * scale
}

/// C's `nextafterf(from, to)` for finite values.
fn next_toward(from: f32, to: f32) -> f32 {
    if from == to {
        return to;
    }
    let bits = from.to_bits();
    let up = (to > from) == (from >= 0.0);
    if from == 0.0 {
        return f32::from_bits(1).copysign(to - from);
    }
    f32::from_bits(if up { bits + 1 } else { bits - 1 })
}

/// A `DequantizeLinear`'s `axis` attribute (ONNX's default: 1).
fn axis(n: &NodeProto) -> i64 {
    n.attribute.iter().find(|a| a.name == "axis").map_or(1, |a| a.i)
}
