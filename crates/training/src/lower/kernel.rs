//! The kernel of one graph node: its operator's attributes checked against
//! what training supports and turned into a [`Kernel`] with its operands.

use burn::tensor::ops::{AvgPoolOptions, ConvOptions, MaxPoolOptions};
use graph_ir::NodeId;
use graph_ir::ops::{
    BatchNorm, Conv, ConvTranspose, Gemm, InstanceNorm, LayerNorm, Op, Pad, Pool, PoolKind, Reduce, Resize, Slice,
    Tile, Transpose,
};

use super::{Kernel, Lowering, Operand};
use crate::error::TrainError;

/// Axis `a` of a value of rank `rank`, counted from the end when negative.
fn axis(a: i64, rank: usize) -> usize {
    if a < 0 { (a + rank as i64) as usize } else { a as usize }
}

impl Lowering<'_> {
    /// The kernel of node `id` (operator `op`); the operands that some
    /// kernels read in an order of their own go to `inputs` (the caller
    /// reads the node's inputs in order when it stays empty). `batched`:
    /// some input carries the batch.
    pub(super) fn kernel(
        &self,
        id: NodeId,
        op: &Op,
        batched: bool,
        inputs: &mut Vec<Operand>,
    ) -> Result<Kernel, TrainError> {
        let node = self.graph.node(id);
        Ok(match op {
            Op::Conv(c) => self.conv(id, c, inputs)?,
            Op::BatchNorm(b) => self.batch_norm(id, b, inputs)?,
            Op::Unary(u) => Kernel::Unary(u.op),
            Op::Binary(b) => Kernel::Binary(b.op),
            Op::InstanceNorm(n) => self.instance_norm(id, n, inputs)?,
            Op::Lrn(l) => Kernel::Lrn(l.clone()),
            Op::ConvTranspose(c) => self.conv_transpose(id, c, inputs)?,
            Op::Resize(r) => self.resize(id, r)?,
            Op::Tile(t) => self.tile(id, t, batched)?,
            Op::Gather(_) => {
                return Err(self.unsupported(id, "indexing by integer values is not trained"));
            }
            Op::Softmax(sm) => {
                let a = axis(sm.axis, node.outputs[0].rank());
                if a == 0 && batched {
                    return Err(self.unsupported(id, "a softmax over the batch dimension cannot be trained"));
                }
                Kernel::Softmax { axis: a, log: sm.log }
            }
            Op::Concat(c) => Kernel::Concat(axis(c.axis, node.outputs[0].rank())),
            Op::Split(s) => Kernel::Split {
                axis: axis(s.axis, node.outputs[0].rank()),
                sizes: s.sizes.clone(),
            },
            Op::Slice(s) => self.slice(id, s, batched)?,
            Op::Reshape(_) | Op::Flatten(_) => self.reshape(id, batched)?,
            Op::Transpose(t) => self.transpose(id, t, batched)?,
            Op::Pool(p) => self.pool(id, p)?,
            Op::GlobalAveragePool(_) => Kernel::GlobalAveragePool,
            Op::Reduce(r) => self.reduce(id, r, batched)?,
            Op::Gemm(g) => self.gemm(id, g, inputs)?,
            Op::MatMul(_) => {
                if !(1..=2).contains(&self.rank(node.inputs[1])) || self.rank(node.inputs[0]) < 2 {
                    return Err(self.unsupported(
                        id,
                        "only products of a value of rank 2 or more with a matrix or vector can be trained",
                    ));
                }
                Kernel::MatMul
            }
            Op::LayerNorm(n) => self.layer_norm(id, n, batched, inputs)?,
            Op::GlobalMaxPool(_) => Kernel::GlobalMaxPool,
            Op::DepthToSpace(d) => Kernel::DepthToSpace {
                block: d.block,
                crd: d.order == graph_ir::ops::DepthOrder::Crd,
            },
            Op::SpaceToDepth(d) => Kernel::SpaceToDepth {
                block: d.block,
                crd: d.order == graph_ir::ops::DepthOrder::Crd,
            },
            Op::Pad(p) => self.pad(id, p, batched)?,
            Op::QuantizeLinear(_) | Op::DequantizeLinear(_) | Op::Cast(_) => {
                return Err(self.unsupported(
                    id,
                    "is part of a quantized graph: train the fp32 model (quantization-aware training starts from it)",
                ));
            }
            Op::Input(_) | Op::Const(_) => unreachable!("handled by the caller"),
        })
    }

    /// The optional bias of a convolution, input 2 of `id`.
    fn bias(&self, id: NodeId) -> Result<Option<usize>, TrainError> {
        match self.graph.node(id).inputs.get(2) {
            Some(&b) => Ok(Some(self.param(id, b, "the bias")?)),
            None => Ok(None),
        }
    }

    fn conv(&self, id: NodeId, c: &Conv, inputs: &mut Vec<Operand>) -> Result<Kernel, TrainError> {
        let node = self.graph.node(id);
        inputs.push(self.operand(id, node.inputs[0])?);
        let weight = self.param(id, node.inputs[1], "the weight")?;
        let bias = self.bias(id)?;
        Ok(Kernel::Conv {
            options: ConvOptions::new_with_padding(
                c.strides,
                [(c.pads[0], c.pads[2]), (c.pads[1], c.pads[3])],
                c.dilations,
                c.group,
            ),
            weight,
            bias,
        })
    }

    fn batch_norm(&self, id: NodeId, b: &BatchNorm, inputs: &mut Vec<Operand>) -> Result<Kernel, TrainError> {
        let node = self.graph.node(id);
        let r = self.rank(node.inputs[0]);
        if !(2..=4).contains(&r) {
            return Err(self.unsupported(id, format!("input of rank {r}")));
        }
        inputs.push(self.operand(id, node.inputs[0])?);
        Ok(Kernel::BatchNorm {
            epsilon: b.epsilon as f64,
            momentum: b.momentum as f64,
            scale: self.param(id, node.inputs[1], "the scale")?,
            shift: self.param(id, node.inputs[2], "the bias")?,
            mean: self.param(id, node.inputs[3], "the mean")?,
            var: self.param(id, node.inputs[4], "the variance")?,
        })
    }

    fn instance_norm(&self, id: NodeId, n: &InstanceNorm, inputs: &mut Vec<Operand>) -> Result<Kernel, TrainError> {
        let node = self.graph.node(id);
        let r = self.rank(node.inputs[0]);
        if !(3..=4).contains(&r) {
            return Err(self.unsupported(id, format!("input of rank {r}")));
        }
        inputs.push(self.operand(id, node.inputs[0])?);
        Ok(Kernel::InstanceNorm {
            epsilon: n.epsilon as f64,
            scale: self.param(id, node.inputs[1], "the scale")?,
            shift: self.param(id, node.inputs[2], "the bias")?,
        })
    }

    fn conv_transpose(&self, id: NodeId, c: &ConvTranspose, inputs: &mut Vec<Operand>) -> Result<Kernel, TrainError> {
        let node = self.graph.node(id);
        inputs.push(self.operand(id, node.inputs[0])?);
        Ok(Kernel::ConvTranspose {
            options: crate::resample::conv_transpose(c).map_err(|e| self.unsupported(id, e))?,
            weight: self.param(id, node.inputs[1], "the weight")?,
            bias: self.bias(id)?,
        })
    }

    /// A cubic resize as weight matrices, any other as burn's interpolation.
    fn resize(&self, id: NodeId, r: &Resize) -> Result<Kernel, TrainError> {
        let node = self.graph.node(id);
        let x = &self.graph.fact(node.inputs[0]).expect("wired").shape;
        let out = &node.outputs[0].shape;
        if matches!(r.mode, graph_ir::ops::ResizeMode::Cubic { .. }) {
            let (rows, cols) = crate::resample::cubic(r, [x[2], x[3]], [out[2], out[3]]);
            return Ok(Kernel::Resample {
                rows,
                cols,
                input: [x[2], x[3]],
                output: [out[2], out[3]],
            });
        }
        let options =
            crate::resample::interpolate(r, [x[2], x[3]], [out[2], out[3]]).map_err(|e| self.unsupported(id, e))?;
        Ok(Kernel::Interpolate(options))
    }

    fn tile(&self, id: NodeId, t: &Tile, batched: bool) -> Result<Kernel, TrainError> {
        if batched && t.repeats.first() != Some(&1) {
            return Err(self.unsupported(id, "repeats along the batch dimension"));
        }
        let mut reps = [1; 4];
        reps[..t.repeats.len()].copy_from_slice(&t.repeats);
        Ok(Kernel::Tile(reps))
    }

    fn slice(&self, id: NodeId, s: &Slice, batched: bool) -> Result<Kernel, TrainError> {
        let node = self.graph.node(id);
        let in_shape = &self.graph.fact(node.inputs[0]).expect("wired").shape;
        let out_shape = &node.outputs[0].shape;
        let mut ranges = Vec::new();
        for (i, &a) in s.axes.iter().enumerate() {
            let a = axis(a, in_shape.len());
            if s.steps.get(i).copied().unwrap_or(1) != 1 {
                return Err(self.unsupported(id, "only step 1 slices can be trained"));
            }
            if a == 0 && batched {
                return Err(self.unsupported(id, "slices the batch dimension"));
            }
            let d = in_shape[a] as i64;
            let st = if s.starts[i] < 0 { s.starts[i] + d } else { s.starts[i] };
            ranges.push((a, st.clamp(0, d) as usize, out_shape[a]));
        }
        Ok(Kernel::Narrow(ranges))
    }

    fn reshape(&self, id: NodeId, batched: bool) -> Result<Kernel, TrainError> {
        let node = self.graph.node(id);
        let in_shape = &self.graph.fact(node.inputs[0]).expect("wired").shape;
        let out_shape = &node.outputs[0].shape;
        let per = |s: &[usize]| s.iter().skip(1).product::<usize>();
        if batched && (out_shape.first() != in_shape.first() || per(out_shape) != per(in_shape)) {
            return Err(self.unsupported(
                id,
                format!("reshapes {in_shape:?} to {out_shape:?}, mixing images of a batch"),
            ));
        }
        Ok(Kernel::Reshape)
    }

    fn transpose(&self, id: NodeId, t: &Transpose, batched: bool) -> Result<Kernel, TrainError> {
        if batched && t.perm.first() != Some(&0) {
            return Err(self.unsupported(id, "moves the batch dimension"));
        }
        let mut perm = [0, 1, 2, 3];
        perm[..t.perm.len()].copy_from_slice(&t.perm);
        Ok(Kernel::Transpose(perm))
    }

    fn pool(&self, id: NodeId, p: &Pool) -> Result<Kernel, TrainError> {
        let pairs = [(p.pads[0], p.pads[2]), (p.pads[1], p.pads[3])];
        Ok(match p.kind {
            PoolKind::Max => Kernel::MaxPool(
                MaxPoolOptions::new(p.kernel)
                    .with_stride(p.strides)
                    .with_padding_pairs(pairs)
                    .with_dilation(p.dilations)
                    .with_ceil_mode(p.ceil_mode),
            ),
            PoolKind::Average { count_include_pad } => {
                if p.dilations != [1, 1] {
                    return Err(self.unsupported(id, "dilated average pooling"));
                }
                Kernel::AvgPool(
                    AvgPoolOptions::new(p.kernel)
                        .with_stride(p.strides)
                        .with_padding_pairs(pairs)
                        .with_count_include_pad(count_include_pad)
                        .with_ceil_mode(p.ceil_mode),
                )
            }
        })
    }

    fn reduce(&self, id: NodeId, r: &Reduce, batched: bool) -> Result<Kernel, TrainError> {
        let rank = self.rank(self.graph.node(id).inputs[0]);
        let axes: Vec<usize> = if r.axes.is_empty() {
            (0..rank).collect()
        } else {
            r.axes.iter().map(|&a| axis(a, rank)).collect()
        };
        if batched && axes.contains(&0) {
            return Err(self.unsupported(id, "reduces over the batch dimension"));
        }
        Ok(Kernel::Reduce(r.kind, axes))
    }

    fn gemm(&self, id: NodeId, g: &Gemm, inputs: &mut Vec<Operand>) -> Result<Kernel, TrainError> {
        let node = self.graph.node(id);
        if g.trans_a || self.rank(node.inputs[0]) != 2 {
            return Err(self.unsupported(id, "A must be a [N, K] value, not transposed"));
        }
        inputs.push(self.operand(id, node.inputs[0])?);
        inputs.push(self.operand(id, node.inputs[1])?);
        if let Some(&c) = node.inputs.get(2) {
            inputs.push(self.operand(id, c)?);
        }
        Ok(Kernel::Gemm {
            alpha: g.alpha as f64,
            beta: g.beta as f64,
            trans_b: g.trans_b,
        })
    }

    fn layer_norm(
        &self,
        id: NodeId,
        n: &LayerNorm,
        batched: bool,
        inputs: &mut Vec<Operand>,
    ) -> Result<Kernel, TrainError> {
        let node = self.graph.node(id);
        let first = n
            .first_axis(self.rank(node.inputs[0]))
            .map_err(|e| self.unsupported(id, e))?;
        if first == 0 && batched {
            return Err(self.unsupported(id, "normalises over the batch dimension"));
        }
        inputs.push(self.operand(id, node.inputs[0])?);
        Ok(Kernel::LayerNorm {
            first,
            epsilon: n.epsilon as f64,
            scale: self.param(id, node.inputs[1], "the scale")?,
            shift: match node.inputs.get(2) {
                Some(&b) => Some(self.param(id, b, "the bias")?),
                None => None,
            },
        })
    }

    fn pad(&self, id: NodeId, p: &Pad, batched: bool) -> Result<Kernel, TrainError> {
        if p.mode != graph_ir::ops::PadMode::Constant {
            return Err(self.unsupported(id, "only constant padding can be trained"));
        }
        let r = p.pads.len() / 2;
        let mut pads = Vec::new();
        for a in 0..r {
            let (b, e) = (p.pads[a], p.pads[a + r]);
            if b < 0 || e < 0 {
                return Err(self.unsupported(id, "negative pads"));
            }
            if (b, e) != (0, 0) {
                if a == 0 && batched {
                    return Err(self.unsupported(id, "pads the batch dimension"));
                }
                pads.push((a, b as usize, e as usize));
            }
        }
        Ok(Kernel::Pad(pads, p.value))
    }
}
