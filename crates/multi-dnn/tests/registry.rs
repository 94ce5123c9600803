//! Adding a policy, as ARCHITECTURE.md's "How to add a policy" walks a
//! newcomer through it: the policy and its [`PolicyEntry`] in one file
//! (here, this test), one line that registers it, and it runs under both
//! worlds, the simulator and real workers, reached by name through the
//! registry like every shipped policy, in the sweep every `serve` and
//! `simulate` command runs ([`experiment::run`]).

use graph_ir::builder::Builder;
use graph_ir::ops::UnaryOp;
use multi_dnn::core::report::RunLog;
use multi_dnn::core::workload::Workload;
use multi_dnn::core::workload_file::parse;
use multi_dnn::experiment::{self, Outcome, SimSetup, SimWorld, Sweep};
use multi_dnn::policy::{Needs, PolicyEntry, PolicyOptions};
use multi_dnn::serve::Server;
use multi_dnn::serve::world::{ServeSetup, ServeWorld};
use multi_dnn::sim::{Latency, SimOptions, Truth};
use multi_dnn::{Assignment, Estimator, EstimatorParams, OpSupport, Policy, Registry, Requeue, View};
use scheduler_rt::ProcessorConfig;

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

/// One app sending `g` (written next to the workload) at 50 fps for 0.3 s.
fn workload(g: &graph_ir::Graph) -> Workload {
    let dir = std::env::temp_dir().join(format!("stretch-registry-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("chain.onnx"), graph_ir::onnx::export_bytes(g).unwrap()).unwrap();
    let text =
        "seed = 1\nduration_s = 0.3\n[[app]]\nname = \"a\"\nmodel = \"chain.onnx\"\narrival = \"periodic\"\nfps = 50\n";
    parse(text, &dir, "w.toml").unwrap()
}

#[test]
fn a_policy_defined_here_runs_under_simulate_and_serve_through_the_registry() {
    let registry = Registry::builtin().with(LAST_IDLE);
    assert!(registry.get("li").is_some());
    assert!(registry.plain_names().contains(&"last-idle"));
    assert!(registry.help().contains("last-idle (or li): "));
    assert!(
        Registry::builtin().get("last-idle").is_none(),
        "with() changed the builtin list"
    );
    let names = vec!["cpu0".to_string(), "cpu1".to_string()];
    let g = chain();
    let support = vec![OpSupport::All, OpSupport::All];
    let w = workload(&g);
    let sweep = Sweep {
        multipliers: vec![None],
        policies: vec!["last-idle".into()],
        rounds: 1,
        options: PolicyOptions::default(),
    };

    let units = vec![multi_dnn::analyze(&g, &names, &support).unwrap()];
    let n_candidates = units[0].candidates.len();
    let mut est = Estimator::new(EstimatorParams::default(), &[false, false], &units);
    for c in 0..n_candidates {
        for wk in 0..2 {
            est.set_base(0, c, wk, 1.0);
        }
    }
    let mut sim = SimWorld {
        names: names.clone(),
        setups: vec![SimSetup {
            units: units.clone(),
            estimator: est.clone(),
            truth: Truth {
                table: vec![
                    (0..n_candidates)
                        .map(|_| vec![Latency::exact(1.0), Latency::exact(1.0)])
                        .collect(),
                ],
                ..Truth::default()
            },
        }],
        choose: None,
        options: SimOptions::default(),
    };
    let out = experiment::run(&mut sim, &registry, &w, &[1.0], &sweep, &mut |_| {}).unwrap();
    check(&out, "simulated");

    let procs: Vec<ProcessorConfig> = ["cpu0=pool", "cpu1=pool"].iter().map(|s| s.parse().unwrap()).collect();
    let server = Server::load(&procs, &support, vec![g], scheduler_rt::default_factory(), &mut |_| {}).unwrap();
    let mut served = ServeWorld {
        setups: vec![ServeSetup {
            server: &server,
            units,
            estimator: est,
        }],
        choose: None,
        thermal: None,
        progress: Box::new(|_: &str, _: f64, _: &RunLog, _: usize| {}),
        heat: Vec::new(),
    };
    let out = experiment::run(&mut served, &registry, &w, &[1.0], &sweep, &mut |_| {}).unwrap();
    check(&out, "served");
}

/// `simulate --help` and `serve --help` print [`Registry::policy_help`]
/// and `simulate --help` [`Registry::thermal_run_list`]: the policy added
/// with one registry line is listed there, after the built-in plain ones
/// and before those that need a render task, with its alias.
#[test]
fn a_policy_defined_here_is_in_the_help_the_commands_print() {
    let registry = Registry::builtin().with(LAST_IDLE);
    let help = registry.policy_help();
    assert!(
        help.contains("lst, lst-whole, last-idle (li); for workloads with a render task"),
        "{help}"
    );
    assert!(!Registry::builtin().policy_help().contains("last-idle"));
    assert!(
        registry.thermal_run_list().contains("last-idle (li)"),
        "{}",
        registry.thermal_run_list()
    );
    assert_eq!(registry.default_policy(false), "lst");
    let defaulted = registry.with_defaults("last-idle", "maxtotal-utility");
    assert!(
        defaulted
            .policy_help()
            .contains("Default: last-idle, or maxtotal-utility")
    );
}

/// Every request of the 0.3-s run at 50 fps completed under the policy,
/// each on worker 1 (the last idle one when requests arrive one at a time).
fn check(out: &[Outcome], world: &str) {
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].policy, "last-idle");
    let log = &out[0].log;
    assert_eq!(log.completed.len(), 15, "{world}: {} completed", log.completed.len());
    assert!(!log.spans.is_empty(), "{world}: no spans");
    assert!(
        log.spans.iter().all(|s| s.worker == 1),
        "{world}: a request ran on worker 0"
    );
}
