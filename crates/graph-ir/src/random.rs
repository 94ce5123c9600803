//! Deterministic filling of weights that have no data (structure-only models).

use crate::graph::{Graph, NodeId};
use crate::ops::Op;
use crate::rng::SplitMix64;
use crate::tensor::{DType, Tensor};

/// FNV-1a of a name, so a tensor's values depend on the seed and its name only.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x1000_0000_01b3)
    })
}

/// How a weight is used, which decides the distribution it is drawn from.
enum Role {
    /// Conv/Gemm/MatMul weight with this fan-in: uniform(-b, b), b = sqrt(3/fan_in)
    /// (variance 1/fan_in, so activations keep their scale through deep nets).
    Weight { fan_in: usize },
    /// BatchNorm scale or variance: uniform(0.5, 1.5).
    Positive,
    /// Biases, BatchNorm shift and mean, other operands: uniform(-0.1, 0.1).
    Small,
}

impl Graph {
    fn role_of(&self, c: NodeId) -> Role {
        for (n, slot) in self.consumers(c.out(0)) {
            let node = self.node(n);
            match (&node.op, slot) {
                (Op::Conv(_) | Op::ConvTranspose(_), 1) => {
                    let s = self.node(c).outputs[0].shape.clone();
                    return Role::Weight {
                        fan_in: s[1..].iter().product::<usize>().max(1),
                    };
                }
                (Op::Gemm(g), 1) => {
                    let s = &self.node(c).outputs[0].shape;
                    return Role::Weight {
                        fan_in: if g.trans_b { s[1] } else { s[0] }.max(1),
                    };
                }
                (Op::MatMul(_), 1) => {
                    let s = &self.node(c).outputs[0].shape;
                    return Role::Weight {
                        fan_in: s[s.len().saturating_sub(2)].max(1),
                    };
                }
                (Op::BatchNorm(_), 1 | 4) => return Role::Positive,
                _ => {}
            }
        }
        Role::Small
    }

    /// The constants that have no data (declared shape and type only, as in
    /// a structure-only model), in node order.
    pub fn weights_without_data(&self) -> Vec<NodeId> {
        self.node_ids()
            .into_iter()
            .filter(|id| matches!(&self.node(*id).op, Op::Const(t) if !t.has_data()))
            .collect()
    }

    /// Fills every float constant that has no data with values drawn from a
    /// generator seeded by `seed` and the constant's name. Constants that
    /// already hold data are left alone. Returns how many were filled.
    pub fn fill_missing_weights(&mut self, seed: u64) -> usize {
        let mut filled = 0;
        for id in self.node_ids() {
            let (name, fact) = match &self.node(id).op {
                Op::Const(t) if !t.has_data() && t.dtype() == DType::F32 => {
                    (self.node(id).name.clone(), t.fact().clone())
                }
                _ => continue,
            };
            let mut rng = SplitMix64::new(seed ^ name_hash(&name));
            let (lo, hi) = match self.role_of(id) {
                Role::Weight { fan_in } => {
                    let b = (3.0 / fan_in as f32).sqrt();
                    (-b, b)
                }
                Role::Positive => (0.5, 1.5),
                Role::Small => (-0.1, 0.1),
            };
            let values: Vec<f32> = (0..fact.volume()).map(|_| lo + (hi - lo) * rng.next_f32()).collect();
            let t = Tensor::from_f32(fact.shape.clone(), &values);
            self.set_const(id, t);
            filled += 1;
        }
        filled
    }

    /// One f32 tensor per graph input, of its shape, uniform in `[-1, 1)`
    /// from a generator seeded with `seed` (the inputs drawn in order from
    /// one stream, as [`uniform_tensor`] draws them).
    pub fn uniform_inputs(&self, seed: u64) -> Vec<Tensor> {
        let mut rng = SplitMix64::new(seed);
        self.inputs()
            .iter()
            .map(|id| uniform_tensor(self.node(*id).outputs[0].shape.clone(), &mut rng))
            .collect()
    }

    /// Replaces the tensor of a constant node with one of the same fact.
    pub(crate) fn set_const(&mut self, id: NodeId, t: Tensor) {
        if let Some(Op::Const(old)) = self.get(id).map(|n| &n.op) {
            debug_assert_eq!(old.fact(), t.fact());
        }
        self.replace_op(id, Op::Const(t))
            .expect("a constant infers its own fact");
    }
}

/// An f32 tensor of `shape` uniform in `[-1, 1)` (23 random bits a value),
/// drawn from `rng`.
pub fn uniform_tensor(shape: Vec<usize>, rng: &mut SplitMix64) -> Tensor {
    let values: Vec<f32> = (0..shape.iter().product::<usize>())
        .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        .collect();
    Tensor::from_f32(shape, &values)
}
