//! A kernel configuration as a tiny graph: built with the IR builder, split
//! into kernels by the default fusion rules (so its features are exactly the
//! ones prediction computes), filled with random weights and exported to ONNX.

use super::error::ProfilerError;
use super::space::{KernelConfig, KernelKind};
use crate::features::{Work, features, work};
use crate::kernels::{OpClass, default_rules, detect};
use graph_ir::builder::{Builder, ConvSpec};
use graph_ir::ops::{Concat, Gemm, GlobalAveragePool, Op};
use graph_ir::{Fact, Graph, GraphError, Outlet, Tensor};

/// A configuration's graph (weights without data) with its features and work.
#[derive(Debug)]
pub struct KernelGraph {
    pub config: KernelConfig,
    pub graph: Graph,
    /// Named by [`crate::features::feature_names`] of `config.kind.op_class()`.
    pub features: Vec<f64>,
    pub work: Work,
}

impl KernelGraph {
    /// Builds the graph of `config` and checks that the default fusion rules
    /// see it as one kernel of `config.kind`.
    pub fn build(config: &KernelConfig) -> Result<KernelGraph, ProfilerError> {
        let name = config.to_string();
        let build = |source| ProfilerError::Build {
            kernel: name.clone(),
            error: Box::new(source),
        };
        let graph = graph_of(config).map_err(build)?;
        let order = graph.topo_order().map_err(build)?;
        let kernels = detect(&graph, &order, &default_rules());
        let chains: Vec<String> = kernels
            .iter()
            .map(|k| {
                k.nodes
                    .iter()
                    .map(|n| OpClass::of(&graph, *n).map_or("?", OpClass::name))
                    .collect::<Vec<_>>()
                    .join("+")
            })
            .collect();
        let [kernel] = kernels.as_slice() else {
            return Err(detection(name, chains, config.kind));
        };
        if chains[0] != config.kind.name() {
            return Err(detection(name, chains, config.kind));
        }
        Ok(KernelGraph {
            features: features(&graph, kernel),
            work: work(&graph, kernel),
            config: config.clone(),
            graph,
        })
    }

    /// The model as ONNX bytes, weights drawn from `seed`.
    pub fn onnx(&self, seed: u64) -> Result<Vec<u8>, ProfilerError> {
        let mut g = self.graph.clone();
        g.fill_missing_weights(seed);
        graph_ir::onnx::export_bytes(&g).map_err(|source| ProfilerError::Export {
            kernel: self.config.to_string(),
            error: Box::new(source),
        })
    }

    /// Values for the graph's inputs, uniform in `[-1, 1)` from `seed`.
    pub fn inputs(&self, seed: u64) -> Vec<Tensor> {
        self.graph.uniform_inputs(seed)
    }
}

fn detection(kernel: String, chains: Vec<String>, kind: KernelKind) -> ProfilerError {
    ProfilerError::Detection {
        kernel,
        found: chains.join(", "),
        expected: kind.name().to_string(),
    }
}

fn weight(b: &mut Builder, name: &str, shape: Vec<usize>) -> Result<Outlet, GraphError> {
    b.graph.add_const(name, Tensor::without_data(Fact::f32(shape)))
}

fn graph_of(c: &KernelConfig) -> Result<Graph, GraphError> {
    let mut b = Builder::new(&c.to_string());
    let map = [1, c.cin, c.h, c.h];
    let y = match c.kind {
        KernelKind::ConvBnRelu => {
            let x = b.input("x", &map)?;
            b.conv_bn("conv", x, ConvSpec::new(c.cout, c.k, c.s), true)?
        }
        KernelKind::DwConvBnRelu => {
            let x = b.input("x", &map)?;
            b.conv_bn("dwconv", x, ConvSpec::new(c.cin, c.k, c.s).group(c.cin), true)?
        }
        KernelKind::Fc => {
            let x = b.input("x", &[1, c.cin])?;
            let w = weight(&mut b, "fc.weight", vec![c.cout, c.cin])?;
            let bias = weight(&mut b, "fc.bias", vec![c.cout])?;
            let gemm = Op::Gemm(Gemm {
                trans_b: true,
                ..Gemm::default()
            });
            b.graph.add_node("fc", gemm, &[x, w, bias])?.out(0)
        }
        KernelKind::Pool => {
            let x = b.input("x", &map)?;
            b.max_pool("pool", x, c.k, c.s)?
        }
        KernelKind::Gap => {
            let x = b.input("x", &map)?;
            b.graph
                .add_node("gap", Op::GlobalAveragePool(GlobalAveragePool), &[x])?
                .out(0)
        }
        KernelKind::AddRelu => {
            let x1 = b.input("x1", &map)?;
            let x2 = b.input("x2", &map)?;
            let s = b.add("add", x1, x2)?;
            b.relu("relu", s)?
        }
        KernelKind::BnRelu => {
            let x = b.input("x", &map)?;
            let y = b.batch_norm("bn", x)?;
            b.relu("relu", y)?
        }
        KernelKind::Act => {
            let x = b.input("x", &map)?;
            b.relu("relu", x)?
        }
        KernelKind::Concat => {
            let xs = c
                .parts
                .iter()
                .enumerate()
                .map(|(i, &p)| b.input(&format!("x{i}"), &[1, p, c.h, c.h]))
                .collect::<Result<Vec<_>, _>>()?;
            b.graph.add_node("concat", Op::Concat(Concat { axis: 1 }), &xs)?.out(0)
        }
    };
    b.finish("y", y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::feature_names;
    use crate::forest::SplitMix64;
    use crate::profiler::space::{cnn, random};

    #[test]
    fn every_kind_is_one_kernel_whose_features_give_back_its_config() {
        let mut rng = SplitMix64::new(3);
        for kind in KernelKind::ALL {
            for c in [cnn(kind, &mut rng), random(kind, &mut rng)] {
                let kg = KernelGraph::build(&c).unwrap();
                assert_eq!(kg.features.len(), feature_names(kind.op_class()).len(), "{c}");
                assert_eq!(KernelConfig::from_features(kind, &kg.features).as_ref(), Some(&c));
                assert!(kg.work.bytes > 0, "{c}");
            }
        }
    }

    #[test]
    fn exports_onnx_with_weights_and_matching_inputs() {
        let c = KernelConfig {
            kind: KernelKind::AddRelu,
            h: 4,
            cin: 3,
            cout: 3,
            k: 1,
            s: 1,
            parts: vec![],
        };
        let kg = KernelGraph::build(&c).unwrap();
        assert!(!kg.onnx(1).unwrap().is_empty());
        let inputs = kg.inputs(1);
        assert_eq!(inputs.len(), 2);
        assert_eq!(inputs[1].shape(), [1, 3, 4, 4]);
        let v = inputs[0].to_f32_vec().unwrap();
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
    }
}
