//! Lowering a [`Graph`] to a [`Program`]: a topologically ordered list of burn
//! kernels over value slots, with every constant tensor a parameter slot.
//!
//! Values are carried as rank-4 burn tensors: a value of logical rank `r ≤ 4`
//! is stored with its logical shape followed by `4 - r` ones, so `[N, C]` is
//! `[N, C, 1, 1]`. Values computed from the graph input carry the batch in
//! dimension 0, whatever batch the graph's facts were inferred with; constants
//! carry none. The same program serves training (autodiff) and inference.

use std::collections::HashMap;

use burn::tensor::ops::{AvgPoolOptions, ConvOptions, ConvTransposeOptions, InterpolateOptions, MaxPoolOptions};
use graph_ir::ops::{BinaryOp, Op, ReduceKind, UnaryOp};
use graph_ir::{DType, Graph, NodeId, Outlet};

use crate::error::TrainError;
use crate::fake_quant::FakeQuant;

mod kernel;

/// What a parameter slot holds and how training treats it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Updated by the optimizer: conv, Gemm and MatMul weights and biases,
    /// BatchNorm scale and shift, and float constants of more than one
    /// element that an Add, Sub or Mul applies to a computed value of their
    /// broadcast shape (a bias after a MatMul, a per-channel scale).
    Learnable,
    /// A BatchNorm running mean, updated from batch statistics in training mode.
    RunningMean,
    /// A BatchNorm running variance, updated from batch statistics in training mode.
    RunningVar,
    /// A constant operand that is never changed: shape operands and scalars
    /// such as the 3 of `x + 3`.
    Fixed,
}

/// One constant of the graph as a parameter slot.
#[derive(Clone, Debug)]
pub struct ParamSpec {
    pub node: NodeId,
    pub name: String,
    pub shape: Vec<usize>,
    pub role: Role,
}

/// Where a kernel reads an operand from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Operand {
    Slot(usize),
    Param(usize),
}

#[derive(Clone, Debug)]
pub(crate) enum Kernel {
    Conv {
        options: ConvOptions<2>,
        weight: usize,
        bias: Option<usize>,
    },
    BatchNorm {
        epsilon: f64,
        momentum: f64,
        scale: usize,
        shift: usize,
        mean: usize,
        var: usize,
    },
    Unary(UnaryOp),
    Binary(BinaryOp),
    Softmax {
        axis: usize,
        log: bool,
    },
    InstanceNorm {
        epsilon: f64,
        scale: usize,
        shift: usize,
    },
    Lrn(graph_ir::ops::Lrn),
    ConvTranspose {
        options: ConvTransposeOptions<2>,
        weight: usize,
        bias: Option<usize>,
    },
    Interpolate(InterpolateOptions),
    Tile([usize; 4]),
    Concat(usize),
    Split {
        axis: usize,
        sizes: Vec<usize>,
    },
    /// `(axis, start, length)` per narrowed axis.
    Narrow(Vec<(usize, usize, usize)>),
    Reshape,
    Transpose([usize; 4]),
    MaxPool(MaxPoolOptions<2>),
    AvgPool(AvgPoolOptions<2>),
    GlobalAveragePool,
    Reduce(ReduceKind, Vec<usize>),
    Gemm {
        alpha: f64,
        beta: f64,
        trans_b: bool,
    },
    /// `[.., K] x [K, M]` or `[.., K] x [K]`: the right operand a matrix
    /// or a vector, the left one any rank.
    MatMul,
    /// Normalisation over the axes from `first` on; outputs Y, Mean and
    /// InvStdDev.
    LayerNorm {
        first: usize,
        epsilon: f64,
        scale: usize,
        shift: Option<usize>,
    },
    GlobalMaxPool,
    DepthToSpace {
        block: usize,
        crd: bool,
    },
    SpaceToDepth {
        block: usize,
        crd: bool,
    },
    /// Separable resampling by weight matrices: `rows` is `[out_h, in_h]`
    /// and `cols` `[out_w, in_w]`, row-major.
    Resample {
        rows: Vec<f32>,
        cols: Vec<f32>,
        input: [usize; 2],
        output: [usize; 2],
    },
    /// Constant padding: `(axis, before, after)` per padded axis.
    Pad(Vec<(usize, usize, usize)>, f32),
}

#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub kernel: Kernel,
    pub inputs: Vec<Operand>,
    pub outputs: Vec<usize>,
}

/// A value slot: its shape as inferred in the graph and whether dimension 0 is the batch.
#[derive(Clone, Debug)]
pub(crate) struct Slot {
    pub shape: Vec<usize>,
    pub batched: bool,
}

/// A graph lowered to burn kernels; run it with [`Program::forward`](crate::Program::forward).
#[derive(Clone, Debug)]
pub struct Program {
    pub(crate) steps: Vec<Step>,
    pub(crate) slots: Vec<Slot>,
    pub(crate) input: usize,
    pub(crate) output: usize,
    pub(crate) params: Vec<ParamSpec>,
    pub(crate) slot_of: HashMap<Outlet, usize>,
    pub(crate) fake: FakeQuant,
    input_shape: [usize; 3],
    classes: usize,
}

impl Program {
    /// The parameter slots, in the order [`crate::Params`] holds their values.
    pub fn params(&self) -> &[ParamSpec] {
        &self.params
    }

    /// `[channels, height, width]` of one input image.
    pub fn input_shape(&self) -> [usize; 3] {
        self.input_shape
    }

    /// Number of scores the model outputs per image.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// Logical shape of a slot for a batch of `n`.
    pub(crate) fn shape(&self, slot: usize, n: usize) -> Vec<usize> {
        let s = &self.slots[slot];
        let mut shape = s.shape.clone();
        if s.batched {
            shape[0] = n;
        }
        shape
    }
}

/// `shape` padded with trailing ones to rank 4.
pub(crate) fn pad4(shape: &[usize]) -> [usize; 4] {
    let mut out = [1; 4];
    out[..shape.len()].copy_from_slice(shape);
    out
}

/// The 4-d shape that lines an operand of `shape` up with a result of rank
/// `rank` for broadcasting (ONNX aligns trailing axes: leading 1s, then
/// `shape`), or `None` when the operand already has that rank or more.
pub(crate) fn aligned4(shape: &[usize], rank: usize) -> Option<[usize; 4]> {
    (shape.len() < rank).then(|| {
        let mut s = vec![1; rank - shape.len()];
        s.extend_from_slice(shape);
        pad4(&s)
    })
}

struct Lowering<'g> {
    graph: &'g Graph,
    slots: Vec<Slot>,
    slot_of: HashMap<Outlet, usize>,
    params: Vec<ParamSpec>,
    param_of: HashMap<NodeId, usize>,
    batch: usize,
}

/// Lowers `graph` (one rank-4 float input, one output of scores per image).
/// Errors name the node that cannot be lowered and why.
pub fn lower(graph: &Graph) -> Result<Program, TrainError> {
    let inputs = graph.inputs();
    if inputs.len() != 1 {
        return Err(TrainError::Model(format!(
            "expected one image input, found {}",
            inputs.len()
        )));
    }
    let input_node = graph.node(inputs[0]);
    let fact = &input_node.outputs[0];
    if fact.rank() != 4 || fact.dtype != DType::F32 {
        return Err(TrainError::Model(format!(
            "input '{}' is {fact}; training needs a float32 [N, C, H, W] image input",
            input_node.name
        )));
    }
    let [batch, c, h, w] = [fact.shape[0], fact.shape[1], fact.shape[2], fact.shape[3]];
    if graph.outputs().len() != 1 {
        return Err(TrainError::Model(format!(
            "expected one output (class scores), found {}",
            graph.outputs().len()
        )));
    }
    let mut l = Lowering {
        graph,
        slots: Vec::new(),
        slot_of: HashMap::new(),
        params: Vec::new(),
        param_of: HashMap::new(),
        batch,
    };
    let roles = param_roles(graph);
    let input = l.slot(inputs[0].out(0), true);
    let mut steps = Vec::new();
    for id in graph.topo_order()? {
        let node = graph.node(id);
        match &node.op {
            Op::Input(_) => {}
            Op::Const(t) => {
                let role = roles.get(&id).copied().unwrap_or(Role::Fixed);
                if t.dtype() != DType::F32 {
                    continue;
                }
                l.param_of.insert(id, l.params.len());
                l.params.push(ParamSpec {
                    node: id,
                    name: node.name.clone(),
                    shape: t.shape().to_vec(),
                    role,
                });
            }
            op => steps.push(l.step(id, op)?),
        }
    }
    let out = graph.outputs()[0].1;
    let output = *l
        .slot_of
        .get(&out)
        .ok_or_else(|| TrainError::Model("the output is a constant, not computed from the input".into()))?;
    let out_shape = &l.slots[output].shape;
    if out_shape.len() < 2 || out_shape[0] != batch {
        return Err(TrainError::Model(format!(
            "output {:?} is not one score vector per image",
            out_shape
        )));
    }
    let classes = out_shape[1..].iter().product();
    Ok(Program {
        steps,
        slots: l.slots,
        input,
        output,
        params: l.params,
        slot_of: l.slot_of,
        fake: FakeQuant::default(),
        input_shape: [c, h, w],
        classes,
    })
}

/// Roles of the constants by the input slot of the op that reads them.
fn param_roles(graph: &Graph) -> HashMap<NodeId, Role> {
    let mut roles = HashMap::new();
    for id in graph.node_ids() {
        let node = graph.node(id);
        for (slot, o) in node.inputs.iter().enumerate() {
            if !matches!(graph.node(o.node).op, Op::Const(_)) {
                continue;
            }
            let role = match (&node.op, slot) {
                (Op::Conv(_) | Op::ConvTranspose(_), 1 | 2) | (Op::Gemm(_), 1 | 2) | (Op::MatMul(_), _) => {
                    Role::Learnable
                }
                (Op::Binary(_), _) if elementwise_parameter(graph, id, slot) => Role::Learnable,
                (Op::Binary(b), 1) if b.op == BinaryOp::PRelu => Role::Learnable,
                (Op::BatchNorm(_) | Op::InstanceNorm(_) | Op::LayerNorm(_), 1 | 2) => Role::Learnable,
                (Op::BatchNorm(_), 3) => Role::RunningMean,
                (Op::BatchNorm(_), 4) => Role::RunningVar,
                _ => Role::Fixed,
            };
            let entry = roles.entry(o.node).or_insert(role);
            if role == Role::Learnable {
                *entry = Role::Learnable;
            }
        }
    }
    roles
}

/// Whether input `slot` of the Add, Sub or Mul `id` is a learned bias or
/// scale: a float constant of more than one element, read beside a computed
/// value that it broadcasts to without widening (a bias vector after a
/// MatMul, a per-channel scale).
pub(crate) fn elementwise_parameter(graph: &Graph, id: NodeId, slot: usize) -> bool {
    let node = graph.node(id);
    let Op::Binary(b) = &node.op else { return false };
    if !matches!(b.op, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul) || node.inputs.len() != 2 {
        return false;
    }
    let (konst, other) = (node.inputs[slot], node.inputs[1 - slot]);
    let Op::Const(t) = &graph.node(konst.node).op else {
        return false;
    };
    if t.dtype() != DType::F32 || t.shape().iter().product::<usize>() < 2 {
        return false;
    }
    if matches!(graph.node(other.node).op, Op::Const(_)) {
        return false;
    }
    let Some(value) = graph.fact(other) else { return false };
    value.rank() >= t.shape().len() && node.outputs.first().is_some_and(|f| f.shape == value.shape)
}

impl Lowering<'_> {
    fn slot(&mut self, o: Outlet, batched: bool) -> usize {
        let shape = self.graph.fact(o).map(|f| f.shape.clone()).unwrap_or_default();
        self.slots.push(Slot { shape, batched });
        self.slot_of.insert(o, self.slots.len() - 1);
        self.slots.len() - 1
    }

    fn unsupported(&self, id: NodeId, reason: impl Into<String>) -> TrainError {
        let node = self.graph.node(id);
        TrainError::Unsupported {
            node: node.name.clone(),
            op: node.op.name(),
            reason: reason.into(),
        }
    }

    fn operand(&self, id: NodeId, o: Outlet) -> Result<Operand, TrainError> {
        if let Some(&s) = self.slot_of.get(&o) {
            return Ok(Operand::Slot(s));
        }
        if let Some(&p) = self.param_of.get(&o.node) {
            return Ok(Operand::Param(p));
        }
        Err(self.unsupported(id, "reads a non-float constant"))
    }

    fn param(&self, id: NodeId, o: Outlet, what: &str) -> Result<usize, TrainError> {
        match self.operand(id, o)? {
            Operand::Param(p) => Ok(p),
            Operand::Slot(_) => Err(self.unsupported(id, format!("{what} must be a constant"))),
        }
    }

    fn rank(&self, o: Outlet) -> usize {
        self.graph.fact(o).map_or(0, |f| f.rank())
    }

    fn step(&mut self, id: NodeId, op: &Op) -> Result<Step, TrainError> {
        let node = self.graph.node(id);
        if node.outputs.iter().any(|f| f.rank() > 4) {
            return Err(self.unsupported(id, "values of rank above 4 are not supported"));
        }
        if node.outputs.iter().any(|f| f.dtype != DType::F32) {
            return Err(self.unsupported(id, "only float32 values can be trained"));
        }
        let batched = node
            .inputs
            .iter()
            .any(|o| self.slot_of.get(o).is_some_and(|&s| self.slots[s].batched));
        let first = node.inputs.first().copied();
        let mut inputs: Vec<Operand> = Vec::new();
        let kernel = self.kernel(id, op, batched, &mut inputs)?;
        if inputs.is_empty() {
            for &o in &node.inputs {
                inputs.push(self.operand(id, o)?);
            }
        }
        if !batched && first.is_some() {
            return Err(self.unsupported(
                id,
                "computes only on constants; fold it before training (stretch convert)",
            ));
        }
        if batched {
            for f in &node.outputs {
                if f.shape.first() != Some(&self.batch) {
                    return Err(self.unsupported(id, format!("output {:?} lost the batch dimension", f.shape)));
                }
            }
        }
        let outputs = (0..node.outputs.len()).map(|i| self.slot(id.out(i), batched)).collect();
        Ok(Step {
            kernel,
            inputs,
            outputs,
        })
    }
}
