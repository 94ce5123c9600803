//! Lowering of ONNX `MatMul`.

use super::ImportError;
use super::node_ctx::{Lowered, NodeCtx, Src, Step};
use crate::graph::{Graph, Outlet};
use crate::ops::*;

/// MatMul; of two vectors (`[K]·[K]`, which engines such as tract do not
/// compile) it is a row times a column, `[1,K]·[K,1]`, reshaped to the
/// scalar ONNX defines.
pub(super) fn matmul(ctx: &NodeCtx, g: &Graph) -> Result<Lowered, ImportError> {
    let inputs = ctx.data_inputs(2)?;
    let vector = |o: Outlet| g.fact(o).is_some_and(|f| f.rank() == 1);
    if !(vector(inputs[0]) && vector(inputs[1])) {
        return Ok(Lowered::Op(Op::MatMul(MatMul), inputs));
    }
    let reshape = |shape: Vec<i64>| {
        Op::Reshape(Reshape {
            shape,
            allowzero: false,
        })
    };
    Ok(Lowered::Chain(vec![
        Step {
            suffix: "row",
            op: reshape(vec![1, -1]),
            inputs: vec![Src::Value(inputs[0])],
        },
        Step {
            suffix: "column",
            op: reshape(vec![-1, 1]),
            inputs: vec![Src::Value(inputs[1])],
        },
        Step {
            suffix: "product",
            op: Op::MatMul(MatMul),
            inputs: vec![Src::Step(0), Src::Step(1)],
        },
        Step {
            suffix: "scalar",
            op: reshape(vec![]),
            inputs: vec![Src::Step(2)],
        },
    ]))
}
