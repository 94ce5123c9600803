//! Lowering a graph-IR subgraph to one LiteRT subgraph.
//!
//! Every rank-4 activation of the file is NHWC (the ONNX files' NCHW
//! transposed); other tensors keep the ONNX axis order. A node becomes
//! LiteRT operators in the files' float domain, except where a
//! quantized pattern (`DequantizeLinear` inputs, a `QuantizeLinear` after
//! the node, maybe through a ReLU) lets it compute on int8 tensors
//! ([`quant`]); float16 constants are stored as float16 and dequantized
//! to float32 in the file (LiteRT's float16 weight format), and casts
//! between float16 and float32 vanish.

mod consts;
mod conv;
mod elementwise;
mod gemm;
mod pool;
pub(crate) mod quant;
mod shape;

use crate::error::LiteRtError;
use crate::model::{Elem, EmptyOptions, ModelBuilder, Options};
use crate::schema::litert::BuiltinOperator as B;
use graph_ir::{DType, Graph, NodeId, Op, Outlet};
use std::collections::{HashMap, HashSet};

/// What an outlet of the ONNX graph is in the file.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    /// A tensor of the file.
    T(i32),
    /// A constant, in the ONNX layout.
    Const(graph_ir::Tensor),
    /// A `DequantizeLinear` of a constant (weights, biases).
    QConst(quant::QConst),
    /// A `DequantizeLinear` of an int8 tensor of the file: the float
    /// value, dequantized when a float operator reads it.
    Deq(i32),
    /// `Flatten` of an NHWC tensor `src` (C, H, W as given) to rank 2,
    /// its columns in NHWC order: a fully-connected layer permutes its
    /// weights instead of the activations being transposed.
    FlatNhwc { flat: i32, src: i32, chw: [usize; 3] },
}

/// The lowering of one subgraph.
pub(crate) struct Lower<'g> {
    pub g: &'g Graph,
    pub m: ModelBuilder,
    values: HashMap<Outlet, Value>,
    /// Nodes already lowered as part of an earlier node.
    absorbed: HashSet<NodeId>,
    dequantized: HashMap<i32, i32>,
    pub notes: Vec<String>,
    /// The subgraph's name, for errors.
    pub subgraph: String,
}

/// `NCHW` shape → `NHWC`.
pub(crate) fn nhwc(shape: &[usize]) -> Vec<usize> {
    if shape.len() == 4 {
        vec![shape[0], shape[2], shape[3], shape[1]]
    } else {
        shape.to_vec()
    }
}

/// The position in an NHWC tensor of ONNX axis `a` of a rank-4 value.
pub(crate) fn nhwc_axis(a: usize) -> usize {
    [0, 3, 1, 2][a]
}

/// Permutation taking NCHW to NHWC, and back.
pub(crate) const TO_NHWC: [usize; 4] = [0, 2, 3, 1];
pub(crate) const TO_NCHW: [usize; 4] = [0, 3, 1, 2];

impl<'g> Lower<'g> {
    pub fn new(g: &'g Graph, subgraph: &str) -> Lower<'g> {
        let mut m = ModelBuilder::new();
        for (name, _) in g.outputs() {
            m.reserve(name);
        }
        Lower {
            g,
            m,
            values: HashMap::new(),
            absorbed: HashSet::new(),
            dequantized: HashMap::new(),
            notes: Vec::new(),
            subgraph: subgraph.to_string(),
        }
    }

    /// An error about node `id`.
    pub fn refuse(&self, id: NodeId, reason: impl Into<String>) -> LiteRtError {
        let n = self.g.node(id);
        LiteRtError::Unsupported {
            subgraph: self.subgraph.clone(),
            node: n.name.clone(),
            op: n.op.name().to_string(),
            reason: reason.into(),
        }
    }

    pub fn value(&self, o: Outlet) -> Result<&Value, LiteRtError> {
        self.values.get(&o).ok_or_else(|| LiteRtError::Internal {
            subgraph: self.subgraph.clone(),
            what: format!("value of `{}` used before it is lowered", self.g.node(o.node).name),
        })
    }

    pub fn set(&mut self, o: Outlet, v: Value) {
        self.values.insert(o, v);
    }

    pub fn absorb(&mut self, id: NodeId) {
        self.absorbed.insert(id);
    }

    /// The ONNX fact of `o`.
    pub fn fact(&self, o: Outlet) -> &graph_ir::Fact {
        &self.g.node(o.node).outputs[o.slot]
    }

    /// The constant at `o`, if it is one.
    pub fn constant(&self, o: Outlet) -> Option<&graph_ir::Tensor> {
        match self.values.get(&o) {
            Some(Value::Const(t)) => Some(t),
            _ => None,
        }
    }

    /// A new float32 activation for output `slot` of node `id` (NHWC at rank 4).
    pub fn f32_out(&mut self, id: NodeId, slot: usize) -> i32 {
        let shape = nhwc(&self.g.node(id).outputs[slot].shape);
        let name = self.g.node(id).name.clone();
        self.m.activation(&name, Elem::F32, shape, None)
    }

    /// The rank-`rank` shape of the file's tensor `t`.
    pub fn shape(&self, t: i32) -> Vec<usize> {
        self.m.tensor(t).shape.clone()
    }

    /// Operator `code` (version 1).
    pub fn emit(&mut self, code: B, inputs: &[i32], outputs: &[i32], options: Options) {
        self.m.op((code, 1), inputs, outputs, options);
    }

    /// `t` transposed by `perm`, named after `name`.
    pub fn transpose(&mut self, t: i32, perm: &[usize], name: &str) -> i32 {
        let def = self.m.tensor(t).clone();
        let shape: Vec<usize> = perm.iter().map(|&p| def.shape[p]).collect();
        let perm_i: Vec<i32> = perm.iter().map(|&p| p as i32).collect();
        let p = self
            .m
            .const_i32(&format!("{name}_perm"), vec![perm.len()], &perm_i, None);
        let out = self.m.activation(name, def.elem, shape, def.quant.clone());
        self.emit(B::TRANSPOSE, &[t, p], &[out], Options::Empty(EmptyOptions::Transpose));
        out
    }

    /// `t` reshaped to `shape`, named after `name`.
    pub fn reshape(&mut self, t: i32, shape: Vec<usize>, name: &str) -> i32 {
        let def = self.m.tensor(t).clone();
        let s: Vec<i32> = shape.iter().map(|&d| d as i32).collect();
        let st = self.m.const_i32(&format!("{name}_shape"), vec![s.len()], &s, None);
        let out = self.m.activation(name, def.elem, shape.clone(), def.quant.clone());
        self.emit(B::RESHAPE, &[t, st], &[out], Options::Reshape(shape));
        out
    }

    /// The float32 tensor of `o` (for a rank-4 activation, NHWC; a
    /// constant in the layout an activation of its rank has).
    pub fn float(&mut self, o: Outlet) -> Result<i32, LiteRtError> {
        let v = self.value(o)?.clone();
        let t = match v {
            Value::T(t) => {
                if self.m.tensor(t).elem == Elem::I8 {
                    self.dequantize(t)
                } else {
                    t
                }
            }
            Value::Deq(t) => self.dequantize(t),
            Value::Const(c) => consts::activation_const(self, o, &c, 0)?,
            Value::QConst(q) => {
                let c = q.dequantized();
                consts::activation_const(self, o, &c, 0)?
            }
            Value::FlatNhwc { src, chw, .. } => {
                let name = format!("{}_nchw", self.g.node(o.node).name);
                let n = self.shape(src)[0];
                let nchw = self.transpose(src, &TO_NCHW, &name);
                let t = self.reshape(nchw, vec![n, chw[0] * chw[1] * chw[2]], &name);
                if self.m.tensor(t).elem == Elem::I8 {
                    self.set(o, Value::Deq(t));
                    self.dequantize(t)
                } else {
                    self.set(o, Value::T(t));
                    t
                }
            }
        };
        Ok(t)
    }

    /// A float32 DEQUANTIZE of int8 tensor `t` (one per tensor).
    pub fn dequantize(&mut self, t: i32) -> i32 {
        if let Some(f) = self.dequantized.get(&t) {
            return *f;
        }
        let def = self.m.tensor(t).clone();
        let f = self
            .m
            .activation(&format!("{}_dequantized", def.name), Elem::F32, def.shape, None);
        self.emit(B::DEQUANTIZE, &[t], &[f], Options::Empty(EmptyOptions::Dequantize));
        self.dequantized.insert(t, f);
        f
    }

    /// Lowers every node of the graph in order.
    pub fn run(&mut self) -> Result<(Vec<i32>, Vec<i32>), LiteRtError> {
        let g = self.g;
        let mut inputs = Vec::new();
        for id in g.inputs() {
            inputs.push(self.input(*id)?);
        }
        let order = g.topo_order().map_err(|e| LiteRtError::Internal {
            subgraph: self.subgraph.clone(),
            what: e.to_string(),
        })?;
        for id in order {
            if self.absorbed.contains(&id) || g.inputs().contains(&id) {
                continue;
            }
            self.node(id)?;
        }
        let outputs = self.outputs(&inputs)?;
        Ok((inputs, outputs))
    }

    fn node(&mut self, id: NodeId) -> Result<(), LiteRtError> {
        let n = self.g.node(id);
        match &n.op {
            Op::Input(_) => Ok(()),
            Op::Const(t) => {
                let t = t.clone();
                self.set(id.out(0), Value::Const(t));
                Ok(())
            }
            Op::QuantizeLinear(_) => quant::quantize(self, id),
            Op::DequantizeLinear(d) => quant::dequantize_node(self, id, d.axis),
            Op::Cast(c) => self.cast(id, c.to),
            Op::Conv(c) => conv::conv(self, id, c),
            Op::Pool(p) => pool::pool(self, id, p),
            Op::GlobalAveragePool(_) => pool::global(self, id, B::MEAN),
            Op::GlobalMaxPool(_) => pool::global(self, id, B::REDUCE_MAX),
            Op::Reduce(r) => pool::reduce(self, id, r),
            Op::Gemm(gm) => gemm::gemm(self, id, gm.alpha, gm.beta, gm.trans_a, gm.trans_b),
            Op::MatMul(_) => gemm::gemm(self, id, 1.0, 1.0, false, false),
            Op::Unary(u) => elementwise::unary(self, id, &u.op),
            Op::Binary(b) => elementwise::binary(self, id, b.op),
            Op::BatchNorm(b) => elementwise::batch_norm(self, id, b.epsilon),
            Op::Concat(c) => shape::concat(self, id, c.axis),
            Op::Reshape(_) => shape::reshape(self, id),
            Op::Flatten(_) => shape::flatten(self, id),
            Op::Transpose(t) => shape::transpose(self, id, &t.perm),
            Op::Pad(p) => shape::pad(self, id, p),
            Op::Softmax(s) => shape::softmax(self, id, s.axis, s.log),
            Op::Slice(s) => shape::slice(self, id, s),
            Op::Split(s) => shape::split(self, id, s),
            Op::Resize(r) => shape::resize(self, id, r),
            _ => Err(self.refuse(id, "LiteRT has no operator stretch maps it to")),
        }
    }

    /// Casts between float16 and float32 vanish (the file computes in
    /// float32); other casts are refused.
    fn cast(&mut self, id: NodeId, to: DType) -> Result<(), LiteRtError> {
        let n = self.g.node(id);
        let from = self.fact(n.inputs[0]).dtype;
        let floats = |d: DType| matches!(d, DType::F16 | DType::F32);
        if !(floats(from) && floats(to)) {
            return Err(self.refuse(id, format!("a cast from {from} to {to}")));
        }
        let v = self.value(n.inputs[0])?.clone();
        self.set(id.out(0), v);
        Ok(())
    }

    /// The tensor of graph input `id`: float32 (NHWC at rank 4), or int8
    /// with the parameters of the `DequantizeLinear` nodes that read it.
    fn input(&mut self, id: NodeId) -> Result<i32, LiteRtError> {
        let n = self.g.node(id);
        let fact = n.outputs[0].clone();
        let shape = nhwc(&fact.shape);
        if fact.rank() > 4 {
            return Err(LiteRtError::Rank {
                subgraph: self.subgraph.clone(),
                tensor: n.name.clone(),
                rank: fact.rank(),
            });
        }
        let t = match fact.dtype {
            DType::F32 | DType::F16 => self.m.activation(&n.name, Elem::F32, shape, None),
            DType::U8 | DType::I8 => {
                let q = quant::input_params(self, id)?;
                self.m.activation(&n.name, Elem::I8, shape, Some(q))
            }
            d => {
                return Err(LiteRtError::InputType {
                    subgraph: self.subgraph.clone(),
                    tensor: n.name.clone(),
                    dtype: d.to_string(),
                });
            }
        };
        self.m.rename(t, &n.name);
        self.set(id.out(0), Value::T(t));
        Ok(t)
    }

    /// The tensors of the graph's outputs, each named as the graph names
    /// it; one that is already a boundary tensor is copied.
    fn outputs(&mut self, inputs: &[i32]) -> Result<Vec<i32>, LiteRtError> {
        let mut outs: Vec<i32> = Vec::new();
        for (name, o) in self.g.outputs().to_vec() {
            let quantized = matches!(self.fact(o).dtype, DType::U8 | DType::I8);
            let mut t = match self.value(o)?.clone() {
                Value::T(t) => t,
                Value::Deq(t) if quantized => t,
                _ => self.float(o)?,
            };
            if quantized && self.m.tensor(t).elem != Elem::I8 {
                return Err(LiteRtError::Internal {
                    subgraph: self.subgraph.clone(),
                    what: format!("output `{name}` is quantized in the ONNX file but not in the LiteRT file"),
                });
            }
            if inputs.contains(&t) || outs.contains(&t) || self.m.tensor(t).buffer != 0 {
                let shape = self.shape(t);
                t = self.reshape(t, shape, &name);
            }
            self.m.rename(t, &name);
            outs.push(t);
        }
        Ok(outs)
    }
}
