//! A workload at the limits the workload file accepts simulates in bounded
//! time under every Band policy: Poisson arrivals at `MAX_RATE_HZ` onto
//! processors far slower, so that the queue grows by thousands of tasks.

use graph_ir::ops::UnaryOp;
use multi_dnn::core::workload::Workload;
use multi_dnn::core::workload_file::{MAX_RATE_HZ, parse};
use multi_dnn::sim::{Latency, SimOptions, Truth, simulate};
use multi_dnn::{Estimator, EstimatorParams, OpSupport, PolicyOptions, Scheduler, analyze, policy_by_name};
use scheduler_rt::testing::unary_chain;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn workload(duration_s: f64) -> Workload {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models");
    let text = format!(
        "seed = 1\nduration_s = {duration_s}\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"poisson\"\nrate = {MAX_RATE_HZ}\nslo_ms = 20\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"poisson\"\nrate = 10\nslo_ms = 5\n"
    );
    parse(&text, &dir, "w.toml").unwrap()
}

#[test]
fn a_backlog_at_the_rate_limit_simulates_in_bounded_time() {
    let names: Vec<String> = (0..2).map(|i| format!("w{i}")).collect();
    let ops = [UnaryOp::Relu, UnaryOp::Sigmoid, UnaryOp::Tanh, UnaryOp::Relu];
    let units = analyze(&unary_chain(&ops).unwrap(), &names, &[OpSupport::All, OpSupport::All]).unwrap();
    let models = vec![units.clone(), units];
    let table: Vec<_> = models
        .iter()
        .map(|m| {
            m.candidates
                .iter()
                .map(|c| {
                    (0..2)
                        .map(|w| Latency::exact((c.last - c.first + 1) as f64 * (1.0 + w as f64)))
                        .collect()
                })
                .collect()
        })
        .collect();
    let truth = Truth {
        table,
        ..Truth::default()
    };
    let w = workload(1.5);
    for policy in ["lst", "sel", "heft", "fixed", "rr"] {
        let mut est = Estimator::new(EstimatorParams::default(), &[false, false], &models);
        for (m, model) in models.iter().enumerate() {
            for c in 0..model.candidates.len() {
                for worker in 0..2 {
                    est.set(m, c, worker, truth.table[m][c][worker].alone_ms);
                }
            }
        }
        let p = policy_by_name(policy, &PolicyOptions::for_workload(&w, &names)).unwrap();
        let mut sched = Scheduler::new(models.clone(), &names, p, est);
        let start = Instant::now();
        let log = simulate(
            &mut sched,
            &w,
            vec![Some(20.0), Some(5.0)],
            &truth,
            SimOptions::default(),
        )
        .unwrap();
        let took = start.elapsed();
        assert!(!log.completed.is_empty(), "{policy}: nothing completed");
        assert!(
            took < Duration::from_secs(15),
            "{policy}: {took:?} for 1.5 s at {MAX_RATE_HZ}/s"
        );
    }
}
