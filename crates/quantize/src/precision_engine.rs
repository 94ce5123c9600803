//! An engine at int8 or fp16 (`stretch profile --precision`): each model
//! it compiles is rewritten as `stretch quantize` rewrites a model's nodes
//! on a processor of that precision, then compiled by the wrapped engine.

use crate::PrecisionMap;
use engine::{Compiled, Engine, EngineError};
use predictor::Precision;

/// The processor name every kernel node is assigned to while rewriting.
const KERNEL: &str = "kernel";

/// An engine whose models are rewritten to `precision` before it compiles
/// them. int8: batch norms folded, activation ranges calibrated (minmax)
/// on one run of uniform `[-1, 1)` inputs, the distribution the profiler
/// times kernels on, then Q/DQ pairs and int8 weights; fp16: half
/// constants and Casts at the graph's edges. Its [`Engine::name`] is the
/// wrapped engine's with `/int8` or `/fp16` appended, which is what the
/// CSV's `engine` column, resuming and `stretch fit` tell precisions by.
pub struct PrecisionEngine<'a> {
    inner: &'a dyn Engine,
    precision: Precision,
    name: &'static str,
}

impl<'a> PrecisionEngine<'a> {
    /// `inner` running kernels at `precision`: int8 or fp16; `None` for
    /// fp32, which needs no rewrite.
    pub fn new(inner: &'a dyn Engine, precision: Precision) -> Option<PrecisionEngine<'a>> {
        if precision == Precision::Fp32 {
            return None;
        }
        let name: &'static str = Box::leak(format!("{}/{precision}", inner.name()).into_boxed_str());
        Some(PrecisionEngine { inner, precision, name })
    }

    fn rewrite(&self, onnx: &[u8]) -> Result<Vec<u8>, String> {
        let options = graph_ir::onnx::ImportOptions::default();
        let mut g =
            graph_ir::onnx::import_bytes(onnx.to_vec().into(), "kernel", &options).map_err(|e| e.to_string())?;
        for id in g.node_ids() {
            g.annotate(id, graph_ir::keys::PROCESSOR, KERNEL);
        }
        let map = PrecisionMap::new([(KERNEL.to_string(), self.precision)].into(), None);
        let out = match self.precision {
            Precision::Int8 => {
                let (folded, _) = crate::fold_bn::fold_batch_norms(&g).map_err(|e| e.to_string())?;
                let acts = crate::activations_to_calibrate(&folded, &map).map_err(|e| e.to_string())?;
                let inputs = folded.uniform_inputs(0);
                let mut ranges = vec![(0.0f32, 0.0f32); acts.len()];
                scheduler_rt::probe::probe_once(&folded, &acts, &inputs, |k, v| {
                    ranges[k] = v.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), x| {
                        (lo.min(*x), hi.max(*x))
                    });
                })
                .map_err(|e| e.to_string())?;
                crate::insert_qdq(&folded, &map, &ranges).map_err(|e| e.to_string())?.0
            }
            Precision::Fp16 => crate::to_fp16(&g, &map).map_err(|e| e.to_string())?.0,
            Precision::Fp32 => g,
        };
        graph_ir::onnx::export_bytes(&out).map_err(|e| e.to_string())
    }
}

impl Engine for PrecisionEngine<'_> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn version(&self) -> &'static str {
        self.inner.version()
    }

    fn threads(&self) -> usize {
        self.inner.threads()
    }

    fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Compiled>, EngineError> {
        let rewritten = self.rewrite(onnx).map_err(|reason| EngineError::Load {
            engine: self.name,
            reason: format!("rewriting the kernel to {}: {reason}", self.precision),
        })?;
        self.inner.compile(&rewritten)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::TractEngine;
    use graph_ir::builder::{Builder, ConvSpec};
    use graph_ir::{DType, Op};

    fn kernel() -> Vec<u8> {
        let mut b = Builder::new("k");
        let x = b.input("x", &[1, 8, 6, 6]).unwrap();
        let y = b.conv("conv", x, ConvSpec::new(8, 3, 1)).unwrap();
        let y = b.batch_norm("bn", y).unwrap();
        let y = b.relu("relu", y).unwrap();
        let mut g = b.finish("y", y).unwrap();
        g.fill_missing_weights(2);
        graph_ir::onnx::export_bytes(&g).unwrap()
    }

    fn ops(onnx: &[u8]) -> (Vec<String>, Vec<DType>) {
        let g = graph_ir::onnx::import_bytes(onnx.to_vec().into(), "k", &Default::default()).unwrap();
        let ids = g.node_ids();
        let names = ids.iter().map(|id| g.node(*id).op.name().to_string()).collect();
        let consts = ids
            .iter()
            .filter_map(|id| match &g.node(*id).op {
                Op::Const(_) => Some(g.node(*id).outputs[0].dtype),
                _ => None,
            })
            .collect();
        (names, consts)
    }

    #[test]
    fn kernels_are_rewritten_to_the_precision_and_named_after_it() {
        let tract = TractEngine::new(1).unwrap();
        let int8 = PrecisionEngine::new(&tract, Precision::Int8).unwrap();
        assert_eq!(int8.name(), "tract/int8");
        let (names, consts) = ops(&int8.rewrite(&kernel()).unwrap());
        assert!(!names.iter().any(|n| n == "BatchNormalization"), "{names:?}");
        assert_eq!(names.iter().filter(|n| *n == "QuantizeLinear").count(), 2, "{names:?}");
        assert!(consts.contains(&DType::I8), "{consts:?}");
        let inputs = graph_ir::onnx::import_bytes(kernel().into(), "k", &Default::default())
            .unwrap()
            .uniform_inputs(0);
        let run = predictor::profiler::timing::Bound::new(&int8, &kernel(), &inputs).unwrap();
        run.run().unwrap();

        let fp16 = PrecisionEngine::new(&tract, Precision::Fp16).unwrap();
        assert_eq!(fp16.name(), "tract/fp16");
        let (names, consts) = ops(&fp16.rewrite(&kernel()).unwrap());
        assert_eq!(names.iter().filter(|n| *n == "Cast").count(), 2, "{names:?}");
        assert!(consts.iter().all(|d| *d == DType::F16), "{consts:?}");
        assert!(PrecisionEngine::new(&tract, Precision::Fp32).is_none());
    }
}
