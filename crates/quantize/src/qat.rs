//! What quantization-aware training rounds so that training sees what
//! [`insert_qdq`](crate::insert_qdq) will write: the same activations with
//! the same uint8 parameters, the same int8 weights per channel, and, on
//! fp16 processors, every value and float constant at half precision.
//!
//! A value has one rounding in training: one read by an int8 node is
//! rounded to its uint8 grid for all its readers, where the written file
//! gives float readers of a value produced outside an int8 processor the
//! unrounded value.

use crate::error::QuantizeError;
use crate::params::QParams;
use crate::precision_map::PrecisionMap;
use crate::qdq::{activations_to_calibrate, int8_nodes, int8_weight_axis};
use graph_ir::{DType, Graph, NodeId, Op, Outlet};
use predictor::Precision;
use std::collections::HashSet;

/// The roundings of one model, in topological order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QatPlan {
    /// Activations given a Q→DQ pair, with their uint8 parameters.
    pub int8_activations: Vec<(Outlet, QParams)>,
    /// Weight constants stored as int8, with their channel axis.
    pub int8_weights: Vec<(NodeId, usize)>,
    /// Values computed on fp16 processors (and not rounded to int8).
    pub fp16_activations: Vec<Outlet>,
    /// Float constants read by nodes of fp16 processors.
    pub fp16_weights: Vec<NodeId>,
}

/// The plan for `g` at `map`'s precisions, `ranges[i]` the calibrated range
/// of `activations_to_calibrate(g, map)[i]`.
pub fn qat_plan(g: &Graph, map: &PrecisionMap, ranges: &[(f32, f32)]) -> Result<QatPlan, QuantizeError> {
    let acts = activations_to_calibrate(g, map)?;
    if acts.len() != ranges.len() {
        return Err(QuantizeError::Ranges {
            want: acts.len(),
            got: ranges.len(),
        });
    }
    let int8: HashSet<NodeId> = int8_nodes(g, map)?.into_iter().collect();
    let shared = crate::shared_params::activation_params(g, &acts, ranges, &int8);
    let mut plan = QatPlan {
        int8_activations: acts.iter().copied().zip(shared).collect(),
        ..QatPlan::default()
    };
    for id in int8_nodes(g, map)? {
        if let Some(axis) = int8_weight_axis(g, id) {
            plan.int8_weights.push((g.node(id).inputs[1].node, axis));
        }
    }
    let int8_values: HashSet<Outlet> = acts.into_iter().collect();
    let mut fp16_consts = HashSet::new();
    for id in g.topo_order()? {
        let n = g.node(id);
        if matches!(n.op, Op::Const(_) | Op::Input(_)) || map.of(n)? != Precision::Fp16 {
            continue;
        }
        for (slot, f) in n.outputs.iter().enumerate() {
            let o = id.out(slot);
            if f.dtype == DType::F32 && !int8_values.contains(&o) {
                plan.fp16_activations.push(o);
            }
        }
        for o in &n.inputs {
            let is_float_const = g.const_tensor(*o).is_some_and(|t| t.dtype() == DType::F32);
            if is_float_const && fp16_consts.insert(o.node) {
                plan.fp16_weights.push(o.node);
            }
        }
    }
    Ok(plan)
}

/// `plan` (made on `folded`, the output of
/// [`fold_batch_norms`](crate::fold_bn::fold_batch_norms) on `original`)
/// in terms of `original`, so training keeps its batch normalisations: a
/// folded convolution's output is the normalisation's output, its folded
/// weight and bias the convolution's own. Per-channel symmetric rounding
/// commutes with the per-channel factor a fold multiplies weights by, so
/// the rounded unfolded weights fold to the rounded folded ones.
pub fn unfold_plan(plan: &QatPlan, folded: &Graph, original: &Graph) -> Result<QatPlan, QuantizeError> {
    let outlet = |o: &Outlet| -> Result<Outlet, QuantizeError> {
        let name = &folded.node(o.node).name;
        if let Some(id) = original.find(name) {
            return Ok(id.out(o.slot));
        }
        let conv = name
            .strip_suffix(".folded")
            .and_then(|base| original.find(unfolded_name(base)))
            .ok_or_else(|| unmatched(name))?;
        let mut norm = conv.out(0);
        while let Some(&(next, _)) = original.consumers(norm).first() {
            if !matches!(original.node(next).op, Op::BatchNorm(_)) || folded.find(&original.node(next).name).is_some() {
                break;
            }
            norm = next.out(0);
        }
        Ok(norm)
    };
    let constant = |id: NodeId| -> Result<Option<NodeId>, QuantizeError> {
        let name = &folded.node(id).name;
        if let Some(found) = original.find(name) {
            return Ok(Some(found));
        }
        let (base, slot) = match (name.strip_suffix(".folded_weight"), name.strip_suffix(".folded_bias")) {
            (Some(b), _) => (b, 1),
            (_, Some(b)) => (b, 2),
            _ => return Err(unmatched(name)),
        };
        let conv = original.find(unfolded_name(base)).ok_or_else(|| unmatched(name))?;
        Ok(original.node(conv).inputs.get(slot).map(|o| o.node))
    };
    let mut out = QatPlan::default();
    for (o, p) in &plan.int8_activations {
        out.int8_activations.push((outlet(o)?, *p));
    }
    for o in &plan.fp16_activations {
        out.fp16_activations.push(outlet(o)?);
    }
    for (id, axis) in &plan.int8_weights {
        out.int8_weights.extend(constant(*id)?.map(|c| (c, *axis)));
    }
    for id in &plan.fp16_weights {
        out.fp16_weights.extend(constant(*id)?);
    }
    Ok(out)
}

/// `name` without the `.folded` suffixes of repeated folds.
fn unfolded_name(mut name: &str) -> &str {
    while let Some(base) = name.strip_suffix(".folded") {
        name = base;
    }
    name
}

fn unmatched(name: &str) -> QuantizeError {
    QuantizeError::Unmatched { name: name.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::builder::{Builder, ConvSpec};
    use graph_ir::keys;

    #[test]
    fn int8_processors_get_the_written_parameters_and_fp16_ones_round_to_half() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 3, 8, 8]).unwrap();
        let y = b.conv("conv0", x, ConvSpec::new(4, 3, 1).bias()).unwrap();
        let y = b.relu("relu", y).unwrap();
        let y = b.conv("conv1", y, ConvSpec::new(4, 3, 1).bias()).unwrap();
        let mut g = b.finish("y", y).unwrap();
        g.fill_missing_weights(1);
        for id in g.node_ids() {
            let p = if g.node(id).name.starts_with("conv1") {
                "gpu"
            } else {
                "cpu"
            };
            g.annotate(id, keys::PROCESSOR, p);
        }
        let map = PrecisionMap::new(
            [
                ("cpu".to_string(), Precision::Int8),
                ("gpu".to_string(), Precision::Fp16),
            ]
            .into(),
            None,
        );
        let plan = qat_plan(&g, &map, &[(-1.0, 1.0), (0.0, 3.0)]).unwrap();
        let name = |id: NodeId| g.node(id).name.clone();
        let acts: Vec<String> = plan.int8_activations.iter().map(|(o, _)| name(o.node)).collect();
        assert_eq!(acts, ["x", "relu"]);
        assert_eq!(plan.int8_activations[1].1, crate::params::activation(0.0, 3.0));
        let conv0 = g.node(g.find("conv0").unwrap());
        assert_eq!(plan.int8_weights, [(conv0.inputs[1].node, 0)]);
        let conv1 = g.node(g.find("conv1").unwrap());
        assert_eq!(plan.fp16_activations, [g.find("conv1").unwrap().out(0)]);
        assert_eq!(plan.fp16_weights, [conv1.inputs[1].node, conv1.inputs[2].node]);
        assert!(qat_plan(&g, &map, &[]).is_err());
    }

    #[test]
    fn a_plan_on_the_folded_model_names_the_normalisations_of_the_original() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 3, 6, 6]).unwrap();
        let y = b.conv("conv", x, ConvSpec::new(4, 3, 1)).unwrap();
        let y = b.batch_norm("bn", y).unwrap();
        let mut g = b.finish("y", y).unwrap();
        g.fill_missing_weights(3);
        for id in g.node_ids() {
            g.annotate(id, keys::PROCESSOR, "cpu");
        }
        let map = PrecisionMap::new([("cpu".to_string(), Precision::Int8)].into(), None);
        let (folded, _) = crate::fold_bn::fold_batch_norms(&g).unwrap();
        let plan = qat_plan(&folded, &map, &[(-1.0, 1.0), (-2.0, 2.0)]).unwrap();
        let plan = unfold_plan(&plan, &folded, &g).unwrap();
        let names: Vec<&str> = plan
            .int8_activations
            .iter()
            .map(|(o, _)| g.node(o.node).name.as_str())
            .collect();
        assert_eq!(names, ["x", "bn"]);
        let conv = g.node(g.find("conv").unwrap());
        assert_eq!(plan.int8_weights, [(conv.inputs[1].node, 0)]);
    }
}
