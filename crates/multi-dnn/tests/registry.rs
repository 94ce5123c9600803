//! Adding a policy, as ARCHITECTURE.md's "How to add a policy" walks a
//! newcomer through it: the policy and its [`PolicyEntry`] in one file
//! (here, this test), one line that registers it, and it runs under both
//! worlds, the simulator and real workers, reached by name through the
//! registry like every shipped policy.

use graph_ir::builder::Builder;
use graph_ir::ops::UnaryOp;
use multi_dnn::core::report::RunLog;
use multi_dnn::core::workload::{Workload, parse};
use multi_dnn::policy::{Needs, PolicyEntry, PolicyOptions};
use multi_dnn::serve::Server;
use multi_dnn::sim::{Latency, SimOptions, Truth, simulate};
use multi_dnn::{Assignment, Estimator, EstimatorParams, OpSupport, Policy, Registry, Requeue, Scheduler, View};
use scheduler_rt::ProcessorConfig;
use std::path::Path;

/// Every task on the last idle worker that can run its whole remaining
/// region, head of the queue first.
struct LastIdle;

const LAST_IDLE: PolicyEntry = PolicyEntry {
    name: "last-idle",
    aliases: &["li"],
    summary: "each queued task on the highest-numbered idle worker",
    needs: Needs {
        thermal: false,
        render: false,
    },
    make: |_| Ok(Box::new(LastIdle)),
};

impl Policy for LastIdle {
    fn name(&self) -> &'static str {
        "last-idle"
    }

    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        let mut idle = view.idle();
        let mut out = Vec::new();
        for task in view.queue {
            let job = view.job(task.job);
            let m = view.model_of(*task);
            let first = job.next_unit(m, task.region);
            let end = m.regions[task.region].units.end;
            let Some(candidate) = m.candidate(first, end - 1) else {
                continue;
            };
            let Some(pos) = idle.iter().rposition(|w| m.candidates[candidate].support.contains(*w)) else {
                continue;
            };
            let worker = idle.remove(pos);
            out.push(Assignment {
                task: *task,
                candidate,
                worker,
            });
        }
        out
    }

    fn requeue(&self) -> Requeue {
        Requeue::Head
    }
}

fn chain() -> graph_ir::Graph {
    let mut b = Builder::new("chain");
    let mut y = b.input("x", &[1, 4, 8, 8]).unwrap();
    for (i, op) in [UnaryOp::Relu, UnaryOp::Sigmoid, UnaryOp::Relu].into_iter().enumerate() {
        y = b.unary(&format!("op{i}"), y, op).unwrap();
    }
    b.finish("y", y).unwrap()
}

fn workload() -> Workload {
    let text =
        "seed = 1\nduration_s = 0.3\n[[app]]\nname = \"a\"\nmodel = \"chain.onnx\"\narrival = \"periodic\"\nfps = 50\n";
    parse(text, Path::new("."), "w.toml").unwrap()
}

#[test]
fn a_policy_defined_here_runs_under_simulate_and_serve_through_the_registry() {
    let registry = Registry::builtin().with(LAST_IDLE);
    assert!(registry.get("li").is_some());
    assert!(registry.plain_names().contains(&"last-idle"));
    assert!(registry.help().contains("last-idle (or li): "));
    let names = vec!["cpu0".to_string(), "cpu1".to_string()];
    let g = chain();
    let support = vec![OpSupport::All, OpSupport::All];
    let w = workload();

    let units = vec![multi_dnn::analyze(&g, &names, &support).unwrap()];
    let n_candidates = units[0].candidates.len();
    let mut est = Estimator::new(EstimatorParams::default(), &[false, false], &units);
    for c in 0..n_candidates {
        for wk in 0..2 {
            est.set_base(0, c, wk, 1.0);
        }
    }
    let policy = registry.make("last-idle", &PolicyOptions::default()).unwrap();
    let mut sched = Scheduler::new(units.clone(), &names, policy, est.clone());
    let truth = Truth {
        table: vec![
            (0..n_candidates)
                .map(|_| vec![Latency::exact(1.0), Latency::exact(1.0)])
                .collect(),
        ],
        ..Truth::default()
    };
    let log = simulate(&mut sched, &w, vec![None], &truth, SimOptions::default()).unwrap();
    check(&log, "simulated");

    let procs: Vec<ProcessorConfig> = ["cpu0=pool", "cpu1=pool"].iter().map(|s| s.parse().unwrap()).collect();
    let server = Server::load(&procs, &support, vec![g], scheduler_rt::default_factory(), &mut |_| {}).unwrap();
    let policy = registry.make("li", &PolicyOptions::default()).unwrap();
    let mut sched = Scheduler::new(units, &names, policy, est);
    let log = server.run(&mut sched, &w, vec![None], &mut |_, _, _| {}).unwrap();
    check(&log, "served");
}

/// Every request of the 0.3-s run at 50 fps completed, each on worker 1
/// (the last idle one when requests arrive one at a time).
fn check(log: &RunLog, world: &str) {
    assert_eq!(log.completed.len(), 15, "{world}: {} completed", log.completed.len());
    assert!(!log.spans.is_empty(), "{world}: no spans");
    assert!(
        log.spans.iter().all(|s| s.worker == 1),
        "{world}: a request ran on worker 0"
    );
}
