//! Heimdall on the simulator: rendering keeps its rate only when DNNs are
//! cut into chunks that fit between frames and the coordinator respects the
//! frame ticks; the high-priority app's worst latency; offloading under a
//! steady overload moves a model once and never back and forth.

use graph_ir::Graph;
use graph_ir::builder::Builder;
use graph_ir::ops::UnaryOp;
use multi_dnn::core::report::RunLog;
use multi_dnn::core::workload::{Utility, Workload};
use multi_dnn::core::workload_file::parse;
use multi_dnn::heimdall::HeimdallOptions;
use multi_dnn::heimdall::report::RenderReport;
use multi_dnn::heimdall::{ChunkMode, RenderSpec, chunk_estimates, chunk_model};
use multi_dnn::policy::PolicyOptions;
use multi_dnn::policy_by_name;
use multi_dnn::sim::{Latency, SimOptions, Truth, simulate};
use multi_dnn::{Estimator, EstimatorParams, ModelUnits, Scheduler};
use std::path::PathBuf;

const GPU: usize = 0;
const CPU: usize = 1;

fn chain(name: &str, n: usize) -> Graph {
    let mut b = Builder::new(name);
    let mut y = b.input("x", &[1, 2, 4, 4]).unwrap();
    for i in 0..n {
        y = b.unary(&format!("{name}_op{i}"), y, UnaryOp::Relu).unwrap();
    }
    b.finish("y", y).unwrap()
}

fn names() -> Vec<String> {
    vec!["gpu".into(), "cpu".into()]
}

/// Three apps on the GPU: a 60 ms high-priority model (20 ops of 3 ms)
/// at 4 fps and two 300 ms background models (30 ops of 10 ms) at 2 fps,
/// all closed loops; `paced = false` runs the background ones back to back.
fn workload(duration_s: f64, offload: bool) -> Workload {
    workload_paced(duration_s, offload, true)
}

fn workload_paced(duration_s: f64, offload: bool, paced: bool) -> Workload {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models");
    let offload = if offload { "offload_to = \"cpu\"\n" } else { "" };
    let bg = if paced { "fps = 2" } else { "" };
    let text = format!(
        r#"
seed = 1
duration_s = {duration_s}
[render]
processor = "gpu"
fps = 30
render_ms = 2.7
margin_ms = 5
{offload}
[[app]]
name = "style"
model = "resnet18.onnx"
arrival = "closed"
fps = 4
slo_ms = 150
utility = {{ l0 = 1, beta = 100, gamma = 2 }}
[[app]]
name = "seg"
model = "resnet18.onnx"
arrival = "closed"
{bg}
slo_ms = 1000
[[app]]
name = "pose"
model = "resnet18.onnx"
arrival = "closed"
{bg}
slo_ms = 1000
"#
    );
    parse(&text, &dir, "heimdall.toml").unwrap()
}

/// Per model `op_ms[processor][op]`.
fn op_ms(cpu_factor: f64) -> Vec<Vec<Vec<f64>>> {
    let m = |n: usize, ms: f64| vec![vec![ms; n], vec![ms * cpu_factor; n]];
    vec![m(20, 3.0), m(30, 10.0), m(30, 10.0)]
}

fn graphs() -> Vec<Graph> {
    vec![chain("style", 20), chain("seg", 30), chain("pose", 30)]
}

/// `cv`: the spread of every true latency around its table figure.
fn setup(mode: ChunkMode, ops: &[Vec<Vec<f64>>], cv: f64) -> (Vec<ModelUnits>, Estimator, Truth) {
    let render = RenderSpec {
        worker: GPU,
        fps: 30.0,
        render_ms: 2.7,
        margin_ms: 5.0,
    };
    let mut units = Vec::new();
    let mut table = Vec::new();
    for (g, ms) in graphs().iter().zip(ops) {
        let (u, _) = chunk_model(g, &names(), ms, &render, mode).unwrap();
        table.push(chunk_estimates(&u, ms));
        units.push(u);
    }
    let mut est = Estimator::new(EstimatorParams::default(), &[true, false], &units);
    for (m, per) in table.iter().enumerate() {
        for (c, row) in per.iter().enumerate() {
            for (p, ms) in row.iter().enumerate() {
                if ms.is_finite() {
                    est.set(m, c, p, *ms);
                }
            }
        }
    }
    let truth = Truth {
        table: table
            .iter()
            .map(|m| {
                m.iter()
                    .map(|r| {
                        r.iter()
                            .map(|x| Latency {
                                alone_cv: cv,
                                shared_cv: cv,
                                ..Latency::exact(*x)
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect(),
        ..Truth::default()
    };
    (units, est, truth)
}

fn run(policy: &str, w: &Workload, cpu_factor: f64) -> (RunLog, RenderReport) {
    run_cv(policy, w, cpu_factor, 0.0)
}

fn run_cv(policy: &str, w: &Workload, cpu_factor: f64, cv: f64) -> (RunLog, RenderReport) {
    run_ops(policy, w, &op_ms(cpu_factor), cv, true)
}

/// `ops` per model as [`op_ms`]; `offload`: whether the policies have a
/// CPU to offload (and spill) to.
fn run_ops(policy: &str, w: &Workload, ops: &[Vec<Vec<f64>>], cv: f64, offload: bool) -> (RunLog, RenderReport) {
    let mode = match policy {
        "whole" => ChunkMode::Whole,
        "ops5" => ChunkMode::Ops(5),
        _ => ChunkMode::Budget,
    };
    let (units, est, truth) = setup(mode, ops, cv);
    let options = PolicyOptions::default().with(HeimdallOptions {
        utility: w.apps.iter().map(|a| a.utility).collect(),
        home: vec![GPU; 3],
        margin_ms: 5.0,
        offload: offload.then_some((GPU, CPU, 0.1, 1000.0)),
    });
    let p = policy_by_name(policy, &options).unwrap();
    let mut sched = Scheduler::new(units, &names(), p, est);
    let slo = w.apps.iter().map(|a| match a.slo {
        multi_dnn::core::workload::Slo::Ms(ms) => Some(ms),
        _ => None,
    });
    let log = simulate(&mut sched, w, slo.collect(), &truth, SimOptions::default()).unwrap();
    let duration = w.duration_s.unwrap() * 1e3;
    let r = RenderReport::new(
        &log,
        "gpu",
        30.0,
        w.render.as_ref().map_or(0.0, |r| r.render_ms),
        duration,
    );
    (log, r)
}

fn worst(log: &RunLog, app: usize) -> f64 {
    log.completed
        .iter()
        .filter(|c| c.spec.app == app)
        .map(|c| c.latency_ms())
        .fold(0.0, f64::max)
}

#[test]
fn chunked_coordination_keeps_rendering_at_30_fps_and_whole_models_do_not() {
    let w = workload(20.0, false);
    let (whole_log, whole) = run("whole", &w, 1.0);
    assert!(whole.fps_mean < 25.0, "whole models: {whole:?}");
    assert!(whole.dropped > 50, "{whole:?}");
    for p in ["maxmin-utility", "maxtotal-utility"] {
        let (log, r) = run(p, &w, 1.0);
        assert!(r.fps_mean >= 29.5, "{p}: {r:?}");
        assert_eq!(r.dropped, 0, "{p}: {r:?}");
        assert!(r.late_max_ms <= 5.0 + 1e-9, "{p}: a chunk overran the margin: {r:?}");
        assert!(log.completed.iter().any(|c| c.spec.app == 0), "{p}");
        if p == "maxtotal-utility" {
            let (ours, theirs) = (worst(&log, 0), worst(&whole_log, 0));
            assert!(
                ours * 2.5 < theirs,
                "{p}: high-priority worst case {ours:.0} ms vs whole-model {theirs:.0} ms"
            );
        }
    }
}

#[test]
fn a_model_with_an_operator_longer_than_a_frame_starts_on_the_offload_processor() {
    // One of seg's operators takes 60 ms on the GPU, over the 30.6 ms
    // between two frames plus the 5 ms margin: every run of it on the GPU
    // holds a frame back by up to 30 ms.
    let w = workload(20.0, false);
    let mut ops = op_ms(1.5);
    ops[1][GPU][12] = 60.0;
    for p in ["maxmin-utility", "maxtotal-utility"] {
        let (log, r) = run_ops(p, &w, &ops, 0.0, true);
        assert!(
            r.fps_mean >= 29.5 && r.dropped == 0 && r.late_max_ms <= 5.0 + 1e-9,
            "{p}: {r:?}"
        );
        assert!(log.completed.iter().any(|c| c.spec.app == 1), "{p}: seg never ran");
        let (_, kept) = run_ops(p, &w, &ops, 0.0, false);
        assert!(
            kept.late_max_ms > 20.0,
            "{p} with nowhere to start seg but the GPU: {kept:?}"
        );
    }
}

#[test]
fn utility_policies_favour_the_steep_utility_under_maxtotal() {
    let w = workload(20.0, false);
    let (total, _) = run("maxtotal-utility", &w, 1.0);
    let mean = |log: &RunLog, app: usize| {
        let l: Vec<f64> = log
            .completed
            .iter()
            .filter(|c| c.spec.app == app)
            .map(|c| c.latency_ms())
            .collect();
        l.iter().sum::<f64>() / l.len().max(1) as f64
    };
    // The style app's utility falls 100x faster: it runs ahead of the others.
    assert!(
        mean(&total, 0) < mean(&total, 1),
        "{} vs {}",
        mean(&total, 0),
        mean(&total, 1)
    );
    let u = w.apps[0].utility;
    assert_eq!(
        u,
        Utility {
            l0: 1.0,
            beta: 100.0,
            gamma: 2.0
        }
    );
}

#[test]
fn offloading_moves_once_under_a_steady_overload_and_never_back_and_forth() {
    // The GPU carries 60 + 300 + 300 ms of work per round against closed
    // loops at 4/2/2 fps: overloaded. The CPU runs everything 1.2x slower.
    let w = workload(30.0, true);
    let (log, r) = run("maxtotal-utility-offload", &w, 1.2);
    assert!(!log.moves.is_empty(), "nothing was offloaded");
    assert!(log.moves.iter().all(|(_, _, to)| *to == CPU), "{:?}", log.moves);
    let mut moved: Vec<usize> = log.moves.iter().map(|m| m.1).collect();
    moved.sort_unstable();
    moved.dedup();
    assert_eq!(moved.len(), log.moves.len(), "a model moved twice: {:?}", log.moves);
    assert!(r.fps_mean >= 29.5, "{r:?}");
    let (plain, _) = run("maxtotal-utility", &w, 1.2);
    assert!(plain.moves.is_empty());
    assert!(
        log.completed.len() > plain.completed.len(),
        "offloading should raise throughput: {} vs {}",
        log.completed.len(),
        plain.completed.len()
    );
}

#[test]
fn back_to_back_models_with_noisy_latencies_move_once_each_at_most() {
    // Two background models run back to back, every latency varies by
    // 10%. Once one of them lives on the CPU, the CPU is never idle for
    // long: moving the other there too (judged on a snapshot of the CPU's
    // queue, or on latencies measured before the first move changed the
    // load) makes both slower, and one comes back.
    let w = workload_paced(60.0, true, false);
    let (log, r) = run_cv("maxtotal-utility-offload", &w, 1.0, 0.1);
    assert!(!log.moves.is_empty(), "nothing was offloaded");
    let mut moved: Vec<usize> = log.moves.iter().map(|m| m.1).collect();
    moved.sort_unstable();
    moved.dedup();
    assert_eq!(moved.len(), log.moves.len(), "a model moved twice: {:?}", log.moves);
    assert!(r.fps_mean >= 29.5, "{r:?}");
}
