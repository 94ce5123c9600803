//! Duplicate-and-scale: one branch of a stage as a standalone graph.
//!
//! A branch keeps the stage's first `depth` blocks (its transition and
//! `depth - 1` residual blocks) and scales every convolution's output
//! channels by `width / stage width`, rounded to multiples of the spec's
//! `multiple` (8 by default): the stage's
//! output becomes `width` and inner widths (bottlenecks, expansions,
//! squeeze-excitation) scale in proportion. Depthwise convolutions follow
//! their input; grouped ones keep a group count that divides both channel
//! counts. Every layer is new: Kaiming-normal weights, BatchNorm weight 1 and
//! bias 0 ([`crate::init`]). A residual Add whose shortcut no longer matches
//! (a block reading the unscaled stage input) gets a 1x1 conv + BatchNorm
//! projection on the shortcut, as ResNet's downsampling blocks have. With
//! `project_to`, the branch ends in a 1x1 convolution and BatchNorm to that
//! many channels (the `project` merge).

use crate::error::BranchError;
use crate::init::{batch_norm, filled, kaiming};
use graph_ir::analysis::Stage;
use graph_ir::ops::{BatchNorm, Binary, BinaryOp, Conv, LayerNorm, Op};
use graph_ir::{Graph, Node, NodeId, Outlet};
use std::collections::HashMap;

/// New weights: drawn ([`kaiming`]) or declared without data (structure
/// only, for search and prediction).
fn weight(data: bool, shape: Vec<usize>, seed: u64, name: &str) -> graph_ir::Tensor {
    if data {
        kaiming(shape, seed, name)
    } else {
        graph_ir::Tensor::without_data(graph_ir::Fact::f32(shape))
    }
}

/// What one branch keeps of its stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BranchSpec {
    /// Blocks kept, from the first (1..= the stage's blocks).
    pub depth: usize,
    /// Output channels of the branch (before any projection).
    pub width: usize,
    /// Channels of the 1x1 projection ending the branch, if any.
    pub project_to: Option<usize>,
    /// Draw weights (true) or leave them without data (structure only).
    pub weights: bool,
    /// Scaled channel counts are rounded to multiples of this (at least 1).
    pub multiple: usize,
}

/// Channels of an outlet (dimension 1 of an NCHW value).
pub fn channels(g: &Graph, o: Outlet) -> usize {
    g.fact(o).and_then(|f| f.shape.get(1).copied()).unwrap_or(0)
}

/// `c` scaled by `ratio`, rounded to a multiple of `multiple` (at least one multiple).
pub fn scale(c: usize, ratio: f64, multiple: usize) -> usize {
    let m = multiple.max(1);
    (((c as f64 * ratio) / m as f64).round() as usize).max(1) * m
}

/// Splits `total` channels into one share per branch, proportional to
/// `widths`, multiples of `multiple` where possible (at least 1 each); the
/// last share takes the remainder so the shares sum to `total`.
pub fn shares(total: usize, widths: &[usize], multiple: usize) -> Vec<usize> {
    let m = multiple.max(1);
    let sum: usize = widths.iter().sum::<usize>().max(1);
    let n = widths.len();
    let mut out = Vec::with_capacity(n);
    let mut given = 0;
    for (i, w) in widths.iter().enumerate() {
        let left = n - 1 - i;
        let s = if left == 0 {
            total.saturating_sub(given).max(1)
        } else {
            scale(total, *w as f64 / sum as f64, m).min(total.saturating_sub(given + m * left).max(1))
        };
        given += s;
        out.push(s);
    }
    out
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The largest divisor of both `cin` and `cout` that is at most `want` (at least 1).
fn group_count(cin: usize, cout: usize, want: usize) -> usize {
    let g = gcd(cin, cout);
    (1..=want.max(1).min(g))
        .rev()
        .find(|d| g.is_multiple_of(*d))
        .unwrap_or(1)
}

/// Builds branch `spec` of `stage` of `g` as a graph with one input (the
/// stage's input value) and one output. New nodes are named `{prefix}{name}`;
/// weights are drawn from `seed` and their names.
pub fn build_branch(
    g: &Graph,
    stage: &Stage,
    spec: &BranchSpec,
    seed: u64,
    prefix: &str,
) -> Result<Graph, BranchError> {
    build_branch_at(g, stage, spec, None, seed, prefix)
}

/// [`build_branch`] for a stage input of `input_channels` channels instead of
/// its own (the stage reads an earlier stage's `concat` merge).
pub fn build_branch_at(
    g: &Graph,
    stage: &Stage,
    spec: &BranchSpec,
    input_channels: Option<usize>,
    seed: u64,
    prefix: &str,
) -> Result<Graph, BranchError> {
    if spec.depth == 0 || spec.depth > stage.blocks.len() {
        return Err(BranchError::Mismatch {
            reason: format!(
                "stage {} has {} blocks, a branch asks for depth {}",
                stage.index,
                stage.blocks.len(),
                spec.depth
            ),
        });
    }
    let stage_width = channels(g, stage.output());
    if stage_width == 0 || spec.width == 0 {
        return Err(BranchError::Mismatch {
            reason: format!("stage {} has no channel dimension to scale", stage.index),
        });
    }
    let ratio = spec.width as f64 / stage_width as f64;
    let spec = BranchSpec {
        multiple: if spec.width == stage_width { 1 } else { spec.multiple },
        ..*spec
    };
    let mut b = Graph::new(format!("{}.{prefix}", g.name));
    let mut input_fact = g.fact(stage.input()).cloned().ok_or_else(|| BranchError::Mismatch {
        reason: format!("stage {} input has no known shape", stage.index),
    })?;
    if let (Some(c), Some(d)) = (input_channels, input_fact.shape.get_mut(1)) {
        *d = c;
    }
    let x = b.add_input(format!("{prefix}input"), input_fact)?;
    let mut builder = Builder {
        g,
        stage,
        spec,
        ratio,
        seed,
        prefix,
        b,
        map: HashMap::from([(stage.input(), x)]),
    };
    for block in &stage.blocks[..spec.depth] {
        for &id in &block.segment.nodes {
            let new = builder.node(g.node(id))?;
            for slot in 0..g.node(id).outputs.len() {
                builder.map.insert(id.out(slot), new.out(slot));
            }
        }
    }
    let Builder { mut b, map, .. } = builder;
    let end = stage.blocks[spec.depth - 1].segment.output;
    let mut y = *map.get(&end).ok_or_else(|| BranchError::Mismatch {
        reason: format!("stage {}: block output was not built", stage.index),
    })?;
    if let Some(c) = spec.project_to {
        y = project(&mut b, y, c, spec.weights, seed, &format!("{prefix}project"))?;
    }
    b.set_outputs(vec![(format!("{prefix}output"), y)])?;
    b.check()?;
    Ok(b)
}

/// One branch being built: the stage it scales, its spec (the rounding
/// multiple already settled) and width ratio, the graph so far and where
/// each of the stage's values went in it.
struct Builder<'a> {
    g: &'a Graph,
    stage: &'a Stage,
    spec: BranchSpec,
    ratio: f64,
    seed: u64,
    prefix: &'a str,
    b: Graph,
    map: HashMap<Outlet, Outlet>,
}

impl Builder<'_> {
    fn unsupported(&self, node: &Node, reason: String) -> BranchError {
        BranchError::Unsupported {
            stage: self.stage.index,
            node: node.name.clone(),
            op: node.op.name(),
            reason,
        }
    }

    /// The branch's value for input `slot` of `node`; refused when it
    /// comes from outside the stage.
    fn data(&self, node: &Node, slot: usize) -> Result<Outlet, BranchError> {
        let o = node.inputs[slot];
        self.map
            .get(&o)
            .copied()
            .ok_or_else(|| self.unsupported(node, format!("input {slot} comes from outside the stage")))
    }

    /// Adds the scaled copy of `node` to the branch.
    fn node(&mut self, node: &Node) -> Result<NodeId, BranchError> {
        let g = self.g;
        let name = format!("{}{}", self.prefix, node.name);
        match &node.op {
            Op::Conv(c) => self.conv(node, c, name),
            Op::BatchNorm(bn) => {
                let x = self.data(node, 0)?;
                fresh_batch_norm(&mut self.b, x, &name, bn.clone())
            }
            Op::MatMul(_) if g.const_tensor(node.inputs[1]).is_some_and(|t| t.shape().len() == 2) => {
                self.mat_mul(node, name)
            }
            Op::Gemm(_) | Op::MatMul(_) => Err(self.unsupported(
                node,
                "only matrix products of a value with a constant matrix are scaled inside a stage".into(),
            )),
            Op::LayerNorm(ln) => self.layer_norm(node, ln, name),
            Op::Binary(bin)
                if node.inputs.len() == 2
                    && g.const_tensor(node.inputs[1]).is_some_and(|t| t.shape().len() == 1)
                    && g.const_tensor(node.inputs[0]).is_none() =>
            {
                self.binary_const(node, bin, name)
            }
            Op::InstanceNorm(_) => {
                Err(self.unsupported(node, "instance normalisation inside a stage is not scaled".into()))
            }
            Op::Binary(_)
                if node.inputs.len() == 2
                    && node.inputs.iter().all(|o| g.const_tensor(*o).is_none())
                    && channels(&self.b, self.data(node, 0)?) != channels(&self.b, self.data(node, 1)?) =>
            {
                self.shortcut(node, name)
            }
            op => self.copied(node, op, name),
        }
    }

    /// A convolution with scaled output channels: a depthwise one follows
    /// its input, a grouped one keeps a group count dividing both sides.
    fn conv(&mut self, node: &Node, c: &Conv, name: String) -> Result<NodeId, BranchError> {
        let (spec, b) = (self.spec, &self.b);
        let x = self.data(node, 0)?;
        let w = self.g.fact(node.inputs[1]).map(|f| f.shape.clone()).unwrap_or_default();
        let (cin_old, cout_old) = (w.get(1).copied().unwrap_or(0) * c.group, w[0]);
        let cin = channels(b, x);
        let (cout, group) = if c.group > 1 && c.group == cin_old {
            (cin * (cout_old / cin_old).max(1), cin)
        } else if c.group > 1 {
            let cout = scale(cout_old, self.ratio, spec.multiple);
            let want = ((c.group as f64) * cin as f64 / cin_old as f64).round() as usize;
            (cout, group_count(cin, cout, want))
        } else {
            (scale(cout_old, self.ratio, spec.multiple), 1)
        };
        let weight = self.b.add_const(
            format!("{name}.weight"),
            weight(
                spec.weights,
                vec![cout, cin / group, w[2], w[3]],
                self.seed,
                &format!("{name}.weight"),
            ),
        )?;
        let mut inputs = vec![x, weight];
        if node.inputs.len() > 2 {
            inputs.push(self.b.add_const(format!("{name}.bias"), filled(cout, 0.0))?);
        }
        let op = Op::Conv(Conv { group, ..c.clone() });
        Ok(self.b.add_node(name, op, &inputs)?)
    }

    /// A product with a constant matrix whose output columns scale.
    fn mat_mul(&mut self, node: &Node, name: String) -> Result<NodeId, BranchError> {
        let x = self.data(node, 0)?;
        let cin = last_dim(&self.b, x);
        let cout_old = self.g.const_tensor(node.inputs[1]).map_or(0, |t| t.shape()[1]);
        let cout = scale(cout_old, self.ratio, self.spec.multiple);
        let wname = format!("{name}.weight");
        let fanned = weight(self.spec.weights, vec![cout, cin], self.seed, &wname);
        let w = fanned.reshaped(vec![cin, cout]).expect("the same number of values");
        let w = self.b.add_const(wname, w)?;
        Ok(self.b.add_node(name, node.op.clone(), &[x, w])?)
    }

    /// A LayerNorm over the last axis with fresh parameters at its input's
    /// width.
    fn layer_norm(&mut self, node: &Node, ln: &LayerNorm, name: String) -> Result<NodeId, BranchError> {
        let x = self.data(node, 0)?;
        let rank = self.b.fact(x).map_or(0, |f| f.rank());
        if ln.first_axis(rank).ok() != Some(rank.saturating_sub(1)) {
            return Err(self.unsupported(
                node,
                "only a LayerNorm over the last axis is scaled inside a stage".into(),
            ));
        }
        let c = last_dim(&self.b, x);
        let mut inputs = vec![x, self.b.add_const(format!("{name}.weight"), filled(c, 1.0))?];
        if node.inputs.len() > 2 {
            inputs.push(self.b.add_const(format!("{name}.bias"), filled(c, 0.0))?);
        }
        Ok(self.b.add_node(name, node.op.clone(), &inputs)?)
    }

    /// A binary operator with a per-channel constant: kept when it still
    /// broadcasts, else replaced by the operator's neutral value.
    fn binary_const(&mut self, node: &Node, bin: &Binary, name: String) -> Result<NodeId, BranchError> {
        let x = self.data(node, 0)?;
        let c = last_dim(&self.b, x);
        let old = self.g.const_tensor(node.inputs[1]).expect("checked");
        let t = if old.shape()[0] == c || old.shape()[0] == 1 {
            old.clone()
        } else {
            let neutral = matches!(bin.op, BinaryOp::Mul | BinaryOp::Div | BinaryOp::Pow);
            filled(c, if neutral { 1.0 } else { 0.0 })
        };
        let k = self.b.add_const(format!("{name}.const1"), t)?;
        Ok(self.b.add_node(name, node.op.clone(), &[x, k])?)
    }

    /// A residual join whose sides no longer match: the narrower side (the
    /// stage input first) gets a projection to the other's width.
    fn shortcut(&mut self, node: &Node, name: String) -> Result<NodeId, BranchError> {
        let (mut x, mut y) = (self.data(node, 0)?, self.data(node, 1)?);
        let input = self.map[&self.stage.input()];
        if x == input || (y != input && channels(&self.b, x) < channels(&self.b, y)) {
            std::mem::swap(&mut x, &mut y);
        }
        let c = channels(&self.b, x);
        let fixed = project(
            &mut self.b,
            y,
            c,
            self.spec.weights,
            self.seed,
            &format!("{name}.shortcut"),
        )?;
        Ok(self.b.add_node(name, node.op.clone(), &[x, fixed])?)
    }

    /// Any other operator, copied with its scalar constants.
    fn copied(&mut self, node: &Node, op: &Op, name: String) -> Result<NodeId, BranchError> {
        let mut inputs = Vec::with_capacity(node.inputs.len());
        for (slot, o) in node.inputs.iter().enumerate() {
            if let Some(t) = self.g.const_tensor(*o) {
                if t.shape().iter().product::<usize>() > 1 && t.shape().len() > 1 {
                    return Err(self.unsupported(node, format!("per-channel constant input {slot} cannot be rescaled")));
                }
                let cname = format!("{name}.const{slot}");
                inputs.push(self.b.add_const(cname, t.clone())?);
            } else {
                inputs.push(self.data(node, slot)?);
            }
        }
        Ok(self.b.add_node(name, op.clone(), &inputs)?)
    }
}

/// The length of the last axis of `x` (the channels of a channels-last value).
fn last_dim(b: &Graph, x: Outlet) -> usize {
    b.fact(x).and_then(|f| f.shape.last().copied()).unwrap_or(0)
}

/// A 1x1 convolution to `c` channels followed by BatchNorm, named `{name}` and `{name}.bn`.
pub fn project(b: &mut Graph, x: Outlet, c: usize, data: bool, seed: u64, name: &str) -> Result<Outlet, BranchError> {
    let cin = channels(b, x);
    let w = b.add_const(
        format!("{name}.weight"),
        weight(data, vec![c, cin, 1, 1], seed, &format!("{name}.weight")),
    )?;
    let conv = b.add_node(name, Op::Conv(Conv::default()), &[x, w])?;
    let bn = fresh_batch_norm(b, conv.out(0), &format!("{name}.bn"), BatchNorm::default())?;
    Ok(bn.out(0))
}

/// A BatchNorm node `name` over `x` with fresh parameters ([`batch_norm`])
/// named `{name}.weight`, `{name}.bias`, `{name}.running_mean`, `{name}.running_var`.
fn fresh_batch_norm(b: &mut Graph, x: Outlet, name: &str, op: BatchNorm) -> Result<NodeId, BranchError> {
    let mut inputs = vec![x];
    let params = ["weight", "bias", "running_mean", "running_var"];
    for (p, t) in params.iter().zip(batch_norm(channels(b, x))) {
        inputs.push(b.add_const(format!("{name}.{p}"), t)?);
    }
    Ok(b.add_node(name, Op::BatchNorm(op), &inputs)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::analysis::analyze;
    use graph_ir::builder::{Builder, ConvSpec};

    fn resnet() -> Graph {
        let mut b = Builder::new("r");
        let x = b.input("x", &[1, 3, 64, 64]).unwrap();
        let mut y = b.conv_bn("stem", x, ConvSpec::new(32, 3, 2), true).unwrap();
        for (s, w) in [64, 128].iter().enumerate() {
            for i in 0..3 {
                y = b
                    .basic_block(&format!("s{s}.b{i}"), y, *w, if i == 0 { 2 } else { 1 })
                    .unwrap();
            }
        }
        let y = b.classifier("head", y, 10).unwrap();
        b.finish("y", y).unwrap()
    }

    #[test]
    fn a_branch_keeps_depth_and_scales_width() {
        let g = resnet();
        let s = analyze(&g).unwrap();
        let stage = &s.stages[1];
        assert_eq!(stage.blocks.len(), 3);
        let spec = BranchSpec {
            depth: 2,
            width: 64,
            project_to: None,
            weights: true,
            multiple: 8,
        };
        let b = build_branch(&g, stage, &spec, 1, "b0.").unwrap();
        let out = b.outputs()[0].1;
        assert_eq!(b.fact(out).unwrap().shape, vec![1, 64, 8, 8]);
        let convs = b
            .node_ids()
            .into_iter()
            .filter(|id| matches!(b.node(*id).op, Op::Conv(_)))
            .count();
        assert_eq!(convs, 5, "transition (2 + shortcut) + one residual block (2)");
        let p = build_branch(
            &g,
            stage,
            &BranchSpec {
                project_to: Some(48),
                ..spec
            },
            1,
            "b0.",
        )
        .unwrap();
        assert_eq!(p.fact(p.outputs()[0].1).unwrap().shape, vec![1, 48, 8, 8]);
        let again = build_branch(&g, stage, &spec, 1, "b0.").unwrap();
        assert_eq!(
            graph_ir::onnx::export_bytes(&again).unwrap(),
            graph_ir::onnx::export_bytes(&b).unwrap()
        );
    }

    #[test]
    fn depthwise_and_grouped_convs_stay_valid() {
        let mut bld = Builder::new("m");
        let x = bld.input("x", &[1, 3, 32, 32]).unwrap();
        let y = bld.conv_bn("stem", x, ConvSpec::new(16, 3, 2), true).unwrap();
        let y = bld.conv_bn("t", y, ConvSpec::new(32, 3, 2), true).unwrap();
        let e = bld.conv_bn("e", y, ConvSpec::new(96, 1, 1), true).unwrap();
        let d = bld.conv_bn("dw", e, ConvSpec::new(96, 3, 1).group(96), true).unwrap();
        let q = bld.conv_bn("g", d, ConvSpec::new(96, 3, 1).group(4), true).unwrap();
        let p = bld.conv_bn("p", q, ConvSpec::new(32, 1, 1), false).unwrap();
        let y = bld.add("res", p, y).unwrap();
        let y = bld.classifier("head", y, 10).unwrap();
        let g = bld.finish("y", y).unwrap();
        let s = analyze(&g).unwrap();
        let stage = s.stages.last().unwrap();
        let b = build_branch(
            &g,
            stage,
            &BranchSpec {
                depth: stage.blocks.len(),
                width: 24,
                project_to: None,
                weights: false,
                multiple: 8,
            },
            3,
            "",
        )
        .unwrap();
        b.check().unwrap();
        assert_eq!(channels(&b, b.outputs()[0].1), 24);
    }

    #[test]
    fn group_counts_divide_both_sides() {
        assert_eq!(group_count(48, 96, 4), 4);
        assert_eq!(group_count(40, 64, 5), 4);
        assert_eq!(group_count(8, 24, 100), 8);
        assert_eq!(scale(256, 0.5, 8), 128);
        assert_eq!(scale(4, 0.5, 8), 8);
        assert_eq!(scale(128, 88.0 / 128.0, 16), 96);
        assert_eq!(scale(128, 88.0 / 128.0, 8), 88);
        assert_eq!(shares(256, &[96, 64], 8), vec![152, 104]);
        assert_eq!(shares(64, &[32, 32, 32], 8), vec![24, 24, 16]);
        assert_eq!(shares(256, &[96, 64], 32), vec![160, 96]);
        assert_eq!(shares(64, &[32, 32, 32], 16), vec![16, 16, 32]);
    }
}
