//! Property: random ResNet- and MobileNetV2-style graphs built in code, planned
//! on random settings, branch into graphs that pass `check()`; with either
//! merge their MACs change by exactly what the plan reports (with `concat`,
//! the layers after a merge included).

use branching::plan::{Merge, Settings};
use branching::{apply_plan, search};
use graph_ir::builder::{Builder, ConvSpec};
use graph_ir::ops::UnaryOp;
use graph_ir::{Graph, Outlet};
use predictor::{DeviceModel, DeviceProfile};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::HashMap;

fn device() -> DeviceModel {
    let p = |name: &str, gflops: f64, kind: &str| {
        format!(
            "[processors.{name}]\nkind = \"{kind}\"\npeak_gflops = {{ value = {gflops}, source = \"t\" }}\nefficiency = {{ value = 1.0, source = \"t\" }}\nbandwidth_gbs = {{ value = 20.0, source = \"t\" }}\nkernel_overhead_us = {{ value = 1.0, source = \"t\" }}\n"
        )
    };
    let text = format!(
        "name = \"t\"\ndescription = \"t\"\n{}{}{}[[links]]\nbetween = [\"a\", \"b\"]\nlatency_us = {{ value = 5.0, source = \"t\" }}\nbandwidth_gbs = {{ value = 10.0, source = \"t\" }}\n[[links]]\nbetween = [\"a\", \"c\"]\nlatency_us = {{ value = 5.0, source = \"t\" }}\nbandwidth_gbs = {{ value = 10.0, source = \"t\" }}\n[[links]]\nbetween = [\"b\", \"c\"]\nlatency_us = {{ value = 5.0, source = \"t\" }}\nbandwidth_gbs = {{ value = 10.0, source = \"t\" }}\n",
        p("a", 10.0, "cpu"),
        p("b", 14.0, "gpu"),
        p("c", 8.0, "dsp")
    );
    DeviceModel::analytic(DeviceProfile::parse(&text, "test").unwrap())
}

fn relu6(b: &mut Builder, n: &str, x: Outlet) -> Outlet {
    b.unary(
        n,
        x,
        UnaryOp::Clip {
            min: Some(0.0),
            max: Some(6.0),
        },
    )
    .unwrap()
}

fn resnet(depths: &[usize], base: usize) -> Graph {
    let mut b = Builder::new("r");
    let x = b.input("x", &[1, 3, 64, 64]).unwrap();
    let mut y = b.conv_bn("stem", x, ConvSpec::new(base, 3, 2), true).unwrap();
    for (s, d) in depths.iter().enumerate() {
        for i in 0..*d {
            let stride = if i == 0 { 2 } else { 1 };
            y = b.basic_block(&format!("l{s}.{i}"), y, base << s, stride).unwrap();
        }
    }
    let y = b.classifier("head", y, 10).unwrap();
    b.finish("y", y).unwrap()
}

fn mbnet(depths: &[usize], expand: usize) -> Graph {
    let mut b = Builder::new("m");
    let x = b.input("x", &[1, 3, 64, 64]).unwrap();
    let s = b.conv_bn("stem", x, ConvSpec::new(16, 3, 2), false).unwrap();
    let mut y = relu6(&mut b, "stem.act", s);
    let mut c = 16;
    for (s, d) in depths.iter().enumerate() {
        let out = 24 + 16 * s;
        for i in 0..*d {
            let n = format!("l{s}.{i}");
            let stride = if i == 0 { 2 } else { 1 };
            let mid = c * expand;
            let e = b
                .conv_bn(&format!("{n}.e"), y, ConvSpec::new(mid, 1, 1), false)
                .unwrap();
            let e = relu6(&mut b, &format!("{n}.e.act"), e);
            let w = b
                .conv_bn(&format!("{n}.dw"), e, ConvSpec::new(mid, 3, stride).group(mid), false)
                .unwrap();
            let w = relu6(&mut b, &format!("{n}.dw.act"), w);
            let p = b
                .conv_bn(&format!("{n}.p"), w, ConvSpec::new(out, 1, 1), false)
                .unwrap();
            y = if stride == 1 && c == out {
                b.add(&format!("{n}.add"), p, y).unwrap()
            } else {
                p
            };
            c = out;
        }
    }
    let y = b.classifier("head", y, 10).unwrap();
    b.finish("y", y).unwrap()
}

/// Plans `g`, branches it, and checks the result: the graph passes
/// `check()`, its output keeps its shape, and its MACs change by exactly
/// what the plan reports (with `concat`, the layers after a merge
/// included). Returns the plan.
fn plan_and_check(g: &Graph, three: bool, settings: &Settings) -> Result<branching::Plan, TestCaseError> {
    let model = device();
    let procs: Vec<String> = if three {
        vec!["a".into(), "b".into(), "c".into()]
    } else {
        vec!["a".into(), "b".into()]
    };
    let (plan, _) = search(g, "random", &model, &procs, &HashMap::new(), settings, false).unwrap();
    let b = apply_plan(g, &plan, 7).unwrap();
    b.check().unwrap();
    prop_assert_eq!(b.fact(b.outputs()[0].1).unwrap().shape.clone(), vec![1, 10]);
    let delta: i64 = plan
        .stages
        .iter()
        .map(|s| {
            if s.branches.is_empty() {
                s.widened_macs
            } else {
                s.branches.iter().map(|x| x.macs as i64).sum::<i64>() - s.macs as i64
            }
        })
        .sum::<i64>()
        + plan.head.widened_macs;
    prop_assert_eq!(b.total_cost().macs as i64 - g.total_cost().macs as i64, delta);
    prop_assert_eq!(plan.macs_delta(), delta);
    Ok(plan)
}

#[test]
fn branches_as_deep_and_wide_as_their_stage_are_never_faster_and_the_stages_stay_whole() {
    let settings = Settings {
        min_depth: 0.9435399852900317,
        min_width: 0.9230202651578937,
        alpha: 10.0,
        capacity: [0.1, 3.5],
        beta: 10.0,
        merge: Merge::Project,
        width_multiple: 8,
        width_steps: 16,
        split_stem: true,
    };
    let plan = plan_and_check(&resnet(&[2, 2], 16), false, &settings).unwrap();
    for s in &plan.stages {
        let reason = s.reason.as_deref().unwrap_or_default();
        assert!(
            s.branches.is_empty() && reason.contains("not faster than the whole stage"),
            "stage {}: {reason}",
            s.index
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn branched_graphs_check_and_macs_add_up(
        mobile in any::<bool>(),
        depths in proptest::collection::vec(2usize..4, 2..4),
        base in prop::sample::select(vec![16usize, 24, 32]),
        three in any::<bool>(),
        min_depth in 0.3f64..1.0,
        min_width in 0.3f64..1.0,
        concat in any::<bool>(),
        width_multiple in prop::sample::select(vec![8usize, 16, 32]),
    ) {
        let g = if mobile { mbnet(&depths, 1 + base / 16) } else { resnet(&depths, base) };
        let merge = if concat { Merge::Concat } else { Merge::Project };
        let settings = Settings { min_depth, min_width, alpha: 10.0, capacity: [0.1, 3.5], beta: 10.0, merge, width_multiple, width_steps: 16, split_stem: true };
        let plan = plan_and_check(&g, three, &settings)?;
        let b = apply_plan(&g, &plan, 7).unwrap();
        for id in b.node_ids() {
            let n = b.node(id);
            let at = n.name.strip_prefix('s').and_then(|r| {
                let (i, rest) = r.split_once(".b")?;
                Some((i.parse::<usize>().ok()?, rest.split_once('.')?.0.parse::<usize>().ok()?))
            });
            let scaled = at.is_some_and(|(i, j)| plan.stages[i].branches[j].width < plan.stages[i].channels);
            if let (true, false, graph_ir::ops::Op::Conv(c)) = (scaled, n.name.contains("project"), &n.op) {
                let cout = n.outputs[0].shape[1];
                let cin = b.fact(n.inputs[0]).unwrap().shape[1];
                prop_assert!(cout.is_multiple_of(width_multiple) || c.group == cin, "{}: {} output channels, not a multiple of {}", n.name, cout, width_multiple);
            }
        }
        for s in &plan.stages {
            for x in &s.branches {
                prop_assert!(x.width.is_multiple_of(width_multiple) || x.width == s.channels, "stage {}: width {} not a multiple of {}", s.index, x.width, width_multiple);
            }
        }
        if min_depth < 0.6 && min_width < 0.6 && width_multiple == 8 {
            prop_assert!(plan.branched_stages() > 0, "nothing branched: {:?}", plan.stages.iter().map(|s| s.reason.clone()).collect::<Vec<_>>());
        }
    }

    /// Settings as a user would pass them: whatever the search keeps
    /// honours the capacity band and beats the whole stage.
    #[test]
    fn plans_under_realistic_settings_honour_their_constraints(
        mobile in any::<bool>(),
        depths in proptest::collection::vec(2usize..4, 2..4),
        base in prop::sample::select(vec![16usize, 24, 32]),
        three in any::<bool>(),
        min_depth in 0.4f64..0.8,
        min_width in 0.4f64..0.8,
        alpha in 0.05f64..0.5,
        beta in 1.0f64..1.5,
        lo in 0.8f64..1.0,
        hi in 1.1f64..1.3,
        concat in any::<bool>(),
    ) {
        let g = if mobile { mbnet(&depths, 1 + base / 16) } else { resnet(&depths, base) };
        let merge = if concat { Merge::Concat } else { Merge::Project };
        let settings = Settings { min_depth, min_width, alpha, capacity: [lo, hi], beta, merge, width_multiple: 8, width_steps: 16, split_stem: true };
        let plan = plan_and_check(&g, three, &settings)?;
        for s in plan.stages.iter().filter(|s| !s.branches.is_empty() && merge == Merge::Project) {
            let ratio = s.branches.iter().map(|b| b.macs).sum::<u64>() as f64 / s.macs as f64;
            prop_assert!((lo..=hi).contains(&ratio), "stage {}: MACs ratio {} outside [{}, {}]", s.index, ratio, lo, hi);
            prop_assert!(s.predicted_ms < s.original_ms[&s.processor], "stage {} not faster than whole", s.index);
        }
        prop_assert!(plan.totals.plan_ms > 0.0);
    }
}
