//! `quantize` gives each processor of a branched model the precision its
//! device runs: activation ranges calibrated on real images
//! ([`calibrate`]), quantization parameters in onnxruntime's convention
//! ([`params`]), batch normalisations folded into convolutions first
//! ([`fold_bn`]), and int8 nodes written as QuantizeLinear/DequantizeLinear
//! pairs with int8 weights ([`qdq`]) through graph-ir patches, so a
//! quantized file is still an annotated graph the runtime partitions as
//! the fp32 one.

pub mod calibrate;
mod error;
pub mod fold_bn;
pub mod fp16;
pub mod params;
mod precision_engine;
mod precision_map;
pub mod qat;
pub mod qdq;
pub mod shared_params;

pub use calibrate::{Collector, Method};
pub use error::QuantizeError;
pub use fp16::{Fp16Report, to_fp16};
pub use precision_engine::PrecisionEngine;
pub use precision_map::PrecisionMap;
pub use qat::{QatPlan, qat_plan, unfold_plan};
pub use qdq::{QUANTIZED_KEY, QdqReport, activations_to_calibrate, insert_qdq, int8_weight_axis, kept_float};

use graph_ir::{Graph, Op};

/// Refuses a graph that already holds quantization nodes or int8 weights.
pub fn check_not_quantized(g: &Graph) -> Result<(), QuantizeError> {
    if let Some(v) = g.metadata.get(QUANTIZED_KEY) {
        return Err(QuantizeError::AlreadyQuantized {
            what: format!("metadata {QUANTIZED_KEY} = {v}"),
        });
    }
    for id in g.node_ids() {
        let n = g.node(id);
        if matches!(n.op, Op::QuantizeLinear(_) | Op::DequantizeLinear(_)) {
            return Err(QuantizeError::AlreadyQuantized {
                what: format!("node `{}` is a {}", n.name, n.op.name()),
            });
        }
    }
    Ok(())
}
