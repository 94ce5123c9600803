//! Pools and reductions: MAX_POOL_2D, AVERAGE_POOL_2D, and MEAN, SUM or
//! REDUCE_MAX over mapped axes (global pools reduce H and W of an NHWC
//! tensor, keeping them).

use super::conv::{Padding, pad_hw, padding};
use super::quant::{finish, operand, result};
use super::{Lower, nhwc_axis};
use crate::error::LiteRtError;
use crate::model::{Act, Elem, Options, Window};
use crate::schema::litert::BuiltinOperator as B;
use graph_ir::NodeId;
use graph_ir::ops::{Pool, PoolKind, Reduce, ReduceKind};

pub(crate) fn pool(l: &mut Lower, id: NodeId, p: &Pool) -> Result<(), LiteRtError> {
    let n = l.g.node(id).clone();
    if p.dilations != [1, 1] {
        return Err(l.refuse(id, "a dilated pool"));
    }
    let xs = l.fact(n.inputs[0]).shape.clone();
    let ys = n.outputs[0].shape.clone();
    let pad = padding([xs[2], xs[3]], p.kernel, p.strides, p.pads, [ys[2], ys[3]]);
    if let Padding::Explicit(pads) = pad {
        let count = |i: usize| (xs[i + 2] + pads[i] + pads[i + 2] - p.kernel[i]) / p.strides[i] + 1;
        if count(0) != ys[2] || count(1) != ys[3] {
            return Err(l.refuse(id, "a pool whose ceil mode adds a window LiteRT's padding cannot"));
        }
        if matches!(
            p.kind,
            PoolKind::Average {
                count_include_pad: false
            }
        ) {
            return Err(l.refuse(
                id,
                "an average pool that excludes padding LiteRT's SAME padding does not place",
            ));
        }
    }
    let (input, target) = operand(l, id, true)?;
    let (out, last) = result(l, id, input, &target, true)?;
    let act = target.as_ref().map(|t| t.act).unwrap_or(Act::None);
    let (input, same) = match pad {
        Padding::Valid => (input, false),
        Padding::Same => (input, true),
        Padding::Explicit(pads) => {
            let fill = match p.kind {
                PoolKind::Max => Some(lowest(l, input, &n.name)),
                PoolKind::Average { .. } => None,
            };
            (pad_hw(l, input, pads, fill, &n.name), false)
        }
    };
    let code = match p.kind {
        PoolKind::Max => B::MAX_POOL_2D,
        PoolKind::Average { .. } => B::AVERAGE_POOL_2D,
    };
    let options = Options::Window(Window::Pool {
        same,
        stride: p.strides,
        filter: p.kernel,
        act,
    });
    l.emit(code, &[input], &[out], options);
    finish(l, out, last);
    Ok(())
}

/// The lowest value of `t`'s type, as a scalar constant (a max pool's padding).
fn lowest(l: &mut Lower, t: i32, name: &str) -> i32 {
    let def = l.m.tensor(t).clone();
    let name = format!("{name}_lowest");
    match def.elem {
        Elem::I8 => l.m.constant(&name, Elem::I8, vec![], vec![0x80], def.quant.clone()),
        _ => l.m.const_f32(&name, vec![], &[f32::MIN]),
    }
}

/// GlobalAveragePool / GlobalMaxPool: `code` over H and W, kept.
pub(crate) fn global(l: &mut Lower, id: NodeId, code: B) -> Result<(), LiteRtError> {
    reduce_axes(l, id, code, &[1, 2], true)
}

pub(crate) fn reduce(l: &mut Lower, id: NodeId, r: &Reduce) -> Result<(), LiteRtError> {
    let x = l.g.node(id).inputs[0];
    let rank = l.fact(x).rank();
    let mut axes: Vec<usize> = if r.axes.is_empty() {
        (0..rank).collect()
    } else {
        r.axes
            .iter()
            .map(|a| if *a < 0 { *a + rank as i64 } else { *a } as usize)
            .collect()
    };
    if rank == 4 {
        if !r.keepdims {
            let kept: Vec<usize> = (0..4).filter(|a| !axes.contains(a)).collect();
            let mut in_file: Vec<usize> = kept.iter().map(|a| nhwc_axis(*a)).collect();
            in_file.sort();
            let order: Vec<usize> = in_file.iter().map(|p| super::TO_NHWC[*p]).collect();
            if order != kept {
                return Err(l.refuse(id, "a reduction that drops axes leaving C before H or W"));
            }
        }
        axes = axes.iter().map(|a| nhwc_axis(*a)).collect();
    }
    let code = match r.kind {
        ReduceKind::Mean => B::MEAN,
        ReduceKind::Sum => B::SUM,
    };
    reduce_axes(l, id, code, &axes, r.keepdims)
}

fn reduce_axes(l: &mut Lower, id: NodeId, code: B, axes: &[usize], keep: bool) -> Result<(), LiteRtError> {
    let name = l.g.node(id).name.clone();
    let (input, target) = operand(l, id, false)?;
    let same_params = code == B::REDUCE_MAX;
    let (out, last) = result(l, id, input, &target, same_params)?;
    let a: Vec<i32> = axes.iter().map(|a| *a as i32).collect();
    let at = l.m.const_i32(&format!("{name}_axes"), vec![a.len()], &a, None);
    l.emit(code, &[input, at], &[out], Options::Reducer { keep_dims: keep });
    finish(l, out, last);
    Ok(())
}
