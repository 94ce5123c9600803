//! `stretch serve` and `stretch simulate`: a real multi-DNN run on tiny zoo
//! models with an accelerator-like processor and an outage (nothing lost,
//! every output equal to the whole-model reference), the simulator on a
//! device profile, and one clear error line for each bad input.

mod common;

use common::{repo, scratch, stretch, stretch_ok};
use std::path::Path;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Held shared by every test here and exclusively by the one that measures
/// overlap in time, so no other test's processes compete for the cores
/// while it runs (cargo runs one test binary at a time).
static CORES: RwLock<()> = RwLock::new(());

fn sharing_cores() -> RwLockReadGuard<'static, ()> {
    CORES.read().unwrap_or_else(|e| e.into_inner())
}

fn owning_cores() -> RwLockWriteGuard<'static, ()> {
    CORES.write().unwrap_or_else(|e| e.into_inner())
}

fn zoo(dir: &Path) {
    let m = dir.join("mini.onnx");
    stretch_ok(&[
        "zoo",
        "resnet-mini",
        "--input-size",
        "32",
        "--classes",
        "10",
        "-o",
        m.to_str().unwrap(),
    ]);
    let b = dir.join("mb.onnx");
    stretch_ok(&[
        "zoo",
        "mbnet-mini",
        "--input-size",
        "32",
        "--classes",
        "10",
        "-o",
        b.to_str().unwrap(),
    ]);
}

const CONFIG: &str = r#"
[[processor]]
name = "cpu0"
kind = "pool"
[[processor]]
name = "npu"
kind = "pool"
unsupported = ["Gemm", "DepthwiseConv"]
accelerator = true
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn serve_survives_an_outage_with_every_output_checked() {
    let _cores = sharing_cores();
    let dir = scratch("serve-outage");
    zoo(&dir);
    let rc = write(&dir, "rt.toml", CONFIG);
    let w = write(
        &dir,
        "w.toml",
        r#"
seed = 1
duration_s = 2.5
slo_multiplier = 4
[[app]]
name = "a"
model = "mini.onnx"
arrival = "periodic"
fps = 40
[[app]]
name = "b"
model = "mb.onnx"
arrival = "poisson"
rate = 30
[[outage]]
processor = "npu"
at_s = 0.5
for_s = 1
"#,
    );
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--workload", &w, "--runtime-config", &rc];
        args.extend(extra);
        stretch_ok(&args)
    };
    let out = serve(&["--compare", "lst,fixed,rr,sel,heft", "--json", "--isolated-runs", "3"]);
    let reports: serde_json::Value = serde_json::from_str(&out).unwrap();
    let reports = reports.as_array().unwrap();
    assert_eq!(reports.len(), 5);
    let text = serve(&["--compare", "lst,fixed"]);
    let header = text
        .lines()
        .find(|l| l.starts_with("policy"))
        .expect("a comparison table");
    assert!(header.contains("outputs ≠ ref"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("lst ") || l.starts_with("fixed "))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows.iter().all(|r| r.contains(" 0 of ")), "{text}");
    for r in reports {
        assert_eq!(r["kind"], "measured");
        assert!(r["requests"].as_u64().unwrap() > 50, "{r}");
        assert_eq!(r["lost"], 0, "{r}");
        assert_eq!(r["completed"], r["requests"], "{r}");
        assert_eq!(r["outputs_checked"], r["completed"], "{r}");
        assert_eq!(r["mismatches"], 0, "{r}");
        let steal = r["steal"]["per_cpu"].as_object().expect("steal per CPU");
        assert!(
            !steal.is_empty() && steal.values().all(|c| (0.0..=1.0).contains(&c.as_f64().unwrap())),
            "{r}"
        );
        let o = &r["outages"][0];
        assert_eq!(o["processor"], "npu", "{r}");
        assert!(o["down_s"].as_f64().is_some_and(|d| (d - 0.5).abs() < 0.05), "{r}");
        assert!(o["up_s"].as_f64().is_some_and(|u| (u - 1.5).abs() < 0.05), "{r}");
        if r["policy"] == "lst" {
            assert!(o["resumed_after_ms"].as_f64().is_some_and(|x| x < 1000.0), "{r}");
        }
    }
}

#[test]
fn simulate_runs_every_policy_on_a_device_profile() {
    let _cores = sharing_cores();
    let dir = scratch("simulate");
    zoo(&dir);
    let w = write(
        &dir,
        "w.toml",
        "seed = 2\nduration_s = 30\nslo_multiplier = 2\n[[app]]\nmodel = \"mini.onnx\"\narrival = \"periodic\"\nfps = 200\n\
         [[app]]\nmodel = \"mb.onnx\"\narrival = \"frame\"\nper_frame = 2\n",
    );
    let device = common::repo().join("configs/devices/host.toml");
    let out = stretch_ok(&[
        "simulate",
        "--workload",
        &w,
        "--device",
        device.to_str().unwrap(),
        "--compare",
        "lst,fixed,rr,sel,heft,lst-whole",
        "--json",
    ]);
    let reports: serde_json::Value = serde_json::from_str(&out).unwrap();
    for r in reports.as_array().unwrap() {
        assert_eq!(r["kind"], "simulated");
        assert!(r["steal"].is_null(), "{r}");
        assert!(r["completed"].as_u64().unwrap() > 1000, "{r}");
        assert!(r["fps"].as_f64().unwrap() > 0.0, "{r}");
    }
    let again = stretch_ok(&[
        "simulate",
        "--workload",
        &w,
        "--device",
        device.to_str().unwrap(),
        "--compare",
        "lst,fixed,rr,sel,heft,lst-whole",
        "--json",
    ]);
    let strip = |s: &str| -> Vec<(String, String)> {
        let v: serde_json::Value = serde_json::from_str(s).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| (r["apps"].to_string(), r["throughput_rps"].to_string()))
            .collect()
    };
    assert_eq!(strip(&out), strip(&again), "simulation is not deterministic");
}

/// An overloaded workload: with `drop_late`, lst and sel drop the queued
/// jobs whose deadline has passed, which count as violations (SLO met is
/// over completed + dropped requests), and they stay ahead of fixed.
#[test]
fn late_jobs_are_dropped_and_counted_when_the_workload_allows() {
    let _cores = sharing_cores();
    let dir = scratch("drop-late");
    zoo(&dir);
    let text = "seed = 3\nduration_s = 1\nslo_multiplier = 1\n[[app]]\nmodel = \"mini.onnx\"\narrival = \"poisson\"\nrate = 1000\n\
                [[app]]\nmodel = \"mb.onnx\"\narrival = \"periodic\"\nfps = 500\n";
    let keep = write(&dir, "keep.toml", text);
    let drop = write(
        &dir,
        "drop.toml",
        &text.replace("slo_multiplier = 1\n", "slo_multiplier = 1\ndrop_late = true\n"),
    );
    let device = common::repo().join("configs/devices/host.toml");
    let run = |w: &str| -> serde_json::Value {
        let out = stretch_ok(&[
            "simulate",
            "--workload",
            w,
            "--device",
            device.to_str().unwrap(),
            "--compare",
            "lst,sel,fixed",
            "--json",
        ]);
        serde_json::from_str(&out).unwrap()
    };
    let (kept, dropped) = (run(&keep), run(&drop));
    let sat = |v: &serde_json::Value, k: usize| v[k]["slo_satisfaction"].as_f64().unwrap();
    for k in 0..3 {
        assert_eq!(kept[k]["dropped"], 0, "{}", kept[k]);
    }
    for k in 0..2 {
        let r = &dropped[k];
        let (completed, n) = (r["completed"].as_u64().unwrap(), r["dropped"].as_u64().unwrap());
        assert!(n > 0, "{} dropped nothing: {r}", r["policy"]);
        assert_eq!(r["lost"], 0, "{r}");
        let met: f64 = r["apps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                a["slo_satisfaction"].as_f64().unwrap() / 100.0
                    * (a["completed"].as_f64().unwrap() + a["dropped"].as_f64().unwrap())
            })
            .sum();
        let want = 100.0 * met / (completed + n) as f64;
        assert!(
            (sat(&dropped, k) - want).abs() < 1e-6,
            "{} vs {want}: {r}",
            sat(&dropped, k)
        );
        assert!(
            sat(&dropped, k) >= sat(&dropped, 2) - 1.0,
            "{} behind fixed: {dropped}",
            r["policy"]
        );
        assert!(
            sat(&dropped, k) > sat(&kept, k),
            "dropping must help {} under overload",
            r["policy"]
        );
    }
}

#[test]
fn bad_inputs_fail_with_one_line() {
    let _cores = sharing_cores();
    let dir = scratch("serve-errors");
    zoo(&dir);
    let rc = write(&dir, "rt.toml", CONFIG);
    let conv_only = write(
        &dir,
        "conv.toml",
        "[[processor]]\nname = \"npu\"\nkind = \"pool\"\nsupports = [\"Conv\"]\n",
    );
    let good = "duration_s = 1\n[[app]]\nmodel = \"mini.onnx\"\narrival = \"closed\"\n";
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                write(
                    &dir,
                    "missing.toml",
                    "duration_s = 1\n[[app]]\nmodel = \"nope.onnx\"\narrival = \"closed\"\n",
                ),
                rc.clone(),
            ],
            "app[0].model",
        ),
        (
            vec![
                write(&dir, "good.toml", good),
                rc.clone(),
                "--policy".into(),
                "fastest".into(),
            ],
            "unknown policy 'fastest'",
        ),
        (
            vec![
                write(&dir, "proc.toml", &format!("{good}processor = \"gpu\"\n")),
                rc.clone(),
            ],
            "unknown processor 'gpu'",
        ),
        (
            vec![write(&dir, "good2.toml", good), conv_only],
            "is supported by no configured processor",
        ),
        (
            vec![write(&dir, "slo.toml", &format!("{good}slo_ms = 0\n")), rc.clone()],
            "app[0].slo_ms",
        ),
        (
            vec![write(&dir, "bad.toml", "duration_s = [\n"), rc.clone()],
            "bad.toml",
        ),
        (
            vec![
                write(
                    &dir,
                    "structure.toml",
                    &format!(
                        "duration_s = 1\n[[app]]\nmodel = \"{}\"\narrival = \"closed\"\n",
                        repo().join("fixtures/models/resnet18.onnx").display()
                    ),
                ),
                rc.clone(),
            ],
            "weights have no data (a structure-only model; the first is",
        ),
    ];
    for (args, want) in cases {
        let mut full = vec![
            "serve".to_string(),
            "--workload".into(),
            args[0].clone(),
            "--runtime-config".into(),
            args[1].clone(),
        ];
        full.extend(args[2..].iter().cloned());
        let full: Vec<&str> = full.iter().map(String::as_str).collect();
        let out = stretch(&full);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{full:?} succeeded");
        assert!(err.contains(want), "{full:?}: {err}");
        assert_eq!(err.lines().filter(|l| l.starts_with("error:")).count(), 1, "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// A branched model (plan + branch for two processors) served as one app:
/// under `lst` its two branches of one request run at the same time on the
/// two processors, and every output equals the whole-model reference. The
/// input is large enough that a branch outlasts a scheduler tick, so a
/// worker woken late still overlaps its sibling.
#[test]
fn a_branched_model_runs_its_branches_in_parallel() {
    let _cores = owning_cores();
    let dir = scratch("serve-branched");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let host = common::repo().join("configs/devices/host.toml");
    stretch_ok(&[
        "zoo",
        "resnet-mini",
        "--input-size",
        "160",
        "--classes",
        "10",
        "-o",
        &s(&dir.join("mini.onnx")),
    ]);
    let plan = dir.join("plan.json");
    let branched = dir.join("branched.onnx");
    stretch_ok(&[
        "plan",
        &s(&dir.join("mini.onnx")),
        "--device",
        &s(&host),
        "--processors",
        "cpu0,cpu1",
        "-o",
        &s(&plan),
    ]);
    stretch_ok(&[
        "branch",
        &s(&dir.join("mini.onnx")),
        "--plan",
        &s(&plan),
        "--random-weights",
        "3",
        "-o",
        &s(&branched),
    ]);
    let rc = write(
        &dir,
        "rt2.toml",
        "[[processor]]\nname = \"cpu0\"\nkind = \"pool\"\n[[processor]]\nname = \"cpu1\"\nkind = \"pool\"\n",
    );
    let w = write(
        &dir,
        "wb.toml",
        "seed = 1\nrequests = 8\n[[app]]\nname = \"branched\"\nmodel = \"branched.onnx\"\narrival = \"closed\"\n",
    );
    let trace = dir.join("trace.json");
    let out = stretch_ok(&[
        "serve",
        "--workload",
        &w,
        "--runtime-config",
        &rc,
        "--policy",
        "lst",
        "--json",
        "--isolated-runs",
        "3",
        "--trace",
        &s(&trace),
    ]);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let r = &r[0];
    assert_eq!(r["completed"], 8, "{r}");
    assert_eq!(r["outputs_checked"], r["completed"], "{r}");
    assert_eq!(r["mismatches"], 0, "{r}");
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let spans: Vec<(u64, u64, f64, f64)> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap();
            (
                e["args"]["job"].as_u64().unwrap(),
                e["tid"].as_u64().unwrap(),
                ts,
                ts + e["dur"].as_f64().unwrap(),
            )
        })
        .collect();
    let parallel = spans
        .iter()
        .filter(|a| spans.iter().any(|b| a.0 == b.0 && a.1 != b.1 && a.2 < b.3 && b.2 < a.3))
        .map(|a| a.0)
        .collect::<std::collections::BTreeSet<_>>();
    assert!(
        parallel.len() * 2 >= r["completed"].as_u64().unwrap() as usize,
        "only {} of {} requests ran two subgraphs at once",
        parallel.len(),
        r["completed"]
    );
}

/// The tensor pool: the same run on an onnxruntime processor with the pool
/// off and on; off, every subgraph input and output is a fresh buffer;
/// on, inputs go in place and outputs reuse kept buffers: at least 10x
/// fewer engine-boundary allocations per request, fewer bytes copied, the
/// same outputs.
/// Runs `serve ... --json` (one policy), which must succeed with every
/// request completed and every output equal to the reference: its report
/// and its stderr.
fn served(args: &[&str]) -> (serde_json::Value, String) {
    let out = stretch(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = v[0].clone();
    assert_eq!(r["completed"], r["requests"], "{r}");
    assert_eq!(r["mismatches"], 0, "{r}");
    (r, err)
}

#[test]
fn the_tensor_pool_cuts_engine_boundary_allocations() {
    let _cores = sharing_cores();
    let dir = scratch("serve-pool");
    zoo(&dir);
    let rc = write(
        &dir,
        "rt.toml",
        "[[processor]]\nname = \"cpu0\"\nkind = \"pool\"\nengine = \"ort\"\n",
    );
    let w = write(
        &dir,
        "w.toml",
        "seed = 3\nduration_s = 1.5\n[[app]]\nname = \"mini\"\nmodel = \"mini.onnx\"\narrival = \"periodic\"\nfps = 40\nslo_ms = 500\n",
    );
    let run = |pool: &str| -> serde_json::Value {
        let (r, _) = served(&[
            "serve",
            "--workload",
            &w,
            "--runtime-config",
            &rc,
            "--policy",
            "heft",
            "--isolated-runs",
            "2",
            "--tensor-pool",
            pool,
            "--json",
        ]);
        assert_eq!(r["tensor_pool"]["enabled"], pool == "on", "{r}");
        r["tensor_pool"].clone()
    };
    let (off, on) = (run("off"), run("on"));
    let per = |p: &serde_json::Value, k: &str| p[k].as_f64().unwrap();
    assert!(per(&off, "allocations_per_request") >= 2.0, "{off}");
    assert!(
        per(&on, "allocations_per_request") * 10.0 <= per(&off, "allocations_per_request"),
        "off {off}, on {on}"
    );
    assert!(
        per(&on, "bytes_copied_per_request") < per(&off, "bytes_copied_per_request"),
        "off {off}, on {on}"
    );
    assert!(per(&on, "page_faults_per_request").is_finite(), "{on}");
}

#[test]
fn pinned_workers_schedule_themselves_unless_told_otherwise() {
    let _cores = sharing_cores();
    let dir = scratch("serve-scheduling");
    zoo(&dir);
    let rc = write(
        &dir,
        "rt.toml",
        "[[processor]]\nname = \"cpu0\"\nkind = \"pool\"\ncores = \"0\"\n\
         [[processor]]\nname = \"cpu1\"\nkind = \"pool\"\ncores = \"1\"\nengine = \"ort\"\n",
    );
    let w = write(
        &dir,
        "w.toml",
        "seed = 3\nduration_s = 1\n[[app]]\nname = \"mini\"\nmodel = \"mini.onnx\"\narrival = \"periodic\"\nfps = 60\nslo_ms = 500\n",
    );
    let run = |extra: &[&str]| -> String {
        let mut args = vec![
            "serve",
            "--workload",
            &w,
            "--runtime-config",
            &rc,
            "--policy",
            "lst",
            "--isolated-runs",
            "2",
            "--json",
        ];
        args.extend_from_slice(extra);
        served(&args).1
    };
    let own = run(&[]);
    assert!(own.contains("scheduling: the workers schedule themselves"), "{own}");
    let thread = run(&["--scheduling", "thread"]);
    assert!(thread.contains("scheduling: one scheduling thread"), "{thread}");
}
