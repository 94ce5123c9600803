//! A LiteRT file as a tract-core model, read over stretch's own subset of
//! LiteRT's schema ([`litert::schema`]): the operators stretch's exporter
//! writes, grouped convolutions, quantizations, dequantizations and
//! float16 weights included.
//!
//! Precision: a per-tensor int8 tensor of the file is a QI8 value with its
//! scale and zero point. Every operator computes in float32 on the
//! dequantized values of its inputs, and its result is rounded to the int8
//! grid of its output tensor (half to even, clamped) where the file stores
//! that tensor as int8, so each int8 tensor holds a value LiteRT's kernels
//! can hold. The integer arithmetic inside LiteRT's int8 kernels
//! (fixed-point requantization multipliers) is not reproduced: an int8
//! output can be one step from LiteRT's where a value falls next to a
//! rounding boundary. Float16 constants are widened to float32: a GPU
//! delegate computing in float16 is not reproduced either.

mod conv;
mod pointwise;
mod shape;

use litert::schema::litert as fb;
use litert::{FileView, OpenError};
use std::collections::HashMap;
use thiserror::Error;
use tract_core::internal::*;
use tract_core::ops::cast::cast;

/// Why a LiteRT file cannot be made a tract model.
#[derive(Debug, Error)]
pub enum LiteLoadError {
    #[error("not a LiteRT model: {0}")]
    NotLiteRt(String),
    #[error("operator {index} is {code}, which stretch-run does not run")]
    Unsupported { index: usize, code: String },
    #[error("operator {index} ({code}, output `{output}`): {reason}")]
    Operator {
        index: usize,
        code: String,
        output: String,
        reason: String,
    },
    #[error("tensor {index} (`{name}`): {reason}")]
    Tensor { index: i32, name: String, reason: String },
}

/// The tract model of the LiteRT file `bytes`: its first subgraph, inputs
/// and outputs in the file's orders and types (QI8 for int8 tensors).
pub fn typed_model(bytes: &[u8]) -> Result<TypedModel, LiteLoadError> {
    let f = FileView::open(bytes).map_err(|e| match e {
        OpenError::NotLiteRt(reason) => LiteLoadError::NotLiteRt(reason),
        OpenError::NoSubgraph => LiteLoadError::NotLiteRt("no subgraph".into()),
    })?;
    let sub = f.subgraph;
    let mut l = Loader {
        model: TypedModel::default(),
        f,
        wires: HashMap::new(),
        floats: HashMap::new(),
        consts: HashMap::new(),
    };
    for i in sub.inputs().into_iter().flatten() {
        let source = l.datum(i).and_then(|dt| {
            let fact = dt.fact(l.shape(i)?);
            l.model.add_source(l.name(i), fact)
        });
        let wire = source.map_err(|e| l.tensor_error(i, e))?;
        l.wires.insert(i, wire);
    }
    for (index, op) in sub.operators().into_iter().flatten().enumerate() {
        let code = l.f.code(&op).ok_or_else(|| LiteLoadError::Operator {
            index,
            code: "?".into(),
            output: "?".into(),
            reason: format!(
                "names operator code {}, the file has {}",
                op.opcode_index(),
                l.f.codes.len()
            ),
        })?;
        l.operator(index, code, &op)?;
    }
    let mut outputs = Vec::new();
    for i in sub.outputs().into_iter().flatten() {
        let wire = l.wires.get(&i).copied().ok_or_else(|| LiteLoadError::Tensor {
            index: i,
            name: l.name(i),
            reason: "is an output no operator computes".into(),
        })?;
        outputs.push(wire);
    }
    l.model
        .select_output_outlets(&outputs)
        .map_err(|e| LiteLoadError::NotLiteRt(format!("{e:#}")))?;
    Ok(l.model)
}

/// A file being read and the model made so far.
pub(crate) struct Loader<'a> {
    pub(crate) model: TypedModel,
    f: FileView<'a>,
    /// Tensor → its wire, in the file's type (QI8 for per-tensor int8).
    wires: HashMap<i32, OutletId>,
    /// Tensor → its float32 wire.
    floats: HashMap<i32, OutletId>,
    /// Tensor → its float32 value, for constants and tensors the file
    /// computes from constants alone (a DEQUANTIZE of float16 weights).
    consts: HashMap<i32, Arc<Tensor>>,
}

/// A tensor's quantization: per-channel along `axis` where `scale` has
/// more than one entry.
pub(crate) struct Quant {
    pub scale: Vec<f32>,
    pub zero_point: Vec<i64>,
    pub axis: usize,
}

impl<'a> Loader<'a> {
    fn tensor(&self, i: i32) -> TractResult<fb::Tensor<'a>> {
        self.f.tensor(i).with_context(|| format!("tensor {i} does not exist"))
    }

    pub(crate) fn name(&self, i: i32) -> String {
        self.f.name(i)
    }

    fn tensor_error(&self, i: i32, e: TractError) -> LiteLoadError {
        LiteLoadError::Tensor {
            index: i,
            name: self.name(i),
            reason: format!("{e:#}"),
        }
    }

    /// The file's shape of tensor `i`.
    pub(crate) fn shape(&self, i: i32) -> TractResult<TVec<usize>> {
        let t = self.tensor(i)?;
        t.shape()
            .map(|s| s.iter().collect::<Vec<i32>>())
            .unwrap_or_default()
            .into_iter()
            .map(|d| usize::try_from(d).map_err(|_| format_err!("has dimension {d}")))
            .collect()
    }

    pub(crate) fn quant(&self, i: i32) -> TractResult<Option<Quant>> {
        let Some(q) = self.tensor(i)?.quantization() else {
            return Ok(None);
        };
        let scale: Vec<f32> = q.scale().map(|s| s.iter().collect()).unwrap_or_default();
        if scale.is_empty() {
            return Ok(None);
        }
        let zero_point: Vec<i64> = q.zero_point().map(|z| z.iter().collect()).unwrap_or_default();
        ensure!(
            zero_point.is_empty() || zero_point.len() == scale.len(),
            "has {} scales and {} zero points",
            scale.len(),
            zero_point.len()
        );
        ensure!(
            scale.iter().all(|s| s.is_finite() && *s > 0.0),
            "has a scale that is not a positive number: {scale:?}"
        );
        let axis =
            usize::try_from(q.quantized_dimension()).map_err(|_| format_err!("has a negative quantized dimension"))?;
        Ok(Some(Quant {
            scale,
            zero_point,
            axis,
        }))
    }

    /// The datum type of tensor `i` as a value of the model: QI8 with its
    /// parameters for a per-tensor quantized int8 tensor.
    pub(crate) fn datum(&self, i: i32) -> TractResult<DatumType> {
        let q = self.quant(i)?;
        let per_tensor = q.as_ref().filter(|q| q.scale.len() == 1);
        Ok(match self.tensor(i)?.type_() {
            fb::TensorType::FLOAT32 => DatumType::F32,
            fb::TensorType::FLOAT16 => DatumType::F16,
            fb::TensorType::INT32 => DatumType::I32,
            fb::TensorType::INT64 => DatumType::I64,
            fb::TensorType::INT8 => match per_tensor {
                Some(q) => {
                    let zero_point = q.zero_point.first().copied().unwrap_or(0);
                    ensure!((-128..=127).contains(&zero_point), "has int8 zero point {zero_point}");
                    DatumType::QI8(QParams::ZpScale {
                        zero_point: zero_point as i32,
                        scale: q.scale[0],
                    })
                }
                None => DatumType::I8,
            },
            other => bail!("has element type {other:?}, which stretch-run does not read"),
        })
    }

    /// The bytes of constant tensor `i`, `None` for a computed tensor.
    fn data(&self, i: i32) -> TractResult<Option<&'a [u8]>> {
        self.tensor(i)?;
        Ok(self.f.data(i))
    }

    /// Constant tensor `i` with its element type as stored (no
    /// quantization parameters), `None` for a computed tensor.
    fn raw_const(&self, i: i32) -> TractResult<Option<Tensor>> {
        let Some(bytes) = self.data(i)? else {
            return Ok(None);
        };
        let shape = self.shape(i)?;
        let dt = self.datum(i)?.unquantized();
        let len: usize = shape.iter().product();
        ensure!(
            bytes.len() == len * dt.size_of(),
            "holds {} bytes for {len} values of {dt:?}",
            bytes.len()
        );
        let t = match dt {
            DatumType::F32 => Tensor::from_shape(&shape, &le::<4, f32>(bytes, f32::from_le_bytes))?,
            DatumType::F16 => {
                Tensor::from_shape(&shape, &le::<2, f16>(bytes, |b| f16::from_bits(u16::from_le_bytes(b))))?
            }
            DatumType::I32 => Tensor::from_shape(&shape, &le::<4, i32>(bytes, i32::from_le_bytes))?,
            DatumType::I64 => Tensor::from_shape(&shape, &le::<8, i64>(bytes, i64::from_le_bytes))?,
            DatumType::I8 => Tensor::from_shape(&shape, &le::<1, i8>(bytes, i8::from_le_bytes))?,
            other => bail!("is a constant of {other:?}"),
        };
        Ok(Some(t))
    }

    /// The integers of constant tensor `i` (shapes, axes, paddings).
    pub(crate) fn ints(&self, i: i32) -> TractResult<Vec<i64>> {
        let t = self
            .raw_const(i)?
            .with_context(|| format!("`{}` is not a constant", self.name(i)))?;
        ensure!(
            matches!(t.datum_type(), DatumType::I32 | DatumType::I64),
            "`{}` holds no integers",
            self.name(i)
        );
        Ok(t.cast_to::<i64>()?.try_as_plain_ram()?.as_slice::<i64>()?.to_vec())
    }

    /// The float32 value of constant tensor `i` (dequantized along its
    /// quantized dimension), `None` for a computed tensor.
    pub(crate) fn float_const(&mut self, i: i32) -> TractResult<Option<Arc<Tensor>>> {
        if let Some(t) = self.consts.get(&i) {
            return Ok(Some(t.clone()));
        }
        let Some(raw) = self.raw_const(i)? else {
            return Ok(None);
        };
        let t = match self.quant(i)? {
            Some(q) => dequantize(&raw, &q)?,
            None => raw.cast_to::<f32>()?.into_owned(),
        };
        let t = Arc::new(t);
        self.consts.insert(i, t.clone());
        Ok(Some(t))
    }

    /// A constant of the model.
    pub(crate) fn konst(&mut self, name: &str, t: impl Into<Arc<Tensor>>) -> TractResult<OutletId> {
        let name = self.model.unique_name(name).into_owned();
        self.model.add_const(name, t.into())
    }

    /// The float32 wire of tensor `i`: a constant, or the computed value
    /// dequantized.
    pub(crate) fn float(&mut self, i: i32) -> TractResult<OutletId> {
        if let Some(w) = self.floats.get(&i) {
            return Ok(*w);
        }
        let wire = if let Some(t) = self.float_const(i)? {
            let name = self.name(i);
            self.konst(&name, t)?
        } else {
            let w = *self
                .wires
                .get(&i)
                .with_context(|| format!("`{}` is read before it is computed", self.name(i)))?;
            if self.model.outlet_fact(w)?.datum_type == DatumType::F32 {
                w
            } else {
                self.wire(&format!("{}.f32", self.name(i)), cast(DatumType::F32), &[w])?
            }
        };
        self.floats.insert(i, wire);
        Ok(wire)
    }

    /// Wires `op` on `inputs` under a name made from `name`; its first output.
    pub(crate) fn wire(
        &mut self,
        name: &str,
        op: impl Into<Box<dyn TypedOp>>,
        inputs: &[OutletId],
    ) -> TractResult<OutletId> {
        let name = self.model.unique_name(name).into_owned();
        Ok(self.model.wire_node(name, op, inputs)?[0])
    }

    /// Records `w` (float32) as tensor `y`, rounded to its int8 grid where
    /// the file stores `y` as int8; its shape must be the file's.
    fn output(&mut self, y: i32, w: OutletId) -> TractResult<()> {
        let shape = self.shape(y)?;
        let fact = self.model.outlet_fact(w)?.clone();
        ensure!(
            fact.shape.as_concrete() == Some(&shape[..]),
            "computes shape {:?}, the file says {shape:?}",
            fact.shape
        );
        let dt = self.datum(y)?;
        let stored = if dt == fact.datum_type {
            self.floats.insert(y, w);
            w
        } else {
            ensure!(
                dt == DatumType::F32 || dt.is_quantized(),
                "is stored as {dt:?}, which no operator here computes"
            );
            self.wire(&self.name(y), cast(dt), &[w])?
        };
        self.wires.insert(y, stored);
        Ok(())
    }

    /// `x` after the fused activation `act`.
    pub(crate) fn activation(
        &mut self,
        name: &str,
        x: OutletId,
        act: fb::ActivationFunctionType,
    ) -> TractResult<OutletId> {
        use fb::ActivationFunctionType as A;
        let (low, high) = match act {
            A::NONE => return Ok(x),
            A::RELU => (Some(0.0), None),
            A::RELU6 => (Some(0.0), Some(6.0)),
            A::RELU_N1_TO_1 => (Some(-1.0), Some(1.0)),
            other => bail!("has fused activation {other:?}, which stretch-run does not run"),
        };
        pointwise::clip(self, name, x, low, high)
    }

    fn operator(
        &mut self,
        index: usize,
        code: fb::BuiltinOperator,
        op: &fb::Operator<'a>,
    ) -> Result<(), LiteLoadError> {
        let ins: Vec<i32> = op.inputs().map(|v| v.iter().collect()).unwrap_or_default();
        let outs: Vec<i32> = op.outputs().map(|v| v.iter().collect()).unwrap_or_default();
        let code_name = code
            .variant_name()
            .map(str::to_string)
            .unwrap_or_else(|| format!("builtin operator {}", code.0));
        let err = |output: String, reason: String| LiteLoadError::Operator {
            index,
            code: code_name.clone(),
            output,
            reason,
        };
        let (Some(&y), Some(_)) = (outs.first(), ins.first()) else {
            return Err(err("?".into(), "has no input or no output".into()));
        };
        let result = match code.variant_name() {
            Some(_) => self.computed(code, op, &ins, y),
            None => Ok(None),
        };
        match result {
            Ok(Some(())) => Ok(()),
            Ok(None) => Err(LiteLoadError::Unsupported {
                index,
                code: code_name.clone(),
            }),
            Err(e) => Err(err(self.name(y), format!("{e:#}"))),
        }
    }

    /// Wires operator `op` computing tensor `y`; `None` for an operator
    /// this loader does not run.
    fn computed(
        &mut self,
        code: fb::BuiltinOperator,
        op: &fb::Operator<'a>,
        ins: &[i32],
        y: i32,
    ) -> TractResult<Option<()>> {
        use fb::BuiltinOperator as B;
        let x = ins[0];
        let name = self.name(y);
        let w = match code {
            B::CONV_2D => conv::conv2d(self, &name, op, ins)?,
            B::DEPTHWISE_CONV_2D => conv::depthwise(self, &name, op, ins)?,
            B::FULLY_CONNECTED => conv::fully_connected(self, &name, op, ins, y)?,
            B::AVERAGE_POOL_2D | B::MAX_POOL_2D => conv::pool(self, &name, code, op, x)?,
            B::ADD | B::SUB | B::MUL | B::DIV | B::MAXIMUM | B::MINIMUM => {
                pointwise::binary(self, &name, code, op, ins)?
            }
            B::RELU | B::RELU6 | B::LOGISTIC | B::TANH | B::HARD_SWISH | B::LEAKY_RELU => {
                pointwise::unary(self, &name, code, op, x)?
            }
            B::SOFTMAX => pointwise::softmax(self, &name, op, x)?,
            B::MEAN | B::SUM | B::REDUCE_MAX => pointwise::reduce(self, &name, code, op, ins, y)?,
            B::QUANTIZE | B::DEQUANTIZE => {
                if let Some(t) = self.float_const(x)? {
                    ensure!(
                        self.datum(y)? == DatumType::F32,
                        "quantizes a constant (a file stores int8 constants as int8)"
                    );
                    self.consts.insert(y, t);
                    return Ok(Some(()));
                }
                self.float(x)?
            }
            B::RESHAPE => shape::reshape(self, &name, x, y)?,
            B::TRANSPOSE => shape::transpose(self, &name, ins)?,
            B::CONCATENATION => shape::concat(self, &name, op, ins)?,
            B::PAD | B::PADV2 => shape::pad(self, &name, ins)?,
            B::SLICE => shape::slice(self, &name, ins)?,
            B::RESIZE_BILINEAR | B::RESIZE_NEAREST_NEIGHBOR => shape::resize(self, &name, code, op, ins)?,
            _ => return Ok(None),
        };
        self.output(y, w)?;
        Ok(Some(()))
    }
}

/// `n`-byte little-endian values of `bytes`.
fn le<const N: usize, T>(bytes: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|c| f(c.try_into().expect("chunks of N bytes")))
        .collect()
}

/// `raw` (int8 or int32 values) as float32: `scale · (q − zero_point)`,
/// per channel along `q.axis` where `q` has several scales.
fn dequantize(raw: &Tensor, q: &Quant) -> TractResult<Tensor> {
    let values = raw.cast_to::<f32>()?;
    let mut t = values.into_owned();
    let shape = t.shape().to_vec();
    let channels = q.scale.len();
    let (outer, inner) = if channels == 1 {
        (1, t.len())
    } else {
        ensure!(
            q.axis < shape.len() && shape[q.axis] == channels,
            "has {channels} scales along dimension {} of shape {shape:?}",
            q.axis
        );
        (
            shape[..q.axis].iter().product::<usize>(),
            shape[q.axis + 1..].iter().product::<usize>(),
        )
    };
    let mut plain = t.try_as_plain_ram_mut()?;
    let data = plain.as_slice_mut::<f32>()?;
    for o in 0..outer {
        for c in 0..channels {
            let (s, z) = (q.scale[c], q.zero_point.get(c).copied().unwrap_or(0) as f32);
            let start = (o * channels + c) * inner;
            for v in &mut data[start..start + inner] {
                *v = s * (*v - z);
            }
        }
    }
    Ok(t)
}
