//! Import-time evaluation of constant subgraphs: `Constant`, `Shape` of a
//! static value, and shape arithmetic (`Gather`, `Unsqueeze`, `Squeeze`,
//! `Cast`, `ConstantOfShape`, `Concat`, `Reshape`, `Slice`, `Expand`,
//! `Tile`, `Add`/`Sub`/`Mul`/`Div`) whose inputs are all constants.

use super::ImportError;
use super::node_ctx::{MAX_SHAPE_OPERAND_LEN, NodeCtx};
use super::tensor_proto::tensor_from_proto;
use crate::graph::Graph;
use crate::ops::{binary::broadcast, layout::reshape_target, resolve_axis, slice::slice_len};
use crate::tensor::{DType, Fact, Tensor};
use bytes::Bytes;

/// The memory all folded results of one import may take while they are
/// computed (values are widened to 8 bytes each): twice the file's size,
/// at least [`FOLD_BUDGET_FLOOR`] and at most [`FOLD_BUDGET_CEILING`].
/// Real weights built at import time fit (the model zoo's VGG-19 builds
/// all 143,667,240 of its weights with `ConstantOfShape`: 1.07 GiB
/// widened, from a 9 KB file); a hostile file asking for more, in one fold
/// or in many, is refused before anything is allocated.
pub fn fold_budget(file_bytes: usize) -> usize {
    file_bytes
        .saturating_mul(2)
        .clamp(FOLD_BUDGET_FLOOR, FOLD_BUDGET_CEILING)
}

/// The smallest fold budget of an import: 2 GiB.
pub const FOLD_BUDGET_FLOOR: usize = 2 << 30;

/// The largest fold budget of an import, whatever the file's size: 16 GiB.
pub const FOLD_BUDGET_CEILING: usize = 16 << 30;

#[derive(Clone, Debug)]
enum Data {
    I(Vec<i64>),
    F(Vec<f64>),
}

/// A constant being computed: dtype, shape and widened values.
#[derive(Clone, Debug)]
struct Val {
    dtype: DType,
    shape: Vec<usize>,
    data: Data,
}

impl Val {
    fn from_tensor(t: &Tensor) -> Option<Val> {
        let data = if t.dtype().is_float() {
            Data::F(t.to_f64_vec()?)
        } else {
            Data::I(t.to_i64_vec()?)
        };
        Some(Val {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            data,
        })
    }

    fn ints(&self) -> Vec<i64> {
        match &self.data {
            Data::I(v) => v.clone(),
            Data::F(v) => v.iter().map(|x| *x as i64).collect(),
        }
    }

    fn floats(&self) -> Vec<f64> {
        match &self.data {
            Data::I(v) => v.iter().map(|x| *x as f64).collect(),
            Data::F(v) => v.clone(),
        }
    }

    /// Picks elements by flat index.
    fn gather_flat(&self, idx: &[usize]) -> Data {
        match &self.data {
            Data::I(v) => Data::I(idx.iter().map(|&i| v[i]).collect()),
            Data::F(v) => Data::F(idx.iter().map(|&i| v[i]).collect()),
        }
    }

    fn into_tensor(self) -> Tensor {
        let bytes: Vec<u8> = match self.dtype {
            DType::F32 => self.floats().iter().flat_map(|v| (*v as f32).to_le_bytes()).collect(),
            DType::F64 => self.floats().iter().flat_map(|v| v.to_le_bytes()).collect(),
            DType::I64 => self.ints().iter().flat_map(|v| v.to_le_bytes()).collect(),
            DType::I32 => self.ints().iter().flat_map(|v| (*v as i32).to_le_bytes()).collect(),
            DType::F16 => self
                .floats()
                .iter()
                .flat_map(|v| f32_to_f16_bits(*v as f32).to_le_bytes())
                .collect(),
            DType::I8 | DType::U8 | DType::Bool => self.ints().iter().map(|v| *v as u8).collect(),
        };
        Tensor::from_bytes(Fact::new(self.dtype, self.shape), Bytes::from(bytes)).expect("values match shape")
    }
}

/// Nearest-even f16 bits of an f32 (finite values; overflow saturates to infinity).
fn f32_to_f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    let man = b & 0x7f_ffff;
    if exp >= 31 {
        sign | 0x7c00
    } else if exp <= 0 {
        sign
    } else {
        sign | ((exp as u16) << 10) | ((man + 0x1000) >> 13) as u16
    }
}

/// The element count of a folded result of this shape, taken from the
/// import's fold budget; refused when the budget cannot hold it.
fn folded_len(ctx: &NodeCtx, shape: &[usize]) -> Result<usize, ImportError> {
    let left = ctx.fold_budget.get();
    let n = shape.iter().try_fold(1usize, |p, &d| p.checked_mul(d));
    match n.and_then(|n| n.checked_mul(8).map(|b| (n, b))) {
        Some((n, bytes)) if bytes <= left => {
            ctx.fold_budget.set(left - bytes);
            Ok(n)
        }
        _ => Err(ctx.err(format!(
            "the constant result {shape:?} needs {} while folding, more than the {} MiB left of this import's \
             folding budget (twice the file's size, at least {} GiB, at most {} GiB); too large to fold",
            n.map_or("more than 2^64 bytes".into(), |n| format!(
                "{} MiB",
                (n as u128 * 8) >> 20
            )),
            left >> 20,
            FOLD_BUDGET_FLOOR >> 30,
            FOLD_BUDGET_CEILING >> 30
        ))),
    }
}

fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Evaluates the node if it is constant and foldable. `Ok(None)` leaves it to
/// the op lowering (or to the unsupported-operator error).
pub(super) fn try_fold(ctx: &NodeCtx, g: &Graph) -> Result<Option<Vec<Tensor>>, ImportError> {
    let op_type = ctx.proto.op_type.as_str();
    if op_type == "Constant" {
        return constant(ctx).map(|t| Some(vec![t]));
    }
    if op_type == "Shape" {
        return shape(ctx, g).map(|t| Some(vec![t]));
    }
    if !super::FOLDED_OPS.contains(&op_type) {
        return Ok(None);
    }
    let Some(vals) = const_inputs(ctx, g) else {
        return Ok(None);
    };
    let arg = |i: usize| -> Result<&Val, ImportError> {
        vals.get(i)
            .and_then(|v| v.as_ref())
            .ok_or_else(|| ctx.err(format!("missing input {i}")))
    };
    let a = ctx.attrs();
    let out = match op_type {
        "Gather" => gather(ctx, arg(0)?, arg(1)?, a.int("axis", 0)?)?,
        "Unsqueeze" | "Squeeze" => {
            let x = arg(0)?;
            let axes = if ctx.opset < 13 {
                a.ints("axes")?
            } else {
                vals.get(1).cloned().flatten().map(|v| v.ints())
            };
            squeeze(ctx, x, axes, op_type == "Unsqueeze")?
        }
        "Cast" => cast(ctx, arg(0)?)?,
        "ConstantOfShape" => return constant_of_shape(ctx, arg(0)?).map(|t| Some(vec![t])),
        "Concat" => {
            let parts: Vec<&Val> = (0..vals.len()).map(arg).collect::<Result<_, _>>()?;
            concat(ctx, &parts, a.int("axis", 0)?)?
        }
        "Reshape" => {
            let x = arg(0)?.clone();
            let target = arg(1)?.ints();
            if target.len() > MAX_SHAPE_OPERAND_LEN {
                return Err(ctx.err(format!("target shape has {} dimensions", target.len())));
            }
            let shape = reshape_target(&x.shape, &target, a.int("allowzero", 0)? != 0).map_err(|e| ctx.err(e))?;
            Val { shape, ..x }
        }
        "Slice" => {
            let ints = |i: usize| vals.get(i).cloned().flatten().map(|v| v.ints());
            let (starts, ends, axes, steps) = if ctx.opset < 10 {
                (a.ints("starts")?, a.ints("ends")?, a.ints("axes")?, None)
            } else {
                (ints(1), ints(2), ints(3), ints(4))
            };
            let starts = starts.ok_or_else(|| ctx.err("starts are required"))?;
            let ends = ends.ok_or_else(|| ctx.err("ends are required"))?;
            slice(ctx, arg(0)?, &starts, &ends, axes, steps)?
        }
        "Expand" => expand(ctx, arg(0)?, &arg(1)?.ints())?,
        "Tile" => tile(ctx, arg(0)?, &arg(1)?.ints())?,
        _ => arithmetic(ctx, op_type, arg(0)?, arg(1)?)?,
    };
    Ok(Some(vec![out.into_tensor()]))
}

/// The node's inputs as values (`None` for an absent optional input);
/// `None` when one is not a foldable constant.
fn const_inputs(ctx: &NodeCtx, g: &Graph) -> Option<Vec<Option<Val>>> {
    let mut vals = Vec::new();
    for o in &ctx.inputs {
        let Some(o) = o else {
            vals.push(None);
            continue;
        };
        vals.push(Some(g.const_tensor(*o).and_then(Val::from_tensor)?));
    }
    Some(vals)
}

/// `Shape` of a value whose shape is known: its dimensions from `start`
/// to `end`.
fn shape(ctx: &NodeCtx, g: &Graph) -> Result<Tensor, ImportError> {
    let f = g.fact(ctx.input(0)?).ok_or_else(|| ctx.err("input has no fact"))?;
    let a = ctx.attrs();
    let r = f.rank() as i64;
    let clamp = |v: i64| if v < 0 { (v + r).max(0) } else { v.min(r) } as usize;
    let (s, e) = (clamp(a.int("start", 0)?), clamp(a.int("end", r)?));
    let dims: Vec<i64> = f.shape[s..e.max(s)].iter().map(|&d| d as i64).collect();
    Ok(Tensor::from_i64([dims.len()], &dims))
}

/// `Cast` of a constant to the `to` type.
fn cast(ctx: &NodeCtx, x: &Val) -> Result<Val, ImportError> {
    let a = ctx.attrs();
    let to = a.int("to", 1)?;
    let dtype = DType::from_onnx(to as i32).ok_or_else(|| a.err("to", format!("type {to} is not supported")))?;
    let x = x.clone();
    let data = if dtype.is_float() {
        Data::F(x.floats())
    } else {
        Data::I(x.ints())
    };
    Ok(Val { dtype, data, ..x })
}

/// `ConstantOfShape`: the one-element `value` repeated to `shape`, within
/// the import's fold budget.
fn constant_of_shape(ctx: &NodeCtx, shape: &Val) -> Result<Tensor, ImportError> {
    let a = ctx.attrs();
    let shape: Vec<usize> = shape.ints().iter().map(|&d| d.max(0) as usize).collect();
    let fill = match a.tensor("value")? {
        Some(t) => tensor_from_proto(t)?,
        None => Tensor::from_f32([1], &[0.0]),
    };
    let Some(one) = fill.raw().filter(|_| fill.volume() == 1) else {
        return Err(a.err("value", "must hold exactly one element with data"));
    };
    let n = folded_len(ctx, &shape)?;
    let bytes = Bytes::from(one.repeat(n));
    Tensor::from_bytes(Fact::new(fill.dtype(), shape), bytes)
        .map_err(|e| ctx.err(format!("cannot build the constant: {e}")))
}

fn constant(ctx: &NodeCtx) -> Result<Tensor, ImportError> {
    let a = ctx.attrs();
    if let Some(t) = a.tensor("value")? {
        return tensor_from_proto(t);
    }
    if a.has("value_float") {
        return Ok(Tensor::from_f32([], &[a.float("value_float", 0.0)?]));
    }
    if let Some(v) = a.floats("value_floats")? {
        return Ok(Tensor::from_f32([v.len()], &v));
    }
    if a.has("value_int") {
        return Ok(Tensor::from_i64([], &[a.int("value_int", 0)?]));
    }
    if let Some(v) = a.ints("value_ints")? {
        return Ok(Tensor::from_i64([v.len()], &v));
    }
    Err(ctx.err("Constant without a supported value attribute (value, value_float(s), value_int(s))"))
}

fn gather(ctx: &NodeCtx, data: &Val, indices: &Val, axis: i64) -> Result<Val, ImportError> {
    if data.shape.is_empty() {
        return Err(ctx.err("data must have rank 1 or more"));
    }
    let axis = resolve_axis(axis, data.shape.len()).map_err(|e| ctx.err(e))?;
    let dim = data.shape[axis] as i64;
    let idx: Vec<usize> = indices
        .ints()
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + dim } else { i };
            usize::try_from(j)
                .ok()
                .filter(|&j| (j as i64) < dim)
                .ok_or_else(|| ctx.err(format!("index {i} out of range {dim}")))
        })
        .collect::<Result<_, _>>()?;
    let mut shape = data.shape[..axis].to_vec();
    shape.extend(&indices.shape);
    shape.extend(&data.shape[axis + 1..]);
    let outer: usize = data.shape[..axis].iter().product();
    let inner: usize = data.shape[axis + 1..].iter().product();
    let mut flat = Vec::with_capacity(folded_len(ctx, &shape)?);
    for o in 0..outer {
        for &i in &idx {
            flat.extend((0..inner).map(|k| (o * data.shape[axis] + i) * inner + k));
        }
    }
    Ok(Val {
        dtype: data.dtype,
        shape,
        data: data.gather_flat(&flat),
    })
}

fn squeeze(ctx: &NodeCtx, x: &Val, axes: Option<Vec<i64>>, unsqueeze: bool) -> Result<Val, ImportError> {
    let mut shape = x.shape.clone();
    if unsqueeze {
        let axes = axes.ok_or_else(|| ctx.err("axes are required"))?;
        let rank = shape.len() + axes.len();
        let mut resolved: Vec<usize> = axes
            .iter()
            .map(|&a| resolve_axis(a, rank))
            .collect::<Result<_, _>>()
            .map_err(|e| ctx.err(e))?;
        resolved.sort_unstable();
        if resolved.windows(2).any(|w| w[0] == w[1]) {
            return Err(ctx.err(format!("axes {axes:?} name an axis twice")));
        }
        for a in resolved {
            shape.insert(a, 1);
        }
    } else {
        match axes {
            None => shape.retain(|&d| d != 1),
            Some(axes) => {
                let rank = shape.len();
                let resolved: Vec<usize> = axes
                    .iter()
                    .map(|&a| resolve_axis(a, rank))
                    .collect::<Result<_, _>>()
                    .map_err(|e| ctx.err(e))?;
                if let Some(&a) = resolved.iter().find(|&&a| shape[a] != 1) {
                    return Err(ctx.err(format!("cannot squeeze axis {a} of size {}", shape[a])));
                }
                shape = shape
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !resolved.contains(i))
                    .map(|(_, d)| *d)
                    .collect();
            }
        }
    }
    Ok(Val { shape, ..x.clone() })
}

fn slice(
    ctx: &NodeCtx,
    x: &Val,
    starts: &[i64],
    ends: &[i64],
    axes: Option<Vec<i64>>,
    steps: Option<Vec<i64>>,
) -> Result<Val, ImportError> {
    let n = starts.len();
    let rank = x.shape.len();
    if rank == 0 {
        return Err(ctx.err("cannot slice a scalar"));
    }
    let axes = axes.unwrap_or_else(|| (0..n as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; n]);
    if ends.len() != n || axes.len() != n || steps.len() != n {
        return Err(ctx.err("starts, ends, axes and steps must have the same length"));
    }
    let mut first = vec![0i64; rank];
    let mut step = vec![1i64; rank];
    let mut shape = x.shape.clone();
    for i in 0..n {
        let ax = resolve_axis(axes[i], rank).map_err(|e| ctx.err(e))?;
        if steps[i] == 0 {
            return Err(ctx.err(format!("step on axis {ax} is 0")));
        }
        let d = x.shape[ax] as i64;
        let s = if starts[i] < 0 {
            starts[i].saturating_add(d)
        } else {
            starts[i]
        };
        first[ax] = if steps[i] > 0 {
            s.clamp(0, d)
        } else {
            s.clamp(0, (d - 1).max(0))
        };
        step[ax] = steps[i];
        shape[ax] = slice_len(x.shape[ax], starts[i], ends[i], steps[i]);
    }
    let in_strides = strides_of(&x.shape);
    let out_strides = strides_of(&shape);
    let idx: Vec<usize> = (0..shape.iter().product())
        .map(|flat: usize| {
            (0..rank)
                .map(|d| {
                    let k = (flat / out_strides[d] % shape[d]) as i64;
                    (first[d] + k * step[d]) as usize * in_strides[d]
                })
                .sum()
        })
        .collect();
    Ok(Val {
        dtype: x.dtype,
        data: x.gather_flat(&idx),
        shape,
    })
}

fn concat(ctx: &NodeCtx, parts: &[&Val], axis: i64) -> Result<Val, ImportError> {
    let first = parts.first().ok_or_else(|| ctx.err("no inputs"))?;
    if first.shape.is_empty() {
        return Err(ctx.err("inputs must have rank 1 or more"));
    }
    let axis = resolve_axis(axis, first.shape.len()).map_err(|e| ctx.err(e))?;
    let fits = |p: &Val| {
        p.shape.len() == first.shape.len()
            && p.shape
                .iter()
                .zip(&first.shape)
                .enumerate()
                .all(|(d, (a, b))| d == axis || a == b)
    };
    if let Some(i) = parts.iter().position(|p| !fits(p)) {
        return Err(ctx.err(format!(
            "input {i} has shape {:?}, which does not concatenate with {:?} on axis {axis}",
            parts[i].shape, first.shape
        )));
    }
    let outer: usize = first.shape[..axis].iter().product();
    let mut shape = first.shape.clone();
    shape[axis] = parts.iter().map(|p| p.shape[axis]).sum();
    let float = parts.iter().any(|p| matches!(p.data, Data::F(_)));
    let (mut fi, mut ii) = (Vec::new(), Vec::new());
    for o in 0..outer {
        for p in parts {
            let chunk: usize = p.shape[axis..].iter().product();
            let range = o * chunk..(o + 1) * chunk;
            if float {
                fi.extend_from_slice(&p.floats()[range]);
            } else {
                ii.extend_from_slice(&p.ints()[range]);
            }
        }
    }
    let data = if float { Data::F(fi) } else { Data::I(ii) };
    Ok(Val {
        dtype: first.dtype,
        shape,
        data,
    })
}

/// For every element of a value of shape `out`, the flat index of the
/// element of `x` it reads: `x` broadcast to `out` (aligned at the last
/// axis; size-1 axes repeat), or, with `tile`, laid end to end (`out[d]` a
/// multiple of `x[d]`).
fn source_index(x: &[usize], out: &[usize], n: usize, tile: bool) -> Vec<usize> {
    let out_strides = strides_of(out);
    let in_strides = strides_of(x);
    let off = out.len() - x.len();
    (0..n)
        .map(|flat| {
            (0..x.len())
                .map(|d| {
                    let i = (flat / out_strides[d + off]) % out[d + off];
                    if tile {
                        i % x[d] * in_strides[d]
                    } else if x[d] == 1 {
                        0
                    } else {
                        i * in_strides[d]
                    }
                })
                .sum()
        })
        .collect()
}

/// `Expand`: `x` broadcast with the target shape (either side may be 1).
fn expand(ctx: &NodeCtx, x: &Val, target: &[i64]) -> Result<Val, ImportError> {
    if target.len() > MAX_SHAPE_OPERAND_LEN || target.iter().any(|&d| d < 0) {
        return Err(ctx.err(format!("target shape {target:?} is not a shape")));
    }
    let target: Vec<usize> = target.iter().map(|&d| d as usize).collect();
    let shape = broadcast(&x.shape, &target).map_err(|e| ctx.err(e))?;
    let n = folded_len(ctx, &shape)?;
    let data = x.gather_flat(&source_index(&x.shape, &shape, n, false));
    Ok(Val {
        shape,
        data,
        ..x.clone()
    })
}

/// `Tile`: `x` repeated `repeats[d]` times along each axis.
fn tile(ctx: &NodeCtx, x: &Val, repeats: &[i64]) -> Result<Val, ImportError> {
    if repeats.len() != x.shape.len() || repeats.iter().any(|&r| r < 0) {
        return Err(ctx.err(format!("repeats {repeats:?} do not fit a value of shape {:?}", x.shape)));
    }
    let shape = x
        .shape
        .iter()
        .zip(repeats)
        .map(|(&d, &r)| d.checked_mul(r as usize))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| ctx.err(format!("repeating {:?} by {repeats:?} overflows", x.shape)))?;
    let n = folded_len(ctx, &shape)?;
    let data = x.gather_flat(&source_index(&x.shape, &shape, n, true));
    Ok(Val {
        shape,
        data,
        ..x.clone()
    })
}

fn arithmetic(ctx: &NodeCtx, op: &str, a: &Val, b: &Val) -> Result<Val, ImportError> {
    let shape = broadcast(&a.shape, &b.shape).map_err(|e| ctx.err(e))?;
    let n = folded_len(ctx, &shape)?;
    let ia = source_index(&a.shape, &shape, n, false);
    let ib = source_index(&b.shape, &shape, n, false);
    let data = match (&a.data, &b.data) {
        (Data::I(x), Data::I(y)) => Data::I(
            (0..n)
                .map(|i| {
                    let (p, q) = (x[ia[i]], y[ib[i]]);
                    match op {
                        "Add" => Ok(p.wrapping_add(q)),
                        "Sub" => Ok(p.wrapping_sub(q)),
                        "Mul" => Ok(p.wrapping_mul(q)),
                        _ if q == 0 => Err(ctx.err("integer division by zero in a constant expression")),
                        _ => Ok(p.wrapping_div(q)),
                    }
                })
                .collect::<Result<_, _>>()?,
        ),
        _ => {
            let (x, y) = (a.floats(), b.floats());
            Data::F(
                (0..n)
                    .map(|i| {
                        let (p, q) = (x[ia[i]], y[ib[i]]);
                        match op {
                            "Add" => p + q,
                            "Sub" => p - q,
                            "Mul" => p * q,
                            _ => p / q,
                        }
                    })
                    .collect(),
            )
        }
    };
    Ok(Val {
        dtype: a.dtype,
        shape,
        data,
    })
}

#[cfg(test)]
#[path = "fold_tests.rs"]
mod tests;
