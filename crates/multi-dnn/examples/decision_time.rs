//! Scheduler decision time: one `GetNextJob` call (policy + Band's dynamic
//! program) with 4 processors and 32 queued jobs (Band §4.3.1 reports 49 µs
//! on a Pixel 4 core for EagleEye).
//!
//! Four fixture models (resnet18, mobilenet_v2, efficientnet_b0,
//! regnet_x_1_6gf) are cut into units for four processors, in two settings:
//! - `delegates`: cpu, gpu and dsp with the operator lists of
//!   configs/devices/snapdragon855.toml (the TFLite delegates' support), and
//!   an `npu` taken to support what the dsp does (the Pixel 4's NPU is
//!   driven through NNAPI, whose operator set is unpublished);
//! - `fragmenting`: a stress case, `gpu` lacking depthwise convolutions,
//!   `dsp` lacking Gemm and MaxPool, `npu` running only Conv, Relu, Add and
//!   BatchNormalization, which cuts MobileNet and EfficientNet into 71 and
//!   131 units (the dynamic program is O(p·n²) per job).
//!
//! Each sample is a random state: 32 jobs (8 per model) with random
//! deadlines, three processors busy for random times, one idle (so the
//! policy has an assignment to make). Two queues: `typical`, 4 jobs part
//! done (LST puts a job's rest back at the queue's head, so few are part
//! done at once) and 28 not started; `all part-done`, every job at a random
//! unit (no two jobs share a plan).
//! Latency estimates are synthetic (Band's FLOPs + β·bytes scaling from
//! per-processor base figures); they shape the decisions, not their cost.
//! A baseline in the same run: `sel` (no slack ordering, no re-planning
//! loop) on the same states.
//!
//! Usage: `cargo run --release -p scheduler-rt --example decision_time -- [SAMPLES]`

use graph_ir::onnx::{ImportOptions, import_file};
use graph_ir::rng::SplitMix64;
use multi_dnn::core::estimator::{Estimator, EstimatorParams};
use multi_dnn::core::report::quantile_or_zero;
use multi_dnn::core::{Job, JobMap, Running, Task, View, WorkerState};
use multi_dnn::policy::{Lst, Policy, Sel};
use multi_dnn::{JobSpec, ModelUnits, OpSupport, analyze};
use std::collections::VecDeque;
use std::time::Instant;

const MODELS: [&str; 4] = ["resnet18", "mobilenet_v2", "efficientnet_b0", "regnet_x_1_6gf"];

fn set(ops: &[&str]) -> std::collections::BTreeSet<String> {
    ops.iter().map(|s| s.to_string()).collect()
}

/// A random state: 32 jobs and the workers' occupancy.
fn state(
    rng: &mut SplitMix64,
    models: &[ModelUnits],
    workers: usize,
    part_done: u64,
) -> (JobMap<Job>, Vec<Task>, Vec<WorkerState>) {
    let now = 1000.0;
    let mut jobs = JobMap::default();
    let mut queue = Vec::new();
    for id in 0..32u64 {
        let model = (id % 4) as usize;
        let m = &models[model];
        let mut done = vec![0; m.regions.len()];
        if let Some(d) = done.first_mut().filter(|_| id < part_done) {
            *d = (rng.next_f64() * m.regions[0].units.len() as f64) as usize;
        }
        let job = Job {
            id,
            spec: JobSpec {
                app: model,
                model,
                arrival_ms: now - 50.0 * rng.next_f64(),
                slo_ms: Some(20.0 + 100.0 * rng.next_f64()),
                frame: None,
                content: 0.0,
            },
            done,
            running: vec![false; m.regions.len()],
        };
        for r in 0..m.regions.len() {
            if job.region_ready(m, r) {
                queue.push(Task { job: id, region: r });
            }
        }
        jobs.insert(id, job);
    }
    let states = (0..workers)
        .map(|w| WorkerState {
            name: format!("p{w}"),
            available: true,
            running: (w > 0).then(|| Running {
                seq: w as u64,
                task: Task { job: 1000, region: 0 },
                model: 0,
                candidate: 0,
                start_ms: Some(now - 5.0),
                expected_ms: 5.0 + 20.0 * rng.next_f64(),
            }),
            local: VecDeque::new(),
            render: None,
        })
        .collect();
    (jobs, queue, states)
}

/// The `supports` list of processor `name` in the device profile `text`.
fn listed(text: &str, name: &str) -> Result<OpSupport, Box<dyn std::error::Error>> {
    let v: toml::Value = toml::from_str(text)?;
    let list = v
        .get("processors")
        .and_then(|p| p.get(name))
        .and_then(|p| p.get("supports"))
        .and_then(|s| s.as_array());
    Ok(match list {
        Some(a) => OpSupport::Only(a.iter().filter_map(|x| x.as_str()).map(String::from).collect()),
        None => OpSupport::All,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let samples: usize = std::env::args().nth(1).map_or(Ok(2000), |s| s.parse())?;
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let profile = std::fs::read_to_string(here.join("../../configs/devices/snapdragon855.toml"))?;
    let delegates = [
        listed(&profile, "cpu")?,
        listed(&profile, "gpu")?,
        listed(&profile, "dsp")?,
        listed(&profile, "dsp")?,
    ];
    let fragmenting = [
        OpSupport::All,
        OpSupport::AllBut(set(&["DepthwiseConv"])),
        OpSupport::AllBut(set(&["Gemm", "MaxPool"])),
        OpSupport::Only(set(&["Conv", "Relu", "Add", "BatchNormalization"])),
    ];
    for (setting, support) in [("delegates", delegates), ("fragmenting", fragmenting)] {
        println!("== {setting}");
        bench(here, &support, samples)?;
    }
    println!("Band (Pixel 4 primary core, EagleEye): 49 µs average per decision");
    Ok(())
}

fn bench(here: &std::path::Path, support: &[OpSupport], samples: usize) -> Result<(), Box<dyn std::error::Error>> {
    let names: Vec<String> = ["cpu", "gpu", "dsp", "npu"].iter().map(|s| s.to_string()).collect();
    let options = ImportOptions {
        input_shapes: Vec::new(),
        random_weights: Some(1),
    };
    let mut models = Vec::new();
    for m in MODELS {
        let g = import_file(here.join(format!("../../fixtures/models/{m}.onnx")), &options)?;
        let u = analyze(&g, &names, support)?;
        println!(
            "{m}: {} units, {} candidates, {} regions",
            u.units.len(),
            u.candidates.len(),
            u.regions.len()
        );
        models.push(u);
    }
    let mut est = Estimator::new(EstimatorParams::default(), &[false, true, true, true], &models);
    let base_ms = [40.0, 20.0, 15.0, 10.0];
    for (m, u) in models.iter().enumerate() {
        for (w, ms) in base_ms.iter().enumerate() {
            if let Some(c) = u.largest_on(w) {
                est.set_base(m, c, w, ms * (1.0 + m as f64 * 0.3));
            }
        }
    }
    for (queue_kind, part_done) in [("typical", 4), ("all part-done", 32)] {
        let mut rng = SplitMix64::new(42);
        let mut lst_us = Vec::new();
        let mut sel_us = Vec::new();
        let mut assigned = 0usize;
        for k in 0..samples + 100 {
            let (jobs, queue, workers) = state(&mut rng, &models, names.len(), part_done);
            let view = View {
                now_ms: 1000.0,
                queue: &queue,
                jobs: &jobs,
                models: &models,
                workers: &workers,
                estimator: &est,
                thermal: None,
            };
            let mut lst = Lst::new(false);
            let mut sel = Sel;
            let t = Instant::now();
            let a = lst.schedule(&view);
            let l = t.elapsed().as_secs_f64() * 1e6;
            let t = Instant::now();
            let b = sel.schedule(&view);
            let s = t.elapsed().as_secs_f64() * 1e6;
            if k >= 100 {
                lst_us.push(l);
                sel_us.push(s);
                assigned += a.len();
            }
            std::hint::black_box((a, b));
        }
        println!(
            "{queue_kind} queue: {samples} decisions, 4 processors, 32 queued jobs ({part_done} part done); {assigned} assignments made by lst"
        );
        println!(
            "  lst (slack order + DP per job): median {:.1} µs, p99 {:.1} µs, min {:.1} µs",
            quantile_or_zero(&lst_us, 0.5),
            quantile_or_zero(&lst_us, 0.99),
            quantile_or_zero(&lst_us, 0.0)
        );
        println!(
            "  sel (baseline, same states):    median {:.1} µs, p99 {:.1} µs; lst / sel = {:.2}x",
            quantile_or_zero(&sel_us, 0.5),
            quantile_or_zero(&sel_us, 0.99),
            quantile_or_zero(&lst_us, 0.5) / quantile_or_zero(&sel_us, 0.5)
        );
    }
    Ok(())
}
