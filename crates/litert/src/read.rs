//! A LiteRT file read back as a graph to price: every operator of the
//! file as the graph-IR operator computing the same, the transposes,
//! pads, reshapes and (de)quantizations the lowering inserted included.
//! Rank-4 tensors are seen NCHW (the file's NHWC transposed back), so that
//! a cost model made for the ONNX files reads the same shapes; constants
//! carry shapes only.

use crate::error::LiteRtError;
use crate::lower::{TO_NCHW, TO_NHWC};
use crate::schema::litert as fb;
use crate::view::FileView;
use graph_ir::{DType, Fact, Graph, Op, Outlet, Tensor};
use std::collections::HashMap;

/// The graph of the LiteRT file `bytes` (named `file` in errors), one
/// node per operator of its first subgraph.
pub fn cost_graph(bytes: &[u8], file: &str) -> Result<Graph, LiteRtError> {
    let bad = |reason: String| LiteRtError::Read {
        file: file.to_string(),
        reason,
    };
    let f = FileView::open(bytes).map_err(|e| bad(e.to_string()))?;
    let sub = f.subgraph;
    let mut r = Reader {
        g: Graph::new(file),
        f,
        values: HashMap::new(),
        file: file.to_string(),
    };
    for i in sub.inputs().into_iter().flatten() {
        let fact = r.fact(i)?;
        let o = r.g.add_input(r.name(i), fact).map_err(|e| bad(e.to_string()))?;
        r.values.insert(i, o);
    }
    for (k, op) in sub.operators().into_iter().flatten().enumerate() {
        let code =
            r.f.code(&op)
                .ok_or_else(|| bad(format!("operator {k} names no operator code")))?;
        r.operator(k, code, &op)?;
    }
    let mut outputs = Vec::new();
    for i in sub.outputs().into_iter().flatten() {
        let o = r.value(i)?;
        outputs.push((r.name(i), o));
    }
    r.g.set_outputs(outputs).map_err(|e| bad(e.to_string()))?;
    Ok(r.g)
}

/// A file being read and the graph made so far.
pub(crate) struct Reader<'a> {
    g: Graph,
    f: FileView<'a>,
    values: HashMap<i32, Outlet>,
    file: String,
}

/// An NHWC shape seen NCHW.
pub(crate) fn view(shape: &[usize]) -> Vec<usize> {
    if shape.len() == 4 {
        TO_NCHW.iter().map(|&p| shape[p]).collect()
    } else {
        shape.to_vec()
    }
}

/// The NCHW axis of NHWC axis `a` of a rank-4 tensor.
pub(crate) fn view_axis(a: usize, rank: usize) -> usize {
    if rank == 4 { TO_NHWC[a] } else { a }
}

impl<'a> Reader<'a> {
    pub(crate) fn bad(&self, reason: String) -> LiteRtError {
        LiteRtError::Read {
            file: self.file.clone(),
            reason,
        }
    }

    pub(crate) fn tensor(&self, i: i32) -> Result<fb::Tensor<'a>, LiteRtError> {
        self.f
            .tensor(i)
            .ok_or_else(|| self.bad(format!("tensor {i} does not exist")))
    }

    pub(crate) fn name(&self, i: i32) -> String {
        self.f.name(i)
    }

    /// The file's shape of tensor `i`.
    pub(crate) fn shape(&self, i: i32) -> Result<Vec<usize>, LiteRtError> {
        let t = self.tensor(i)?;
        Ok(t.shape()
            .map(|s| s.iter().map(|d| d.max(0) as usize).collect())
            .unwrap_or_default())
    }

    /// The graph's type of tensor `i`: float16 constants stay float16;
    /// everything else is priced as float32 (the processor's precision
    /// prices the arithmetic; (de)quantizations become conversions).
    pub(crate) fn dtype(&self, i: i32) -> Result<DType, LiteRtError> {
        Ok(match self.tensor(i)?.type_() {
            fb::TensorType::FLOAT16 => DType::F16,
            _ => DType::F32,
        })
    }

    pub(crate) fn fact(&self, i: i32) -> Result<Fact, LiteRtError> {
        Ok(Fact::new(self.dtype(i)?, view(&self.shape(i)?)))
    }

    /// The integer values of constant tensor `i` (shapes, axes, paddings).
    pub(crate) fn ints(&self, i: i32) -> Result<Vec<i64>, LiteRtError> {
        let t = self.tensor(i)?;
        let data = self
            .f
            .buffers
            .get(t.buffer() as usize)
            .and_then(|b| b.data())
            .ok_or_else(|| self.bad(format!("tensor `{}` is not a constant", self.name(i))))?;
        let bytes = data.bytes();
        Ok(match t.type_() {
            fb::TensorType::INT32 => bytes
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
            fb::TensorType::INT64 => bytes
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
            _ => return Err(self.bad(format!("tensor `{}` holds no integers", self.name(i)))),
        })
    }

    pub(crate) fn is_const(&self, i: i32) -> bool {
        self.f.data(i).is_some()
    }

    /// The value of tensor `i`: computed, an input, or a constant made
    /// with `shape` (its graph-IR shape; the file's seen NCHW by default).
    pub(crate) fn value_as(&mut self, i: i32, shape: Option<Vec<usize>>) -> Result<Outlet, LiteRtError> {
        if let Some(o) = self.values.get(&i) {
            return Ok(*o);
        }
        if !self.is_const(i) {
            return Err(self.bad(format!("tensor `{}` is read before it is computed", self.name(i))));
        }
        let fact = Fact::new(self.dtype(i)?, shape.unwrap_or(view(&self.shape(i)?)));
        let name = self.g.unique_name(&self.name(i));
        self.g
            .add_const(name, Tensor::without_data(fact))
            .map_err(|e| self.bad(e.to_string()))
    }

    pub(crate) fn value(&mut self, i: i32) -> Result<Outlet, LiteRtError> {
        self.value_as(i, None)
    }

    /// Adds `op` on `inputs` computing the operator's output `out`.
    pub(crate) fn add(&mut self, k: usize, op: Op, inputs: &[Outlet], out: i32) -> Result<(), LiteRtError> {
        let name = self.g.unique_name(&self.name(out));
        let id = self
            .g
            .add_node(name, op, inputs)
            .map_err(|e| self.bad(format!("operator {k}: {e}")))?;
        self.values.insert(out, id.out(0));
        Ok(())
    }

    fn operator(&mut self, k: usize, code: fb::BuiltinOperator, op: &fb::Operator<'a>) -> Result<(), LiteRtError> {
        let ins: Vec<i32> = op.inputs().map(|v| v.iter().collect()).unwrap_or_default();
        let outs: Vec<i32> = op.outputs().map(|v| v.iter().collect()).unwrap_or_default();
        let (Some(&x), Some(&y)) = (ins.first(), outs.first()) else {
            return Err(self.bad(format!("operator {k} ({code:?}) has no input or output")));
        };
        crate::read_ops::operator(self, k, code, op, &ins, x, y)
    }
}
