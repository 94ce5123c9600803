//! Splash on the simulator: camera-driven workloads with dependent
//! requests, and thermal runs where throttling slows or switches off
//! processors and the thermal-aware policies delay it.

use graph_ir::Graph;
use graph_ir::builder::Builder;
use graph_ir::ops::UnaryOp;
use multi_dnn::core::Completed;
use multi_dnn::core::arrivals::Arrivals;
use multi_dnn::core::workload::Workload;
use multi_dnn::core::workload_file::parse;
use multi_dnn::policy::PolicyOptions;
use multi_dnn::sim::{Latency, SimOptions, Truth, simulate_thermal};
use multi_dnn::splash::thermal::driver::ThermalDriver;
use multi_dnn::splash::thermal::{NodeParams, ThermalParams, Throttle};
use multi_dnn::{Estimator, EstimatorParams, ModelUnits, OpSupport, Scheduler, analyze, policy_by_name};
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

fn person_finder(fps: f64, seconds: f64) -> Workload {
    let text = format!(
        r#"
seed = 1
duration_s = {seconds}
[camera]
fps = {fps}
[[app]]
name = "detect"
model = "resnet18.onnx"
arrival = "frame"
per_frame = 4
[[app]]
name = "recognize"
model = "mobilenet_v2.onnx"
arrival = "frame"
per_frame = 8
after = "detect"
"#
    );
    parse(&text, &fixtures(), "person_finder.toml").unwrap()
}

fn done(spec: &multi_dnn::JobSpec, at: f64) -> Completed {
    Completed {
        job: 0,
        spec: spec.clone(),
        finish_ms: at,
    }
}

#[test]
fn camera_frames_send_detections_then_recognitions_each_with_the_frame_period_as_slo() {
    let w = person_finder(30.0, 1.0);
    let mut a = Arrivals::new(&w, vec![None, None]);
    let first = a.due(0.0);
    assert_eq!(first.len(), 4, "four detections per frame");
    assert!(first.iter().all(|j| j.app == 0 && j.frame == Some(1)));
    assert!((first[0].slo_ms.unwrap() - 1e3 / 30.0).abs() < 1e-9);
    for (k, j) in first.iter().enumerate() {
        a.completed(&done(j, 10.0 + k as f64), 10.0 + k as f64);
        let sent = a.due(10.0 + k as f64);
        if k < 3 {
            assert!(sent.is_empty(), "recognitions wait for every detection of the frame");
        } else {
            assert_eq!(sent.len(), 8);
            assert!(sent.iter().all(|j| j.app == 1 && j.frame == Some(1)));
            assert!(
                (sent[0].slo_ms.unwrap() - 1e3 / 30.0).abs() < 1e-9,
                "{:?}",
                sent[0].slo_ms
            );
            assert_eq!(sent[0].arrival_ms, 13.0);
        }
    }
    assert_eq!(a.next_ms(), Some(1e3 / 30.0), "the camera takes the next frame on time");
    let second = a.due(1e3 / 30.0);
    assert_eq!(second.len(), 4);
    assert!(second.iter().all(|j| j.frame == Some(2)));
}

#[test]
fn bad_camera_workloads_name_the_key() {
    let cases = [
        (
            "duration_s = 1\n[camera]\nfps = 30\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"frame\"\nper_frame = 1\nafter = \"nope\"",
            "app[0].after",
        ),
        (
            "duration_s = 1\n[camera]\nfps = 30\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"frame\"\nper_frame = 1\nslo_ms = 5",
            "app[0].slo_ms",
        ),
        (
            "duration_s = 1\n[camera]\nfps = 0\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"frame\"\nper_frame = 1",
            "camera.fps",
        ),
        (
            "duration_s = 1\n[camera]\nfps = 30\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"periodic\"\nfps = 1",
            "camera",
        ),
    ];
    for (text, key) in cases {
        let e = parse(text, &fixtures(), "w.toml").unwrap_err();
        assert_eq!(e.key, key, "{e}");
    }
}

fn chain(n: usize) -> Graph {
    let mut b = Builder::new("chain");
    let mut y = b.input("x", &[1, 4, 8, 8]).unwrap();
    for i in 0..n {
        y = b.unary(&format!("op{i}"), y, UnaryOp::Relu).unwrap();
    }
    b.finish("y", y).unwrap()
}

/// A hot, fast CPU (`cpu_w` while busy) and a slower accelerator (`npu_w`)
/// that switches off when hot; both only warm up from work.
fn device(cpu_w: f64, npu_w: f64) -> ThermalParams {
    let node = |name: &str, active_w: f64, throttle| NodeParams {
        name: name.into(),
        capacitance_j_per_c: 1.0,
        resistance_c_per_w: 10.0,
        idle_w: 0.0,
        active_w,
        throttle,
    };
    ThermalParams {
        ambient_c: 25.0,
        nodes: vec![
            node(
                "cpu",
                cpu_w,
                Some(Throttle::Slow {
                    above_c: 45.0,
                    release_c: 43.0,
                    frequency: 0.5,
                }),
            ),
            node(
                "npu",
                npu_w,
                Some(Throttle::Off {
                    above_c: 45.0,
                    release_c: 43.0,
                }),
            ),
        ],
        couplings: vec![(0, 1, 0.02)],
        source: "test".into(),
    }
}

struct Run {
    first_throttle_ms: Option<f64>,
    met: usize,
    completed: usize,
    submitted: usize,
    outages: usize,
}

fn run(policy: &str, fps: f64, seconds: f64, (cpu_w, npu_w): (f64, f64)) -> Run {
    let names: Vec<String> = vec!["cpu".into(), "npu".into()];
    let support = vec![OpSupport::All, OpSupport::All];
    let g = chain(2);
    let units: Vec<ModelUnits> = (0..2).map(|_| analyze(&g, &names, &support).unwrap()).collect();
    // Detection 4 ms on the CPU, 8 on the NPU; recognition 1 and 2 ms.
    let table: Vec<Vec<Vec<Latency>>> = [(4.0, 8.0), (1.0, 2.0)]
        .iter()
        .zip(&units)
        .map(|((cpu, npu), u)| {
            u.candidates
                .iter()
                .map(|c| {
                    let share = (c.last - c.first + 1) as f64 / u.regions[c.region].units.len() as f64;
                    vec![Latency::exact(cpu * share), Latency::exact(npu * share)]
                })
                .collect()
        })
        .collect();
    let mut est = Estimator::new(EstimatorParams::default(), &[false, true], &units);
    for (m, (u, rows)) in units.iter().zip(&table).enumerate() {
        (0..names.len()).for_each(|w| {
            let c = u.largest_on(w).unwrap();
            est.set_base(m, c, w, rows[c][w].alone_ms);
        });
    }
    let p = policy_by_name(policy, &PolicyOptions::default()).unwrap();
    let mut sched = Scheduler::new(units, &names, p, est);
    let workload = person_finder(fps, seconds);
    let truth = Truth {
        table,
        ..Truth::default()
    };
    let mut driver = ThermalDriver::new(device(cpu_w, npu_w)).unwrap();
    let log = simulate_thermal(
        &mut sched,
        &workload,
        vec![None, None],
        &truth,
        SimOptions::default(),
        Some(&mut driver),
    )
    .unwrap();
    Run {
        first_throttle_ms: driver.first_throttle_ms(),
        met: log.completed.iter().filter(|c| c.met_slo()).count(),
        completed: log.completed.len(),
        submitted: log.submitted.iter().sum(),
        outages: log.outages.len(),
    }
}

#[test]
fn heft_heats_the_cpu_into_throttling_and_min_heat_does_not() {
    let heft = run("heft", 20.0, 120.0, (9.0, 0.5));
    let cool = run("min-heat", 20.0, 120.0, (9.0, 0.5));
    eprintln!(
        "heft: throttled at {:?} ms, {}/{} met; min-heat: throttled at {:?} ms, {}/{} met",
        heft.first_throttle_ms, heft.met, heft.completed, cool.first_throttle_ms, cool.met, cool.completed
    );
    let t = heft
        .first_throttle_ms
        .expect("HEFT takes the fast, hot CPU and throttles it");
    assert!(cool.first_throttle_ms.is_none_or(|c| c > t), "min-heat throttles later");
    assert!(
        cool.met as f64 >= 0.95 * cool.completed as f64,
        "and still meets the frame deadline"
    );
    assert!(heft.completed + 64 >= heft.submitted && cool.completed + 64 >= cool.submitted);
}

#[test]
fn a_switched_off_processor_loses_no_job() {
    // min-heat puts nearly everything on the NPU, which heats past its
    // limit: it switches off, its work goes back to the queue and the CPU
    // takes it until the NPU has cooled.
    let r = run("min-heat", 20.0, 120.0, (9.0, 3.0));
    eprintln!(
        "NPU off at {:?} ms, {} outage events; {} of {} completed, {} in time",
        r.first_throttle_ms, r.outages, r.completed, r.submitted, r.met
    );
    assert!(r.first_throttle_ms.is_some(), "the NPU switches off");
    assert!(r.outages >= 2, "and comes back when cool");
    assert_eq!(r.completed, r.submitted);
    assert!(r.met as f64 >= 0.9 * r.completed as f64, "the CPU takes over in time");
}
