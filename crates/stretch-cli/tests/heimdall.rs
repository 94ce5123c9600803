//! `stretch serve` and `stretch simulate` with a rendering task (Heimdall):
//! a short real run on tiny zoo models with the render kernel on one core,
//! the LG V50 scenario in the simulator, and one clear error per bad input.

mod common;

use common::{repo, scratch, stretch, stretch_ok};
use std::path::Path;

const CONFIG: &str = r#"
[[processor]]
name = "cpu0"
kind = "pool"
cores = "0"
[[processor]]
name = "cpu1"
kind = "pool"
cores = "1"
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn workload(extra_render: &str, extra_app: &str) -> String {
    format!(
        r#"seed = 1
duration_s = 2
[render]
processor = "cpu0"
fps = 30
render_ms = 2
{extra_render}
[[app]]
name = "mini"
model = "mini.onnx"
arrival = "closed"
fps = 20
slo_ms = 100
utility = {{ l0 = 1, beta = 50, gamma = 2 }}
frames = {{ variation = 0.2 }}
{extra_app}
[[app]]
name = "mb"
model = "mb.onnx"
arrival = "closed"
fps = 20
slo_ms = 200
"#
    )
}

fn zoo(dir: &Path) {
    for (kind, file) in [("resnet-mini", "mini.onnx"), ("mbnet-mini", "mb.onnx")] {
        let p = dir.join(file);
        stretch_ok(&[
            "zoo",
            kind,
            "--input-size",
            "32",
            "--classes",
            "10",
            "-o",
            p.to_str().unwrap(),
        ]);
    }
}

/// Both ways of driving a run: every worker pinned to a core of its own
/// (the workers schedule in turn) and a render worker left unpinned (one
/// scheduling thread hands work out).
#[test]
fn serve_renders_and_runs_every_render_policy_with_outputs_checked() {
    let dir = scratch("heimdall-serve");
    zoo(&dir);
    let unpinned = CONFIG.replacen("cores = \"0\"\n", "", 1);
    for (config, policies) in [
        (CONFIG, "whole,ops5,maxmin-utility,maxtotal-utility-offload"),
        (unpinned.as_str(), "maxtotal-utility-offload"),
    ] {
        serve_checked(&dir, config, policies);
    }
}

fn serve_checked(dir: &Path, config: &str, policies: &str) {
    let rc = write(dir, "rt.toml", config);
    let w = write(dir, "w.toml", &workload("offload_to = \"cpu1\"", ""));
    let out = stretch_ok(&[
        "serve",
        "--workload",
        &w,
        "--runtime-config",
        &rc,
        "--compare",
        policies,
        "--json",
    ]);
    let reports: serde_json::Value = serde_json::from_str(&out).unwrap();
    let reports = reports.as_array().unwrap();
    assert_eq!(reports.len(), policies.split(',').count());
    for r in reports {
        let render = &r["render"];
        assert!(render["frames"].as_u64().unwrap() >= 30, "{render}");
        assert_eq!(render["processor"], "cpu0");
        assert!(r["completed"].as_u64().unwrap() > 0, "{r}");
        assert_eq!(r["mismatches"], 0, "{r}");
        assert!(r["outputs_checked"].as_u64().unwrap() > 0, "{r}");
        for a in r["apps"].as_array().unwrap() {
            assert!(a["max_ms"].as_f64().unwrap() >= a["mean_ms"].as_f64().unwrap(), "{a}");
        }
    }
}

#[test]
fn simulate_the_lg_v50_scenario_keeps_rendering_where_whole_models_cannot() {
    let root = repo();
    let w = root.join("configs/workloads/heimdall_lg_v50.toml");
    let d = root.join("configs/devices/lg_v50.toml");
    let out = stretch_ok(&[
        "simulate",
        "--workload",
        w.to_str().unwrap(),
        "--device",
        d.to_str().unwrap(),
        "--compare",
        "whole,maxtotal-utility-offload",
        "--duration-s",
        "10",
        "--json",
    ]);
    let reports: serde_json::Value = serde_json::from_str(&out).unwrap();
    let fps = |i: usize| reports[i]["render"]["fps_mean"].as_f64().unwrap();
    assert!(fps(0) < 20.0, "whole models: {}", fps(0));
    assert!(fps(1) >= 29.9, "Heimdall: {}", fps(1));
    assert_eq!(reports[0]["kind"], "simulated");
}

/// (A model none of whose chunks fits between two frames is refused with
/// its shortest operator named: `multi_dnn::heimdall`'s unit tests, where the
/// operator times are set; here every operator of the tiny models fits.)
#[test]
fn bad_render_workloads_fail_with_one_line() {
    let dir = scratch("heimdall-errors");
    zoo(&dir);
    let rc = write(&dir, "rt.toml", CONFIG);
    let cases: Vec<(String, Vec<&str>, &str)> = vec![
        (
            workload("", "").replace("processor = \"cpu0\"", "processor = \"gpu\""),
            vec![],
            "render.processor: unknown processor 'gpu'",
        ),
        (
            workload("", "").replace("render_ms = 2", "render_ms = 40"),
            vec![],
            "leaves no time for DNNs",
        ),
        (
            workload("", "").replace("gamma = 2", "gamma = 0.5"),
            vec![],
            "app[0].utility.gamma",
        ),
        (
            workload("", ""),
            vec!["--policy", "lst"],
            "does not know the workload's render task",
        ),
        (
            workload("", ""),
            vec!["--policy", "maxmin-utility-offload"],
            "needs render.offload_to",
        ),
    ];
    for (i, (text, extra, want)) in cases.into_iter().enumerate() {
        let w = write(&dir, &format!("w{i}.toml"), &text);
        let mut args = vec!["serve", "--workload", &w, "--runtime-config", &rc];
        args.extend(extra);
        let out = stretch(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.lines().filter(|l| l.starts_with("error:")).count(), 1, "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
