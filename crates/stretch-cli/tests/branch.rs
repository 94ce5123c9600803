//! `stretch plan`, `stretch branch` and `stretch stretch` on the fixtures:
//! every branched model passes onnx.checker (full check), runs in
//! onnxruntime with the original's output shape, carries its annotations,
//! and `stretch inspect` lists its branches.

mod common;

use common::*;
use serde_json::Value;

const MODELS: [&str; 6] = [
    "resnet18",
    "resnet34",
    "resnet50",
    "mobilenet_v2",
    "efficientnet_b0",
    "regnet_x_1_6gf",
];

#[test]
fn every_fixture_branches_into_a_runnable_model_in_both_merge_modes() {
    let dir = scratch("branch-fixtures");
    let device = arg(&repo().join("configs/devices/host.toml"));
    let mut outputs = Vec::new();
    for m in MODELS {
        let model = arg(&repo().join(format!("fixtures/models/{m}.onnx")));
        for merge in ["project", "concat"] {
            let out = dir.join(format!("{m}-{merge}.onnx"));
            let plan = dir.join(format!("{m}-{merge}.json"));
            let text = stretch_ok(&[
                "stretch",
                &model,
                "--device",
                &device,
                "--processors",
                "cpu0,cpu1",
                "--merge",
                merge,
                "--random-weights",
                "1",
                "--plan-out",
                &arg(&plan),
                "-o",
                &arg(&out),
            ]);
            assert!(text.contains("predicted, not measured"), "{text}");
            let doc: Value = serde_json::from_str(&std::fs::read_to_string(&plan).expect("plan")).expect("JSON");
            assert_eq!(doc["schema"], "stretch.plan/1");
            let branched = doc["stages"]
                .as_array()
                .expect("stages")
                .iter()
                .filter(|s| !s["branches"].as_array().expect("branches").is_empty())
                .count();
            assert!(branched > 0, "{m} {merge}: nothing branched:\n{text}");
            let inspect = stretch_ok(&["inspect", &arg(&out)]);
            assert!(
                inspect.contains("branched model:") && inspect.contains("cpu1"),
                "{inspect}"
            );
            outputs.push(arg(&out));
        }
    }
    let mut check = vec!["check"];
    check.extend(outputs.iter().map(String::as_str));
    reference(&check);
    let mut run = vec!["run"];
    run.extend(outputs.iter().map(String::as_str));
    let ran = reference(&run);
    assert_eq!(
        ran.matches("output 0 shape [1, 1000], finite").count(),
        outputs.len(),
        "{ran}"
    );
}

#[test]
fn plan_then_branch_keeps_the_plan_and_marks_meeting_points() {
    let dir = scratch("branch-plan");
    let model = arg(&repo().join("fixtures/models/resnet50.onnx"));
    let device = arg(&repo().join("configs/devices/snapdragon855.toml"));
    let plan = arg(&dir.join("plan.json"));
    let text = stretch_ok(&[
        "plan",
        &model,
        "--device",
        &device,
        "--processors",
        "cpu,gpu,dsp",
        "-o",
        &plan,
    ]);
    assert!(text.contains("candidates:") && text.contains("considered"), "{text}");
    let out = arg(&dir.join("b.onnx"));
    stretch_ok(&["branch", &model, "--plan", &plan, "--random-weights", "2", "-o", &out]);
    let g = graph_ir::onnx::import_file(&out, &Default::default()).expect("import branched");
    let mut merges = 0;
    for id in g.node_ids() {
        let n = g.node(id);
        if matches!(n.op, graph_ir::Op::Const(_) | graph_ir::Op::Input(_)) {
            continue;
        }
        assert!(n.annotations.contains_key("processor"), "{} has no processor", n.name);
        if n.annotations.get("meeting_point").map(String::as_str) == Some("true") {
            merges += 1;
        }
    }
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&plan).expect("plan")).expect("JSON");
    let branched = doc["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .filter(|s| !s["branches"].as_array().expect("b").is_empty())
        .count();
    let stem_split = doc["stem"].get("split").is_some() as usize;
    assert_eq!(
        merges,
        branched + stem_split,
        "one meeting point per branched stage and split stem"
    );
    let explain = stretch_ok(&[
        "plan",
        &model,
        "--device",
        &device,
        "--processors",
        "cpu,dsp",
        "--explain",
    ]);
    assert!(
        explain.lines().filter(|l| l.starts_with("stage ")).count() > 10,
        "{explain}"
    );
    let chart = arg(&dir.join("combos.svg"));
    let all = stretch_ok(&[
        "plan",
        &model,
        "--device",
        &device,
        "--all-combinations",
        "--chart",
        &chart,
    ]);
    let svg = std::fs::read_to_string(&chart).expect("chart");
    assert!(svg.starts_with("<svg") && svg.contains("cpu+dsp+gpu"), "{svg}");
    for combo in ["cpu+dsp+gpu", "cpu+gpu", "dsp"] {
        assert!(all.contains(combo), "{all}");
    }
}

#[test]
fn bad_plans_and_options_are_named() {
    let dir = scratch("branch-errors");
    let r18 = arg(&repo().join("fixtures/models/resnet18.onnx"));
    let r50 = arg(&repo().join("fixtures/models/resnet50.onnx"));
    let device = arg(&repo().join("configs/devices/host.toml"));
    let err = |args: &[&str]| -> String {
        let o = stretch(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = err(&["plan", &r18, "--device", &device, "--processors", "cpu0,npu"]);
    assert!(e.contains("unknown processor `npu`") && e.contains("cpu0, cpu1"), "{e}");
    let e = err(&["plan", &r18, "--device", &device, "--min-width", "1.5"]);
    assert!(e.contains("min-width") && e.contains("(0, 1]"), "{e}");
    let e = err(&["plan", &r18, "--device", &device, "--min-depth", "0"]);
    assert!(e.contains("min-depth"), "{e}");
    let plan = arg(&dir.join("r50.json"));
    stretch_ok(&["plan", &r50, "--device", &device, "-o", &plan]);
    let e = err(&["branch", &r18, "--plan", &plan, "-o", &arg(&dir.join("x.onnx"))]);
    assert!(
        e.contains("does not match the model") && e.contains("resnet50.onnx") && e.contains("fingerprint"),
        "{e}"
    );
    let r18_plan = dir.join("r18.json");
    stretch_ok(&["plan", &r18, "--device", &device, "-o", &arg(&r18_plan)]);
    let copy = dir.join("r18-converted.onnx");
    stretch_ok(&["convert", &r18, "-o", &arg(&copy)]);
    let branched = arg(&dir.join("r18-branched.onnx"));
    stretch_ok(&[
        "branch",
        &arg(&copy),
        "--plan",
        &arg(&r18_plan),
        "--random-weights",
        "1",
        "-o",
        &branched,
    ]);
    let e = err(&[
        "bench",
        &branched,
        "--original",
        &r50,
        "--random-weights",
        "1",
        "--runs",
        "1",
    ]);
    assert!(e.contains("is not the model") && e.contains("resnet50.onnx"), "{e}");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&r18_plan).expect("plan")).expect("json");
    let branch = doc["stages"]
        .as_array_mut()
        .expect("stages")
        .iter_mut()
        .find_map(|s| s["branches"].as_array_mut().and_then(|b| b.first_mut()))
        .expect("a branched stage");
    branch["processor"] = "npu".into();
    std::fs::write(&r18_plan, doc.to_string()).expect("write");
    let e = err(&[
        "branch",
        &r18,
        "--plan",
        &arg(&r18_plan),
        "-o",
        &arg(&dir.join("x.onnx")),
    ]);
    assert!(
        e.contains("processor `npu` is not one of the plan's processors") && e.contains("stages["),
        "{e}"
    );
    std::fs::write(dir.join("bad.json"), r#"{"schema": "other/9"}"#).expect("write");
    let e = err(&[
        "branch",
        &r18,
        "--plan",
        &arg(&dir.join("bad.json")),
        "-o",
        &arg(&dir.join("x.onnx")),
    ]);
    assert!(e.contains("bad.json") && e.contains("other/9"), "{e}");
    let one = stretch_ok(&["plan", &r18, "--device", &device, "--processors", "cpu0"]);
    assert!(one.contains("one processor: nothing to branch"), "{one}");
}

/// A plan that records no model fingerprint is applied with a warning that
/// names the plan and says what is still checked; one that records it is
/// applied without.
#[test]
fn a_plan_without_a_fingerprint_is_applied_with_a_warning() {
    let dir = scratch("branch-no-fingerprint");
    let r18 = arg(&repo().join("fixtures/models/resnet18.onnx"));
    let device = arg(&repo().join("configs/devices/host.toml"));
    let plan = dir.join("r18.json");
    stretch_ok(&["plan", &r18, "--device", &device, "-o", &arg(&plan)]);
    let branch = |plan: &std::path::Path| {
        let o = stretch(&["branch", &r18, "--plan", &arg(plan), "-o", &arg(&dir.join("b.onnx"))]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let quiet = branch(&plan);
    assert!(!quiet.contains("fingerprint"), "{quiet}");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&plan).expect("plan")).expect("json");
    assert!(
        doc.as_object_mut()
            .expect("object")
            .remove("model_fingerprint")
            .is_some()
    );
    let old = dir.join("old.json");
    std::fs::write(&old, doc.to_string()).expect("write");
    let warned = branch(&old);
    assert!(
        warned.contains(&format!(
            "warning: {}: the plan records no model fingerprint",
            old.display()
        )) && warned.contains("only its stages, blocks and channels are checked"),
        "{warned}"
    );
    assert_eq!(warned.lines().count(), 1, "{warned}");
}

#[test]
fn a_processor_named_twice_is_refused() {
    let dir = scratch("branch-duplicates");
    let r18 = arg(&repo().join("fixtures/models/resnet18.onnx"));
    let device = arg(&repo().join("configs/devices/host.toml"));
    let out = arg(&dir.join("x.onnx"));
    for args in [
        vec!["plan", &r18, "--device", &device, "--processors", "cpu0,cpu0"],
        vec![
            "stretch",
            &r18,
            "--device",
            &device,
            "--processors",
            "cpu0,cpu1,cpu0",
            "-o",
            &out,
        ],
    ] {
        let o = stretch(&args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success(),
            "{args:?} succeeded:\n{}",
            String::from_utf8_lossy(&o.stdout)
        );
        assert!(
            e.starts_with("error: ") && e.lines().count() == 1 && e.contains("`cpu0` is named more than once"),
            "{e}"
        );
    }
    assert!(!dir.join("x.onnx").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The host profile names the CPU it was measured on: `plan` warns once,
/// after a successful search, when this machine's CPU differs, and not
/// when it matches; a refused plan prints only its error.
#[test]
fn plan_warns_once_when_the_profile_was_measured_on_another_cpu() {
    let dir = scratch("branch-measured-on");
    let r18 = arg(&repo().join("fixtures/models/resnet18.onnx"));
    let text = std::fs::read_to_string(repo().join("configs/devices/host.toml")).expect("host profile");
    let start =
        text.find("measured_on = { cpu = \"").expect("host.toml names its CPU") + "measured_on = { cpu = \"".len();
    let end = start + text[start..].find('"').expect("closing quote");
    let this = predictor::profiler::host::this_cpu_model();
    let regressors = repo().join("data/profiles/host").display().to_string();
    for (cpu, warns) in [("Some Other CPU 9000", true), (this.as_str(), false)] {
        let profile = dir.join(if warns { "other.toml" } else { "same.toml" });
        let body = format!("{}{cpu}{}", &text[..start], &text[end..])
            .replace("../../data/profiles/host", &regressors)
            .lines()
            .filter(|l| !l.starts_with("per_cpu"))
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(&profile, body).expect("write profile");
        let device = arg(&profile);
        let o = stretch(&["plan", &r18, "--device", &device, "--processors", "cpu0,cpu1"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let e = String::from_utf8_lossy(&o.stderr);
        let warnings = e.matches("warning: profile `host` was measured on").count();
        assert_eq!(warnings, usize::from(warns), "{cpu}: {e}");
        if warns {
            assert!(e.contains("Some Other CPU 9000") && e.contains(&this), "{e}");
        }
        let refused = stretch(&["plan", &r18, "--device", &device, "--processors", "cpu0,cpu0"]);
        assert_eq!(String::from_utf8_lossy(&refused.stderr).lines().count(), 1);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn all_combinations_draws_from_the_listed_processors() {
    let model = arg(&repo().join("fixtures/models/resnet18.onnx"));
    let device = arg(&repo().join("configs/devices/snapdragon855.toml"));
    let text = stretch_ok(&[
        "plan",
        &model,
        "--device",
        &device,
        "--processors",
        "gpu,cpu",
        "--all-combinations",
    ]);
    let rows: Vec<&str> = text
        .lines()
        .skip(3)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(rows, ["gpu", "cpu", "gpu+cpu"], "{text}");
}

/// A VGG-style network: plain conv stages, and a classifier that flattens
/// the last `[N, 64, 8, 8]` map straight into a fully connected layer.
fn vgg_style() -> graph_ir::Graph {
    use graph_ir::builder::{Builder, ConvSpec};
    use graph_ir::ops::{Flatten, Gemm};
    let mut b = Builder::new("vgg");
    let mut y = b.input("x", &[1, 3, 64, 64]).unwrap();
    for (i, c) in [16, 32, 64].into_iter().enumerate() {
        y = b.conv_bn(&format!("s{i}.a"), y, ConvSpec::new(c, 3, 1), true).unwrap();
        y = b.conv_bn(&format!("s{i}.b"), y, ConvSpec::new(c, 3, 1), true).unwrap();
        y = b.max_pool(&format!("s{i}.pool"), y, 3, 2).unwrap();
    }
    let flat = b
        .node("flatten", graph_ir::Op::Flatten(Flatten { axis: 1 }), &[y])
        .unwrap();
    let gemm = || {
        graph_ir::Op::Gemm(Gemm {
            trans_b: true,
            ..Gemm::default()
        })
    };
    let (w1, b1) = (
        b.param("fc1.w", &[100, 4096]).unwrap(),
        b.param("fc1.b", &[100]).unwrap(),
    );
    let h = b.node("fc1", gemm(), &[flat, w1, b1]).unwrap();
    let h = b.relu("fc1.relu", h).unwrap();
    let (w2, b2) = (b.param("fc2.w", &[10, 100]).unwrap(), b.param("fc2.b", &[10]).unwrap());
    let out = b.node("fc2", gemm(), &[h, w2, b2]).unwrap();
    b.finish("y", out).unwrap()
}

/// `--merge concat` through the plan: a VGG-style model whose last stage's
/// merge is flattened into a fully connected layer branches into a file
/// onnx.checker and onnxruntime accept (the layer's input widens by the
/// merge's extra channels times the map's 64 positions), and every
/// fixture's concat plan branches the same way.
#[test]
fn concat_merges_flattened_into_a_fully_connected_layer_branch_correctly() {
    let dir = scratch("branch-concat-vgg");
    let device = arg(&repo().join("configs/devices/host.toml"));
    let vgg = dir.join("vgg.onnx");
    graph_ir::onnx::export_file(&vgg_style(), &vgg).unwrap();
    let mut models = vec![(arg(&vgg), "1,3,64,64".to_string())];
    for m in MODELS {
        models.push((
            arg(&repo().join(format!("fixtures/models/{m}.onnx"))),
            "1,3,64,64".into(),
        ));
    }
    let mut written = Vec::new();
    for (i, (m, shape)) in models.iter().enumerate() {
        let plan = dir.join(format!("plan{i}.json"));
        stretch_ok(&[
            "plan",
            m,
            "--input-shape",
            shape,
            "--random-weights",
            "1",
            "--device",
            &device,
            "--alpha",
            "1",
            "--merge",
            "concat",
            "-o",
            &arg(&plan),
        ]);
        let out = dir.join(format!("b{i}.onnx"));
        stretch_ok(&[
            "branch",
            m,
            "--input-shape",
            shape,
            "--random-weights",
            "1",
            "--plan",
            &arg(&plan),
            "-o",
            &arg(&out),
        ]);
        let p: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
        if i == 0 {
            let last = p["stages"].as_array().unwrap().last().unwrap().clone();
            assert!(
                !last["branches"].as_array().unwrap().is_empty(),
                "the VGG's last stage stayed whole: {last}"
            );
        }
        written.push(arg(&out));
    }
    let mut args = vec!["check"];
    args.extend(written.iter().map(String::as_str));
    reference(&args);
    let mut args = vec!["run"];
    args.extend(written.iter().map(String::as_str));
    reference(&args);
}
