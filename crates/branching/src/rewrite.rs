//! Applies a plan to a graph: every branched stage is replaced by its
//! branches (built by [`crate::branch`]) and a Concat meeting point, through
//! graph-ir patches. Every node is annotated with its `processor`,
//! `meeting_point` (`true` on the Concat nodes where branches meet, `false`
//! elsewhere), and for branch nodes its `stage` and `branch`.

use crate::branch::{BranchSpec, build_branch, channels, shares};
use crate::error::BranchError;
use crate::init::{batch_norm, kaiming};
use crate::plan::{Merge, Plan};
use crate::stem_split::Chain;
use graph_ir::analysis::{Stage, analyze};
use graph_ir::keys;
use graph_ir::ops::{Concat, Op};
use graph_ir::{Graph, NodeId, Outlet, Patch, PatchOutlet};
use std::collections::HashMap;

/// Checks that `plan` fits `g` (stage count, blocks, channels, depth and width bounds).
pub fn check_plan(g: &Graph, stages: &[Stage], plan: &Plan) -> Result<(), BranchError> {
    let mismatch = |reason: String| Err(BranchError::Mismatch { reason });
    if let Some(want) = &plan.model_fingerprint {
        let have = g.fingerprint();
        if have.as_ref() != Some(want) {
            return mismatch(format!(
                "the plan was made for {} (structure fingerprint {want}), and this model's structure differs (fingerprint {})",
                plan.model,
                have.unwrap_or_else(|| "none".into())
            ));
        }
    }
    if plan.stages.len() != stages.len() {
        return mismatch(format!(
            "the plan has {} stages, the model {}",
            plan.stages.len(),
            stages.len()
        ));
    }
    for (i, (p, s)) in plan.stages.iter().zip(stages).enumerate() {
        if p.index != s.index {
            return mismatch(format!(
                "stages[{i}]: index {} where the model's stage {} was expected",
                p.index, s.index
            ));
        }
        let c = channels(g, s.output());
        if p.blocks != s.blocks.len() || p.channels != c {
            return mismatch(format!(
                "stage {}: the plan has {} blocks of {} channels, the model {} blocks of {} channels",
                p.index,
                p.blocks,
                p.channels,
                s.blocks.len(),
                c
            ));
        }
        for b in &p.branches {
            if b.depth == 0 || b.depth > p.blocks || b.width == 0 {
                return mismatch(format!(
                    "stage {}: branch on {} has depth {} and width {} (the stage has {} blocks)",
                    p.index, b.processor, b.depth, b.width, p.blocks
                ));
            }
            if b.project_to == Some(0) {
                return mismatch(format!(
                    "stage {}: branch on {} has project_to 0; a branch projects to at least 1 channel",
                    p.index, b.processor
                ));
            }
            if b.width > p.channels || b.project_to.is_some_and(|w| w > p.channels) {
                return mismatch(format!(
                    "stage {}: branch on {} has width {}{}, beyond the stage's {} channels",
                    p.index,
                    b.processor,
                    b.width,
                    b.project_to.map_or(String::new(), |w| format!(" (project_to {w})")),
                    p.channels
                ));
            }
            if !plan.processors.contains(&b.processor) {
                return mismatch(format!(
                    "stage {}: branch processor `{}` is not among the plan's processors ({})",
                    p.index,
                    b.processor,
                    plan.processors.join(", ")
                ));
            }
        }
    }
    for share in &plan.stem.split {
        if !plan.processors.contains(&share.processor) {
            return mismatch(format!(
                "stem: split processor `{}` is not among the plan's processors ({})",
                share.processor,
                plan.processors.join(", ")
            ));
        }
    }
    Ok(())
}

/// The stem's chain to split as `plan` says, checked against `g`; `None`
/// when the plan keeps the stem whole.
fn stem_chain(g: &Graph, stem: &graph_ir::analysis::Segment, plan: &Plan) -> Result<Option<Chain>, BranchError> {
    if plan.stem.split.is_empty() {
        return Ok(None);
    }
    let Some(chain) = crate::stem_split::chain(g, stem) else {
        return Err(BranchError::Mismatch {
            reason:
                "the plan splits the stem, but the model's stem does not start with a convolution that can be split"
                    .into(),
        });
    };
    let total: usize = plan.stem.split.iter().map(|s| s.channels).sum();
    if total != chain.channels || plan.stem.split.iter().any(|s| s.channels == 0) {
        return Err(BranchError::Mismatch {
            reason: format!(
                "the plan splits the stem into {:?} channels; its first convolution has {}",
                plan.stem.split.iter().map(|s| s.channels).collect::<Vec<_>>(),
                chain.channels
            ),
        });
    }
    Ok(Some(chain))
}

/// The branched graph of `plan` over `g`; new layers' weights come from `seed`.
pub fn apply_plan(g: &Graph, plan: &Plan, seed: u64) -> Result<Graph, BranchError> {
    let structure = analyze(g)?;
    check_plan(g, &structure.stages, plan)?;
    let stem = stem_chain(g, &structure.stem, plan)?;
    let mut out = g.clone();
    let mut moved: HashMap<Outlet, Outlet> = HashMap::new();
    let mut whole_processor: HashMap<NodeId, String> = HashMap::new();
    for (stage, sp) in structure.stages.iter().zip(&plan.stages) {
        let mut stage = stage.clone();
        if let Some(new) = moved.get(&stage.blocks[0].segment.input) {
            stage.blocks[0].segment.input = *new;
        }
        if sp.branches.is_empty() {
            for id in stage.nodes() {
                whole_processor.insert(id, sp.processor.clone());
            }
            continue;
        }
        let mut patch = Patch::new();
        let mut outs = Vec::new();
        let mut built_width = 0;
        let widths: Vec<usize> = sp.branches.iter().map(|b| b.width).collect();
        let split = shares(channels(&out, stage.output()), &widths, plan.settings.width_multiple);
        for (i, bp) in sp.branches.iter().enumerate() {
            let spec = BranchSpec {
                depth: bp.depth,
                width: bp.width,
                project_to: match plan.settings.merge {
                    Merge::Project => Some(split[i]),
                    Merge::Concat => None,
                },
                weights: true,
                multiple: plan.settings.width_multiple,
            };
            let prefix = format!("s{}.b{i}.", sp.index);
            let branch = build_branch(&out, &stage, &spec, seed, &prefix)?;
            built_width += channels(&branch, branch.outputs()[0].1);
            let tags = [
                (keys::PROCESSOR, bp.processor.clone()),
                (keys::MEETING_POINT, "false".to_string()),
                (keys::STAGE, sp.index.to_string()),
                (keys::BRANCH, i.to_string()),
            ];
            outs.push(splice(&mut patch, &branch, stage.input().into(), &tags)?);
        }
        let merge = patch.add_node(format!("s{}.merge", sp.index), Op::Concat(Concat { axis: 1 }), outs);
        for (k, v) in [
            (keys::PROCESSOR, plan.primary.clone()),
            (keys::MEETING_POINT, "true".to_string()),
            (keys::STAGE, sp.index.to_string()),
        ] {
            patch.annotate_new(merge, k, v);
        }
        let old = stage.output();
        patch.shunt(old, merge.out(0));
        if plan.settings.merge == Merge::Concat {
            widen(&out, &mut patch, old, built_width, seed, sp.index)?;
        }
        for id in stage.nodes().into_iter().rev() {
            patch.remove(id);
        }
        let created = out.apply(patch)?;
        let merge_id = *created
            .iter()
            .find(|id| out.node(**id).name == format!("s{}.merge", sp.index))
            .ok_or_else(|| BranchError::Mismatch {
                reason: format!("stage {}: merge node was not created", sp.index),
            })?;
        moved.insert(old, merge_id.out(0));
    }
    if let Some(chain) = &stem {
        crate::stem_split::apply(&mut out, chain, &plan.stem.split, &plan.primary)?;
    }
    for id in out.node_ids() {
        let node = out.node(id);
        if matches!(node.op, Op::Const(_)) || node.annotations.contains_key(keys::PROCESSOR) {
            continue;
        }
        let p = whole_processor
            .get(&id)
            .cloned()
            .unwrap_or_else(|| plan.primary.clone());
        out.annotate(id, keys::PROCESSOR, p);
        out.annotate(id, keys::MEETING_POINT, "false");
    }
    out.metadata.insert("stretch.plan".into(), plan_summary(plan));
    out.metadata
        .insert(keys::ORIGINAL_MACS.into(), g.total_cost().macs.to_string());
    if let Some(f) = g.fingerprint() {
        out.metadata.insert(keys::ORIGINAL_FINGERPRINT.into(), f);
    }
    out.check()?;
    Ok(out)
}

fn plan_summary(plan: &Plan) -> String {
    let stages: Vec<String> = plan
        .stages
        .iter()
        .map(|s| {
            if s.branches.is_empty() {
                format!("s{}:{}", s.index, s.processor)
            } else {
                let b: Vec<String> = s
                    .branches
                    .iter()
                    .map(|b| format!("{}(d{} w{})", b.processor, b.depth, b.width))
                    .collect();
                format!("s{}:{}", s.index, b.join("+"))
            }
        })
        .collect();
    format!(
        "{} {:?} on {}: {}",
        plan.schema,
        plan.settings.merge,
        plan.device,
        stages.join(" ")
    )
}

/// Copies `branch` (one input, one output) into `patch`, its input read from
/// `input`; returns the branch output. Non-constant nodes get `tags`.
fn splice(
    patch: &mut Patch,
    branch: &Graph,
    input: PatchOutlet,
    tags: &[(&str, String)],
) -> Result<PatchOutlet, BranchError> {
    let mut map: HashMap<Outlet, PatchOutlet> = HashMap::new();
    for id in branch.topo_order()? {
        let node = branch.node(id);
        match &node.op {
            Op::Input(_) => {
                map.insert(id.out(0), input);
            }
            Op::Const(t) => {
                map.insert(id.out(0), patch.add_const(node.name.clone(), t.clone()));
            }
            op => {
                let inputs = node.inputs.iter().map(|o| map[o]).collect();
                let new = patch.add_node(node.name.clone(), op.clone(), inputs);
                for (k, v) in tags {
                    patch.annotate_new(new, *k, v.clone());
                }
                for slot in 0..node.outputs.len() {
                    map.insert(id.out(slot), new.out(slot));
                }
            }
        }
    }
    let out = branch.outputs()[0].1;
    Ok(map[&out])
}

/// `concat` merge: the layers reading `old` (now `width` channels wide) get
/// new weights of the wider shape, through channel-preserving ops up to the
/// first convolution or fully connected layer.
fn widen(g: &Graph, patch: &mut Patch, old: Outlet, width: usize, seed: u64, stage: usize) -> Result<(), BranchError> {
    let unsupported = |id: NodeId, reason: &str| BranchError::Unsupported {
        stage,
        node: g.node(id).name.clone(),
        op: g.node(id).op.name(),
        reason: format!("{reason}; use --merge project"),
    };
    let mut frontier = vec![old];
    while let Some(o) = frontier.pop() {
        for (id, _) in g.consumers(o) {
            let node = g.node(id);
            let name = node.name.clone();
            match &node.op {
                Op::Conv(c) => {
                    if c.group != 1 {
                        return Err(unsupported(id, "a grouped or depthwise conv reads the widened merge"));
                    }
                    let w = g.fact(node.inputs[1]).map(|f| f.shape.clone()).unwrap_or_default();
                    let t = kaiming(vec![w[0], width, w[2], w[3]], seed, &format!("{name}.weight.widened"));
                    let new = patch.add_const(format!("{name}.weight.widened"), t);
                    patch.shunt(node.inputs[1], new);
                }
                Op::Gemm(gm) => {
                    let w = g.fact(node.inputs[1]).map(|f| f.shape.clone()).unwrap_or_default();
                    let k_old = if gm.trans_b { w[1] } else { w[0] };
                    let c_old = channels(g, old).max(1);
                    if k_old % c_old != 0 {
                        return Err(unsupported(
                            id,
                            "a fully connected layer reads the merge mixed with other values",
                        ));
                    }
                    let k = k_old / c_old * width;
                    let shape = if gm.trans_b { vec![w[0], k] } else { vec![k, w[1]] };
                    let t = kaiming(shape, seed, &format!("{name}.weight.widened"));
                    let new = patch.add_const(format!("{name}.weight.widened"), t);
                    patch.shunt(node.inputs[1], new);
                }
                Op::BatchNorm(_) => {
                    for (slot, t) in (1..5).zip(batch_norm(width)) {
                        let new = patch.add_const(format!("{name}.param{slot}.widened"), t);
                        patch.shunt(node.inputs[slot], new);
                    }
                    frontier.push(id.out(0));
                }
                Op::Unary(_) | Op::Pool(_) | Op::GlobalAveragePool(_) | Op::GlobalMaxPool(_) | Op::Flatten(_) => {
                    frontier.push(id.out(0))
                }
                _ => return Err(unsupported(id, "this op cannot take a wider input")),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{BranchPlan, Counts, Part, SCHEMA, Settings, StagePlan, Totals};

    fn resnet() -> Graph {
        let o = graph_ir::zoo::ZooOptions {
            input_size: 32,
            classes: 10,
        };
        graph_ir::zoo::build("resnet-mini", &o).unwrap()
    }

    fn plan(g: &Graph, merge: Merge, widths: &[(usize, usize)]) -> Plan {
        let s = analyze(g).unwrap();
        let stages = s
            .stages
            .iter()
            .map(|st| StagePlan {
                index: st.index,
                blocks: st.blocks.len(),
                channels: channels(g, st.output()),
                input_shape: vec![],
                output_shape: vec![],
                macs: 0,
                original_ms: Default::default(),
                branches: widths
                    .iter()
                    .enumerate()
                    .map(|(i, (d, f))| BranchPlan {
                        processor: format!("p{i}"),
                        depth: (*d).min(st.blocks.len()),
                        width: channels(g, st.output()) * f / 4,
                        project_to: None,
                        macs: 0,
                        params: 0,
                        predicted_ms: 0.0,
                    })
                    .collect(),
                processor: "p0".into(),
                reason: None,
                predicted_ms: 0.0,
                candidates: Counts::default(),
                widened_macs: 0,
                work_ratio: 1.0,
            })
            .collect();
        let part = Part {
            processor: "p0".into(),
            predicted_ms: 0.0,
            widened_macs: 0,
            split: Vec::new(),
        };
        Plan {
            model_fingerprint: None,
            schema: SCHEMA.into(),
            predicted_by: "test".into(),
            model: "r".into(),
            device: "d".into(),
            processors: vec!["p0".into(), "p1".into()],
            precisions: Default::default(),
            primary: "p0".into(),
            settings: Settings {
                merge,
                ..Settings::default()
            },
            stem: part.clone(),
            stages,
            head: part,
            totals: Totals {
                original_ms: Default::default(),
                fastest_single: "p0".into(),
                plan_ms: 0.0,
                ideal_ms: 0.0,
                speedup: 1.0,
                ideal_speedup: 1.0,
                original_macs: 0,
                plan_macs: 0,
                work_ratio: 1.0,
            },
        }
    }

    #[test]
    fn absurd_widths_and_wrong_indices_are_refused_before_building() {
        let g = resnet();
        for wide in [2 * channels(&g, analyze(&g).unwrap().stages[1].output()), 100_000] {
            let mut p = plan(&g, Merge::Project, &[(3, 3), (2, 2)]);
            p.stages[1].branches[0].width = wide;
            let e = apply_plan(&g, &p, 1).unwrap_err().to_string();
            assert!(
                e.contains(&format!("stage 1: branch on p0 has width {wide}, beyond the stage's")),
                "{e}"
            );
        }
        let mut p = plan(&g, Merge::Concat, &[(3, 3), (2, 2)]);
        p.stages[0].branches[1].project_to = Some(4096);
        let e = apply_plan(&g, &p, 1).unwrap_err().to_string();
        assert!(e.contains("(project_to 4096)"), "{e}");
        p.stages[0].branches[1].project_to = Some(0);
        let e = apply_plan(&g, &p, 1).unwrap_err().to_string();
        assert!(
            e.contains("has project_to 0; a branch projects to at least 1 channel"),
            "{e}"
        );
        let mut p = plan(&g, Merge::Project, &[(3, 3), (2, 2)]);
        p.stages[2].index = 7;
        let e = apply_plan(&g, &p, 1).unwrap_err().to_string();
        assert!(
            e.contains("stages[2]: index 7 where the model's stage 2 was expected"),
            "{e}"
        );
    }

    #[test]
    fn both_merges_give_a_checked_annotated_graph() {
        let g = resnet();
        for merge in [Merge::Project, Merge::Concat] {
            let p = plan(&g, merge, &[(3, 3), (2, 2)]);
            let b = apply_plan(&g, &p, 1).unwrap_or_else(|e| panic!("{merge:?}: {e}"));
            b.check().unwrap();
            assert_eq!(b.fact(b.outputs()[0].1).unwrap().shape, vec![1, 10]);
            let merges = b
                .node_ids()
                .into_iter()
                .filter(|id| b.node(*id).annotations.get(keys::MEETING_POINT).map(String::as_str) == Some("true"))
                .count();
            assert_eq!(merges, 3);
            for id in b.node_ids() {
                let n = b.node(id);
                if !matches!(n.op, Op::Const(_) | Op::Input(_)) {
                    assert!(
                        n.annotations.contains_key(keys::PROCESSOR),
                        "{} has no processor",
                        n.name
                    );
                }
            }
        }
    }
}
