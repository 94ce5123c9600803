//! Building CNN graphs in code: layer helpers that create the weights they
//! need as constants without data (fill them with
//! [`Graph::fill_missing_weights`]) and name every node from a prefix.

use crate::error::GraphError;
use crate::graph::{Graph, Outlet};
use crate::ops::*;
use crate::tensor::{Fact, Tensor};

/// Layer helpers over a graph under construction.
pub struct Builder {
    pub graph: Graph,
}

/// A 2-D convolution's hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvSpec {
    pub out_channels: usize,
    pub kernel: usize,
    pub stride: usize,
    pub group: usize,
    pub bias: bool,
}

impl ConvSpec {
    /// A `kernel`x`kernel` convolution with "same" padding for odd kernels, no bias.
    pub fn new(out_channels: usize, kernel: usize, stride: usize) -> ConvSpec {
        ConvSpec {
            out_channels,
            kernel,
            stride,
            group: 1,
            bias: false,
        }
    }

    pub fn group(self, group: usize) -> ConvSpec {
        ConvSpec { group, ..self }
    }

    pub fn bias(self) -> ConvSpec {
        ConvSpec { bias: true, ..self }
    }
}

impl Builder {
    pub fn new(name: &str) -> Builder {
        Builder {
            graph: Graph::new(name),
        }
    }

    /// The graph built so far.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    fn channels(&self, x: Outlet) -> Result<usize, GraphError> {
        self.graph
            .fact(x)
            .and_then(|f| f.shape.get(1).copied())
            .ok_or_else(|| GraphError::Patch {
                reason: "builder input has no channel dimension".into(),
            })
    }

    fn weight(&mut self, name: String, shape: Vec<usize>) -> Result<Outlet, GraphError> {
        self.graph.add_const(name, Tensor::without_data(Fact::f32(shape)))
    }

    pub fn input(&mut self, name: &str, shape: &[usize]) -> Result<Outlet, GraphError> {
        self.graph.add_input(name, Fact::f32(shape))
    }

    pub fn conv(&mut self, name: &str, x: Outlet, spec: ConvSpec) -> Result<Outlet, GraphError> {
        let c = self.channels(x)?;
        let w = self.weight(
            format!("{name}.weight"),
            vec![spec.out_channels, c / spec.group.max(1), spec.kernel, spec.kernel],
        )?;
        let mut inputs = vec![x, w];
        if spec.bias {
            inputs.push(self.weight(format!("{name}.bias"), vec![spec.out_channels])?);
        }
        let p = spec.kernel / 2;
        let op = Op::Conv(Conv {
            strides: [spec.stride; 2],
            pads: [p; 4],
            dilations: [1, 1],
            group: spec.group,
        });
        Ok(self.graph.add_node(name, op, &inputs)?.out(0))
    }

    pub fn batch_norm(&mut self, name: &str, x: Outlet) -> Result<Outlet, GraphError> {
        let c = self.channels(x)?;
        let mut inputs = vec![x];
        for p in ["weight", "bias", "running_mean", "running_var"] {
            inputs.push(self.weight(format!("{name}.{p}"), vec![c])?);
        }
        Ok(self
            .graph
            .add_node(name, Op::BatchNorm(BatchNorm::default()), &inputs)?
            .out(0))
    }

    pub fn unary(&mut self, name: &str, x: Outlet, op: UnaryOp) -> Result<Outlet, GraphError> {
        Ok(self.graph.add_node(name, Op::Unary(Unary { op }), &[x])?.out(0))
    }

    pub fn relu(&mut self, name: &str, x: Outlet) -> Result<Outlet, GraphError> {
        self.unary(name, x, UnaryOp::Relu)
    }

    pub fn binary(&mut self, name: &str, a: Outlet, b: Outlet, op: BinaryOp) -> Result<Outlet, GraphError> {
        Ok(self.graph.add_node(name, Op::Binary(Binary { op }), &[a, b])?.out(0))
    }

    /// InstanceNormalization with a scale and a bias per channel.
    pub fn instance_norm(&mut self, name: &str, x: Outlet) -> Result<Outlet, GraphError> {
        let c = self.channels(x)?;
        let scale = self.weight(format!("{name}.scale"), vec![c])?;
        let bias = self.weight(format!("{name}.bias"), vec![c])?;
        let op = Op::InstanceNorm(InstanceNorm { epsilon: 1e-5 });
        Ok(self.graph.add_node(name, op, &[x, scale, bias])?.out(0))
    }

    /// A node of any operator on `inputs`; its first output.
    pub fn node(&mut self, name: &str, op: Op, inputs: &[Outlet]) -> Result<Outlet, GraphError> {
        Ok(self.graph.add_node(name, op, inputs)?.out(0))
    }

    /// A weight without data (filled by `--random-weights` or training).
    pub fn param(&mut self, name: &str, shape: &[usize]) -> Result<Outlet, GraphError> {
        self.weight(name.to_string(), shape.to_vec())
    }

    /// Softmax (or LogSoftmax when `log`) along `axis`.
    pub fn softmax(&mut self, name: &str, x: Outlet, axis: i64, log: bool) -> Result<Outlet, GraphError> {
        Ok(self
            .graph
            .add_node(name, Op::Softmax(Softmax { axis, log }), &[x])?
            .out(0))
    }

    pub fn add(&mut self, name: &str, a: Outlet, b: Outlet) -> Result<Outlet, GraphError> {
        self.binary(name, a, b, BinaryOp::Add)
    }

    /// Conv, BatchNorm and (optionally) ReLU, named `{name}`, `{name}.bn`, `{name}.relu`.
    pub fn conv_bn(&mut self, name: &str, x: Outlet, spec: ConvSpec, relu: bool) -> Result<Outlet, GraphError> {
        let y = self.conv(name, x, spec)?;
        let y = self.batch_norm(&format!("{name}.bn"), y)?;
        if relu {
            self.relu(&format!("{name}.relu"), y)
        } else {
            Ok(y)
        }
    }

    pub fn max_pool(&mut self, name: &str, x: Outlet, kernel: usize, stride: usize) -> Result<Outlet, GraphError> {
        let p = kernel / 2;
        let op = Op::Pool(Pool {
            kind: PoolKind::Max,
            kernel: [kernel; 2],
            strides: [stride; 2],
            pads: [p; 4],
            dilations: [1, 1],
            ceil_mode: false,
        });
        Ok(self.graph.add_node(name, op, &[x])?.out(0))
    }

    /// Global average pooling, flatten and a fully connected layer to `classes`.
    pub fn classifier(&mut self, name: &str, x: Outlet, classes: usize) -> Result<Outlet, GraphError> {
        let c = self.channels(x)?;
        let p = self
            .graph
            .add_node(format!("{name}.pool"), Op::GlobalAveragePool(GlobalAveragePool), &[x])?;
        let f = self
            .graph
            .add_node(format!("{name}.flatten"), Op::Flatten(Flatten { axis: 1 }), &[p.out(0)])?;
        debug_assert_eq!(self.channels(f.out(0)).ok(), Some(c));
        self.linear(&format!("{name}.fc"), f.out(0), classes)
    }

    /// A fully connected layer (Gemm with bias, weight `[outputs, inputs]`)
    /// from a `[N, inputs]` value, named `{name}` with `{name}.weight` and
    /// `{name}.bias`.
    pub fn linear(&mut self, name: &str, x: Outlet, outputs: usize) -> Result<Outlet, GraphError> {
        let inputs = self.channels(x)?;
        let w = self.weight(format!("{name}.weight"), vec![outputs, inputs])?;
        let b = self.weight(format!("{name}.bias"), vec![outputs])?;
        let gemm = Op::Gemm(Gemm {
            trans_b: true,
            ..Gemm::default()
        });
        Ok(self.graph.add_node(name, gemm, &[x, w, b])?.out(0))
    }

    /// A ResNet basic block: two 3x3 conv-bn layers, an identity shortcut when
    /// shapes allow and a 1x1 conv-bn projection otherwise, then ReLU.
    pub fn basic_block(
        &mut self,
        name: &str,
        x: Outlet,
        out_channels: usize,
        stride: usize,
    ) -> Result<Outlet, GraphError> {
        let c = self.channels(x)?;
        let y = self.conv_bn(
            &format!("{name}.conv1"),
            x,
            ConvSpec::new(out_channels, 3, stride),
            true,
        )?;
        let y = self.conv_bn(&format!("{name}.conv2"), y, ConvSpec::new(out_channels, 3, 1), false)?;
        let short = if stride == 1 && c == out_channels {
            x
        } else {
            self.conv_bn(
                &format!("{name}.downsample"),
                x,
                ConvSpec::new(out_channels, 1, stride),
                false,
            )?
        };
        let s = self.add(&format!("{name}.add"), y, short)?;
        self.relu(&format!("{name}.relu"), s)
    }

    /// Declares `y` the single output `name` and returns the graph.
    pub fn finish(mut self, name: &str, y: Outlet) -> Result<Graph, GraphError> {
        self.graph.set_outputs(vec![(name.to_string(), y)])?;
        self.graph.check()?;
        Ok(self.graph)
    }
}
