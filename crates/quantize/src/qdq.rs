//! Static int8 quantization written as QuantizeLinear/DequantizeLinear
//! pairs (the QDQ form onnxruntime and TFLite delegates accept) for the
//! nodes of int8 processors.
//!
//! A node is *int8* when its processor runs int8 and its operator has a
//! quantized form ([`has_int8_form`]); an int8-processor node without one
//! stays float and is reported. Every float activation an int8 node
//! produces gets a QuantizeLinear right after it, on its processor, and
//! each of its readers a DequantizeLinear of its own (so a value leaves an
//! int8 processor as uint8 and is dequantized explicitly by whoever reads
//! it), except a value read only by an int8 Relu or Clip, which that
//! activation's nodes cover; an activation produced in float and read by
//! int8 nodes is quantized on each of their processors and dequantized
//! per reader. Each subgraph thus holds the DQ→op→Q form integer kernels
//! fuse, as the whole file does (onnxruntime gives each node unit its own
//! DequantizeLinear the same way); the runtime's partition puts a
//! DequantizeLinear, and a QuantizeLinear of another processor's value,
//! in its reader's subgraph. Weights of int8 Conv, Gemm and MatMul become int8
//! per output channel (symmetric) behind a DequantizeLinear, their biases
//! int32 at the input scale times each channel's weight scale. Graph inputs
//! and outputs stay f32. Every inserted node carries the `processor`,
//! `stage` and `branch` annotations of the node it serves.

use crate::error::QuantizeError;
use crate::params::{self, QParams};
use crate::precision_map::PrecisionMap;
use bytes::Bytes;
use graph_ir::ops::{DequantizeLinear, QuantizeLinear};
use graph_ir::{DType, Fact, Graph, Node, NodeId, Op, Outlet, Patch, PatchOutlet, Tensor, keys};
use predictor::Precision;
use std::collections::{HashMap, HashSet};

/// Whether `op` has an int8 (QDQ) form here.
pub fn has_int8_form(op: &Op) -> bool {
    use graph_ir::ops::UnaryOp as U;
    match op {
        Op::Conv(_)
        | Op::Gemm(_)
        | Op::MatMul(_)
        | Op::Pool(_)
        | Op::GlobalAveragePool(_)
        | Op::Concat(_)
        | Op::Reshape(_)
        | Op::Flatten(_)
        | Op::Transpose(_)
        | Op::Split(_)
        | Op::Slice(_)
        | Op::Resize(_)
        | Op::Softmax(_) => true,
        Op::Binary(b) => matches!(b.op, graph_ir::ops::BinaryOp::Add | graph_ir::ops::BinaryOp::Mul),
        Op::Unary(u) => matches!(
            u.op,
            U::Relu
                | U::Clip { .. }
                | U::LeakyRelu { .. }
                | U::Sigmoid
                | U::HardSigmoid { .. }
                | U::HardSwish
                | U::Tanh
        ),
        _ => false,
    }
}

/// What the pass did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QdqReport {
    /// Nodes computing in int8.
    pub int8_nodes: usize,
    /// Activations given a Q→DQ pair.
    pub activations: usize,
    /// Weights stored as int8.
    pub weights: usize,
    /// Nodes of int8 processors without an int8 form, left in float.
    pub kept_float: Vec<String>,
}

/// The activations the pass quantizes, in the order their ranges are
/// given to [`insert_qdq`].
pub fn activations_to_calibrate(g: &Graph, map: &PrecisionMap) -> Result<Vec<Outlet>, QuantizeError> {
    let int8: HashSet<NodeId> = int8_nodes(g, map)?.into_iter().collect();
    activations(g, &int8)
}

/// Float activations an `int8` node produces or reads, in topological order.
fn activations(g: &Graph, int8: &HashSet<NodeId>) -> Result<Vec<Outlet>, QuantizeError> {
    let mut out = Vec::new();
    for id in g.topo_order()? {
        let node = g.node(id);
        if matches!(node.op, Op::Const(_)) {
            continue;
        }
        for slot in 0..node.outputs.len() {
            let o = id.out(slot);
            if node.outputs[slot].dtype != DType::F32 {
                continue;
            }
            let read_by_int8 = g.consumers(o).iter().any(|(c, _)| int8.contains(c));
            if (int8.contains(&id) || read_by_int8) && !feeds_fused_activation(g, o, int8) {
                out.push(o);
            }
        }
    }
    Ok(out)
}

/// Whether int8 `o` is read only by one int8 Relu or Clip and is no graph
/// output: the activation's own Q/DQ pair then quantizes both, as integer
/// kernels fuse Conv+Relu and onnxruntime's `quantize_static` drops the
/// activation (a separate pair on `o` would spend half the uint8 grid on
/// values the activation discards).
fn feeds_fused_activation(g: &Graph, o: Outlet, int8: &HashSet<NodeId>) -> bool {
    use graph_ir::ops::UnaryOp as U;
    let readers = g.consumers(o);
    let [(reader, 0)] = readers.as_slice() else {
        return false;
    };
    int8.contains(&o.node)
        && int8.contains(reader)
        && matches!(&g.node(*reader).op, Op::Unary(u) if matches!(u.op, U::Relu | U::Clip { .. }))
        && !g.outputs().iter().any(|(_, out)| *out == o)
}

/// Nodes of int8 processors, in topological order: those with an int8
/// form (`true`) and those without (`false`).
fn int8_processor_nodes(g: &Graph, map: &PrecisionMap) -> Result<Vec<(NodeId, bool)>, QuantizeError> {
    let mut out = Vec::new();
    for id in g.topo_order()? {
        let n = g.node(id);
        if !matches!(n.op, Op::Const(_) | Op::Input(_)) && map.of(n)? == Precision::Int8 {
            out.push((id, has_int8_form(&n.op)));
        }
    }
    Ok(out)
}

/// The nodes computing in int8, in topological order.
pub(crate) fn int8_nodes(g: &Graph, map: &PrecisionMap) -> Result<Vec<NodeId>, QuantizeError> {
    Ok(int8_processor_nodes(g, map)?
        .into_iter()
        .filter_map(|(id, int8)| int8.then_some(id))
        .collect())
}

/// Nodes of int8 processors without an int8 form (they stay float), sorted.
pub fn kept_float(g: &Graph, map: &PrecisionMap) -> Result<Vec<String>, QuantizeError> {
    let mut out: Vec<String> = int8_processor_nodes(g, map)?
        .into_iter()
        .filter(|(_, int8)| !int8)
        .map(|(id, _)| g.node(id).name.clone())
        .collect();
    out.sort();
    Ok(out)
}

/// The `processor`, `stage` and `branch` annotations of `n`, for the nodes
/// inserted to serve it.
pub(crate) fn served_annotations(n: &Node) -> Vec<(String, String)> {
    [keys::PROCESSOR, keys::STAGE, keys::BRANCH]
        .iter()
        .filter_map(|k| n.annotations.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect()
}

/// Adds uniquely named, annotated nodes to one patch of `g`.
pub(crate) struct Writer<'g> {
    pub(crate) g: &'g Graph,
    pub(crate) patch: Patch,
    pub(crate) used: std::collections::HashSet<String>,
}

impl Writer<'_> {
    fn name(&mut self, base: String) -> String {
        let mut name = base.clone();
        let mut k = 1;
        while self.g.find(&name).is_some() || !self.used.insert(name.clone()) {
            name = format!("{base}_{k}");
            k += 1;
        }
        name
    }

    fn constant(&mut self, base: String, t: Tensor, ann: &[(String, String)]) -> PatchOutlet {
        self.node(base, Op::Const(t), vec![], ann)
    }

    pub(crate) fn node(
        &mut self,
        base: String,
        op: Op,
        inputs: Vec<PatchOutlet>,
        ann: &[(String, String)],
    ) -> PatchOutlet {
        let name = self.name(base);
        let node = self.patch.add_node(name, op, inputs);
        for (k, v) in ann {
            self.patch.annotate_new(node, k.clone(), v.clone());
        }
        node.out(0)
    }

    /// The Q/DQ nodes of activation `o` at `p`. An int8 producer's
    /// QuantizeLinear follows it on its processor and each reader gets a
    /// DequantizeLinear of its own, annotated as that reader (the graph
    /// output one annotated as the producer): the value crosses
    /// processors as uint8, and every subgraph that reads it starts with
    /// the DQ→op form integer kernels fuse, as in the whole file. An
    /// activation produced in float gets a QuantizeLinear on each
    /// processor of its int8 readers (annotated as the first of them there,
    /// or as the producer on its own processor) and a DequantizeLinear per
    /// int8 reader.
    fn activation_pairs(&mut self, o: Outlet, p: QParams, int8: &HashSet<NodeId>) {
        let g = self.g;
        let producer = g.node(o.node);
        let home = producer.annotations.get(keys::PROCESSOR);
        let base = if o.slot == 0 {
            producer.name.clone()
        } else {
            format!("{}.{}", producer.name, o.slot)
        };
        let ann = served_annotations(producer);
        let scale = self.constant(format!("{base}_scale"), Tensor::from_f32([], &[p.scale]), &ann);
        let zero = self.constant(
            format!("{base}_zero_point"),
            tensor(DType::U8, vec![], Bytes::from(vec![p.zero as u8])),
            &ann,
        );
        let quantize = |w: &mut Self, name: &str, ann: &[(String, String)]| {
            w.node(
                format!("{name}_quantized"),
                Op::QuantizeLinear(QuantizeLinear { axis: 1 }),
                vec![o.into(), scale, zero],
                ann,
            )
        };
        let dequantize = |w: &mut Self, q: PatchOutlet, ann: &[(String, String)]| {
            w.node(
                format!("{base}_dequantized"),
                Op::DequantizeLinear(DequantizeLinear { axis: 1 }),
                vec![q, scale, zero],
                ann,
            )
        };
        let shared = int8.contains(&o.node).then(|| quantize(self, &base, &ann));
        if let Some(q) = shared
            && g.is_output(o)
        {
            let dq = dequantize(self, q, &ann);
            self.patch.shunt(o, dq);
        }
        let mut per_processor: Vec<(Option<&String>, PatchOutlet)> = Vec::new();
        for (c, slot) in g.consumers(o) {
            if shared.is_none() && !int8.contains(&c) {
                continue;
            }
            let reader = served_annotations(g.node(c));
            let at = g.node(c).annotations.get(keys::PROCESSOR);
            let known = per_processor.iter().find(|(p, _)| *p == at).map(|(_, q)| *q);
            let q = match shared.or(known) {
                Some(q) => q,
                None => {
                    let q = match (at, home) {
                        (Some(a), Some(h)) if a != h => quantize(self, &format!("{base}_on_{a}"), &reader),
                        _ if at == home => quantize(self, &base, &ann),
                        _ => quantize(self, &base, &reader),
                    };
                    per_processor.push((at, q));
                    q
                }
            };
            let dq = dequantize(self, q, &reader);
            self.patch.rewire(c, slot, dq);
        }
    }

    /// The quantized constant `q` (`{base}_quantized`) behind a
    /// DequantizeLinear along `axis`, one scale per channel and zero
    /// points of `q`'s type.
    fn dequantized(
        &mut self,
        base: &str,
        q: Tensor,
        scales: &[f32],
        axis: usize,
        ann: &[(String, String)],
    ) -> PatchOutlet {
        let n = scales.len();
        let zero = tensor(q.dtype(), vec![n], Bytes::from(vec![0u8; n * q.dtype().size()]));
        let qc = self.constant(format!("{base}_quantized"), q, ann);
        let sc = self.constant(format!("{base}_scale"), Tensor::from_f32([n], scales), ann);
        let zc = self.constant(format!("{base}_zero_point"), zero, ann);
        self.node(
            format!("{base}_dequantized"),
            Op::DequantizeLinear(DequantizeLinear { axis: axis as i64 }),
            vec![qc, sc, zc],
            ann,
        )
    }
}

fn bytes_of<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> Bytes {
    Bytes::from(v.iter().flat_map(|x| f(*x)).collect::<Vec<u8>>())
}

fn tensor(dtype: DType, shape: Vec<usize>, data: Bytes) -> Tensor {
    Tensor::from_bytes(Fact::new(dtype, shape), data).expect("sizes computed from the shape")
}

/// Inserts the Q/DQ pairs and int8 weights. `ranges[i]` is the calibrated
/// range of `activations_to_calibrate(g, map)[i]`.
pub fn insert_qdq(g: &Graph, map: &PrecisionMap, ranges: &[(f32, f32)]) -> Result<(Graph, QdqReport), QuantizeError> {
    let order = int8_nodes(g, map)?;
    let int8: HashSet<NodeId> = order.iter().copied().collect();
    let acts = activations(g, &int8)?;
    if acts.len() != ranges.len() {
        return Err(QuantizeError::Ranges {
            want: acts.len(),
            got: ranges.len(),
        });
    }
    let mut report = QdqReport {
        int8_nodes: int8.len(),
        kept_float: kept_float(g, map)?,
        ..QdqReport::default()
    };
    let mut w = Writer {
        g,
        patch: Patch::new(),
        used: Default::default(),
    };
    let mut qparams: HashMap<Outlet, QParams> = HashMap::new();
    for (o, p) in acts
        .iter()
        .zip(crate::shared_params::activation_params(g, &acts, ranges, &int8))
    {
        qparams.insert(*o, p);
        w.activation_pairs(*o, p, &int8);
        report.activations += 1;
    }
    for &id in &order {
        let n = g.node(id);
        let Some(axis) = int8_weight_axis(g, id) else {
            continue;
        };
        let Some(wt) = g.const_tensor(n.inputs[1]) else {
            continue;
        };
        let Some(values) = wt.to_f32_vec() else {
            continue;
        };
        let ann = served_annotations(n);
        let shape = wt.shape().to_vec();
        let channels = shape[axis];
        let scales = channel_scales(&values, &shape, axis);
        let q: Vec<i8> = values
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let c = channel_of(i, &shape, axis);
                params::quantize(
                    *x,
                    QParams {
                        scale: scales[c],
                        zero: 0,
                    },
                    -127,
                    127,
                ) as i8
            })
            .collect();
        let wq = tensor(DType::I8, shape.clone(), bytes_of(&q, |x| vec![x as u8]));
        let wdq = w.dequantized(&format!("{}_weight", n.name), wq, &scales, axis, &ann);
        w.patch.rewire(id, 1, wdq);
        report.weights += 1;
        let bias = n
            .inputs
            .get(2)
            .and_then(|o| g.const_tensor(*o))
            .and_then(|t| t.to_f32_vec());
        let x_scale = qparams.get(&n.inputs[0]).map(|p| p.scale);
        if let (Some(b), Some(sx)) = (bias, x_scale)
            && b.len() == channels
            && !matches!(n.op, Op::MatMul(_))
        {
            let bs: Vec<f32> = scales.iter().map(|s| s * sx).collect();
            let bq: Vec<i32> = b
                .iter()
                .zip(&bs)
                .map(|(x, s)| params::quantize(*x, QParams { scale: *s, zero: 0 }, i32::MIN + 1, i32::MAX))
                .collect();
            let bq = tensor(DType::I32, vec![channels], bytes_of(&bq, |x| x.to_le_bytes().to_vec()));
            let bdq = w.dequantized(&format!("{}_bias", n.name), bq, &bs, 0, &ann);
            w.patch.rewire(id, 2, bdq);
        }
    }
    let mut out = g.clone();
    out.apply(w.patch)?;
    out.set_precisions(map.pairs());
    Ok((out, report))
}

/// The channel axis of int8 node `id`'s weight (input 1) when that weight
/// is stored as int8: a float constant of a Conv, Gemm or 2-d MatMul.
pub fn int8_weight_axis(g: &Graph, id: NodeId) -> Option<usize> {
    let n = g.node(id);
    let axis = match &n.op {
        Op::Conv(_) => 0,
        Op::Gemm(gm) => usize::from(!gm.trans_b),
        Op::MatMul(_) => 1,
        _ => return None,
    };
    let wt = n.inputs.get(1).and_then(|o| g.const_tensor(*o))?;
    if wt.dtype() != DType::F32 || (matches!(n.op, Op::MatMul(_)) && wt.shape().len() != 2) {
        return None;
    }
    Some(axis)
}

/// Model metadata of a quantized file: `processor=precision,...`.
pub const QUANTIZED_KEY: &str = keys::PRECISIONS;

fn channel_of(i: usize, shape: &[usize], axis: usize) -> usize {
    let inner: usize = shape[axis + 1..].iter().product();
    (i / inner.max(1)) % shape[axis]
}

/// Symmetric int8 scale of each channel along `axis`.
fn channel_scales(values: &[f32], shape: &[usize], axis: usize) -> Vec<f32> {
    let mut amax = vec![0f32; shape[axis]];
    for (i, x) in values.iter().enumerate() {
        let c = channel_of(i, shape, axis);
        amax[c] = amax[c].max(x.abs());
    }
    amax.into_iter().map(params::weight_scale).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::builder::{Builder, ConvSpec};

    /// conv0 and relu on an int8 `cpu`, conv1 on an fp32 `gpu`.
    fn two_processors() -> (Graph, PrecisionMap) {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 3, 8, 8]).unwrap();
        let y = b.conv("conv0", x, ConvSpec::new(4, 3, 1).bias()).unwrap();
        let y = b.relu("relu", y).unwrap();
        let y = b.conv("conv1", y, ConvSpec::new(4, 3, 1)).unwrap();
        let mut g = b.finish("y", y).unwrap();
        g.fill_missing_weights(1);
        for id in g.node_ids() {
            let p = if g.node(id).name.starts_with("conv1") {
                "gpu"
            } else {
                "cpu"
            };
            g.annotate(id, keys::PROCESSOR, p);
        }
        let map = PrecisionMap::new(
            [
                ("cpu".to_string(), Precision::Int8),
                ("gpu".to_string(), Precision::Fp32),
            ]
            .into(),
            None,
        );
        (g, map)
    }

    #[test]
    fn int8_nodes_get_qdq_and_int8_weights_and_the_fp32_processor_keeps_floats() {
        let (g, map) = two_processors();
        let acts = activations_to_calibrate(&g, &map).unwrap();
        let names: Vec<&str> = acts.iter().map(|o| g.node(o.node).name.as_str()).collect();
        assert_eq!(names, ["x", "relu"], "relu's pair covers conv0");
        let (q, report) = insert_qdq(&g, &map, &[(-1.0, 1.0), (0.0, 3.0)]).unwrap();
        assert_eq!((report.int8_nodes, report.activations, report.weights), (2, 2, 1));
        let count = |kind: &str| q.node_ids().iter().filter(|id| q.node(**id).op.name() == kind).count();
        assert_eq!(count("QuantizeLinear"), 2);
        assert_eq!(count("DequantizeLinear"), 4, "2 activations, a weight and a bias");
        let relu = q.node(q.find("relu").unwrap());
        assert_eq!(q.node(relu.inputs[0].node).name, "conv0");
        let conv1 = q.node(q.find("conv1").unwrap());
        assert_eq!(q.node(conv1.inputs[0].node).name, "relu_dequantized");
        assert_eq!(q.const_tensor(conv1.inputs[1]).unwrap().dtype(), DType::F32);
        let conv0 = q.node(q.find("conv0").unwrap());
        let wdq = q.node(conv0.inputs[1].node);
        assert_eq!(q.const_tensor(wdq.inputs[0]).unwrap().dtype(), DType::I8);
        let bdq = q.node(conv0.inputs[2].node);
        assert_eq!(q.const_tensor(bdq.inputs[0]).unwrap().dtype(), DType::I32);
        for id in q.node_ids() {
            let n = q.node(id);
            if n.name.contains("quantized") {
                let reader = if id == conv1.inputs[0].node { "gpu" } else { "cpu" };
                assert_eq!(
                    n.annotations.get(keys::PROCESSOR).map(String::as_str),
                    Some(reader),
                    "{}",
                    n.name
                );
            }
        }
        assert_eq!(q.outputs()[0].1.node, q.find("conv1").unwrap());
        let cut = scheduler_rt::partition(&q, "cpu").unwrap().subgraphs;
        assert_eq!(cut.len(), 2);
        assert_eq!(cut[1].processor, "gpu");
        assert_eq!(cut[1].inputs.len(), 1);
        assert_eq!(
            q.fact(cut[1].inputs[0]).unwrap().dtype,
            DType::U8,
            "relu leaves the cpu as uint8"
        );
        assert_eq!(q.node(cut[1].nodes[0]).op.name(), "DequantizeLinear");
        assert_eq!(q.metadata.get(QUANTIZED_KEY).unwrap(), "cpu=int8,gpu=fp32");
        let e = insert_qdq(&g, &map, &[(0.0, 1.0)]).unwrap_err();
        assert!(e.to_string().contains("1 calibrated ranges for 2 activations"), "{e}");
    }

    #[test]
    fn a_value_read_by_a_float_activation_or_by_more_than_one_node_keeps_its_pair() {
        let (mut g, mut map) = two_processors();
        g.annotate(g.find("relu").unwrap(), keys::PROCESSOR, "gpu");
        let names = |g: &Graph, map: &PrecisionMap| -> Vec<String> {
            let acts = activations_to_calibrate(g, map).unwrap();
            acts.iter().map(|o| g.node(o.node).name.clone()).collect()
        };
        assert_eq!(names(&g, &map), ["x", "conv0"]);
        let (g, _) = two_processors();
        let mut twice = g.clone();
        let conv0 = twice.find("conv0").unwrap().out(0);
        twice
            .set_outputs(vec![("y".into(), twice.outputs()[0].1), ("c".into(), conv0)])
            .unwrap();
        assert_eq!(names(&twice, &map), ["x", "conv0", "relu"]);
        map = PrecisionMap::new(
            [
                ("cpu".to_string(), Precision::Int8),
                ("gpu".to_string(), Precision::Int8),
            ]
            .into(),
            None,
        );
        assert_eq!(names(&g, &map), ["x", "relu", "conv1"]);
    }

    /// A value an int8 node produces and int8 nodes on two processors
    /// read: one QuantizeLinear where it is made, a DequantizeLinear per
    /// reader on the reader's processor, so each subgraph reads uint8 and
    /// starts with the DQ its integer kernel fuses; a float graph input
    /// read by int8 nodes is quantized on their processor.
    #[test]
    fn int8_readers_on_another_processor_dequantize_on_their_side() {
        let (mut g, _) = two_processors();
        let relu = g.find("relu").unwrap();
        let y = g.outputs()[0].1;
        g.set_outputs(vec![("y".into(), y), ("r".into(), relu.out(0))]).unwrap();
        let map = PrecisionMap::new(
            [
                ("cpu".to_string(), Precision::Int8),
                ("gpu".to_string(), Precision::Int8),
            ]
            .into(),
            None,
        );
        let acts = activations_to_calibrate(&g, &map).unwrap();
        let ranges: Vec<(f32, f32)> = acts.iter().map(|_| (-1.0, 3.0)).collect();
        let (q, _) = insert_qdq(&g, &map, &ranges).unwrap();
        let node = |name: &str| q.node(q.find(name).unwrap());
        let processor = |name: &str| node(name).annotations.get(keys::PROCESSOR).cloned().unwrap();
        let quantizers: Vec<&str> = q
            .node_ids()
            .into_iter()
            .map(|id| q.node(id))
            .filter(|n| n.op.name() == "QuantizeLinear" && q.node(n.inputs[0].node).name == "relu")
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(quantizers, ["relu_quantized"], "one quantizer for every reader");
        assert_eq!(processor("relu_quantized"), "cpu");
        let dq1 = q.node(node("conv1").inputs[0].node);
        assert_eq!(dq1.op.name(), "DequantizeLinear");
        assert_eq!(dq1.annotations.get(keys::PROCESSOR).map(String::as_str), Some("gpu"));
        assert_eq!(q.node(dq1.inputs[0].node).name, "relu_quantized");
        let out = q.node(q.outputs()[1].1.node);
        assert_eq!(out.op.name(), "DequantizeLinear", "the graph output reads its own DQ");
        assert_eq!(out.annotations.get(keys::PROCESSOR).map(String::as_str), Some("cpu"));
        let cut = scheduler_rt::partition(&q, "cpu").unwrap().subgraphs;
        assert_eq!(cut.len(), 2);
        assert_eq!(cut[1].inputs, [q.find("relu_quantized").unwrap().out(0)]);
        assert_eq!(q.node(cut[1].nodes[0]).op.name(), "DequantizeLinear");
        assert_eq!(processor("x_quantized"), "cpu");
        q.check().unwrap();
    }

    #[test]
    fn channels_along_an_axis() {
        let shape = [2, 3];
        assert_eq!(
            (0..6).map(|i| channel_of(i, &shape, 0)).collect::<Vec<_>>(),
            [0, 0, 0, 1, 1, 1]
        );
        assert_eq!(
            (0..6).map(|i| channel_of(i, &shape, 1)).collect::<Vec<_>>(),
            [0, 1, 2, 0, 1, 2]
        );
        let s = channel_scales(&[1.0, -2.0, 0.5, 0.0, 0.0, 127.0], &shape, 0);
        assert!((s[0] - 2.0 / 127.0).abs() < 1e-9 && (s[1] - 1.0).abs() < 1e-9);
    }
}
