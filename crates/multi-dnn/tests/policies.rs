//! The multi-DNN policies: Band's dynamic program against brute force,
//! Band's Fig. 12 for LST, and each baseline's distinctive decision.

use graph_ir::ops::UnaryOp;
use graph_ir::rng::SplitMix64;
use multi_dnn::core::{JobMap, Running};
use multi_dnn::policy::plan::{job_plan, region_plan, shortest};
use multi_dnn::policy::{Fixed, Heft, Lst, PolicyOptions, RoundRobin, Sel};
use multi_dnn::{
    Assignment, Estimator, EstimatorParams, Job, JobSpec, ModelUnits, OpSupport, Policy, Scheduler, Task, View,
    WorkerState, analyze, policy_by_name,
};
use proptest::prelude::*;
use scheduler_rt::testing::{support_only, unary_chain};
use std::collections::{HashMap, VecDeque};

const CPU: usize = 0;
const NPU: usize = 1;

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("w{i}")).collect()
}

fn model(ops: &[UnaryOp], support: &[OpSupport]) -> ModelUnits {
    analyze(&unary_chain(ops).unwrap(), &names(support.len()), support).unwrap()
}

/// Sets the estimate of units `first..=last` of `model` on `worker`.
fn set(e: &mut Estimator, models: &[ModelUnits], model: usize, (first, last): (usize, usize), worker: usize, ms: f64) {
    let c = models[model].candidate(first, last).unwrap();
    e.set(model, c, worker, ms);
}

fn idle_workers(n: usize) -> Vec<WorkerState> {
    (0..n)
        .map(|i| WorkerState {
            name: format!("w{i}"),
            available: true,
            running: None,
            local: VecDeque::new(),
            render: None,
        })
        .collect()
}

fn job(id: u64, model: usize, m: &ModelUnits, arrival_ms: f64, slo_ms: Option<f64>) -> Job {
    Job {
        id,
        spec: JobSpec {
            app: model,
            model,
            arrival_ms,
            slo_ms,
            frame: None,
            content: 0.0,
        },
        done: vec![0; m.regions.len()],
        running: vec![false; m.regions.len()],
    }
}

fn spec(model: usize, arrival_ms: f64, slo_ms: Option<f64>) -> JobSpec {
    JobSpec {
        app: model,
        model,
        arrival_ms,
        slo_ms,
        frame: None,
        content: 0.0,
    }
}

/// The best finish over every partition of units `pos..n` and every
/// worker choice, from time `t`.
fn brute(n: usize, pos: usize, t: f64, waits: &[f64], est: &dyn Fn(usize, usize, usize) -> f64) -> f64 {
    if pos == n {
        return t;
    }
    let mut best = f64::INFINITY;
    for j in pos..n {
        for (k, w) in waits.iter().enumerate() {
            let next = w.max(t) + est(pos, j, k);
            if next.is_finite() {
                best = best.min(brute(n, j + 1, next, waits, est));
            }
        }
    }
    best
}

/// Random supports (every unit on ≥ 1 worker, adjacent units different
/// when `distinct`), estimates of every supported run, and waits.
struct Instance {
    support: Vec<u64>,
    est: HashMap<(usize, usize, usize), f64>,
    waits: Vec<f64>,
    start: f64,
}

fn instance(rng: &mut SplitMix64, n: usize, p: usize, distinct: bool) -> Instance {
    let mut support: Vec<u64> = Vec::new();
    for _ in 0..n {
        loop {
            let s = 1 + rng.below((1 << p) - 1) as u64;
            if !distinct || support.last() != Some(&s) {
                support.push(s);
                break;
            }
        }
    }
    let mut est = HashMap::new();
    for i in 0..n {
        let mut set = u64::MAX;
        for (j, unit) in support.iter().enumerate().skip(i) {
            set &= unit;
            for k in (0..p).filter(|k| set & (1 << k) != 0) {
                est.insert((i, j, k), 0.5 + 40.0 * f64::from(rng.next_f32()));
            }
        }
    }
    let waits = (0..p)
        .map(|_| match rng.below(6) {
            0 => f64::INFINITY,
            1 => 0.0,
            _ => 30.0 * f64::from(rng.next_f32()),
        })
        .collect();
    let start = if rng.below(2) == 0 {
        0.0
    } else {
        20.0 * f64::from(rng.next_f32())
    };
    Instance {
        support,
        est,
        waits,
        start,
    }
}

fn check_against_brute(n: usize, start: f64, waits: &[f64], est: &dyn Fn(usize, usize, usize) -> f64) {
    let got = shortest(n, start, waits, est);
    let want = brute(n, 0, start, waits, est);
    if !want.is_finite() {
        assert!(
            got.finish.is_infinite() && got.first.is_none(),
            "{got:?}, brute force {want}"
        );
        return;
    }
    assert!((got.finish - want).abs() < 1e-9, "dp {} brute force {want}", got.finish);
    let s = got.first.unwrap();
    assert_eq!(s.first, 0);
    let after = waits[s.worker].max(start) + est(0, s.last, s.worker);
    let via_first = brute(n, s.last + 1, after, waits, est);
    assert!(
        (via_first - want).abs() < 1e-9,
        "first step {s:?} reaches {via_first}, best {want}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Band's O(p·n²) program finds the best of the O(pⁿ) sequences, and
    /// its first step starts a best sequence.
    #[test]
    fn dp_equals_brute_force(n in 1usize..=8, p in 1usize..=4, seed in any::<u64>()) {
        let inst = instance(&mut SplitMix64::new(seed), n, p, false);
        let est = |i: usize, j: usize, k: usize| inst.est.get(&(i, j, k)).copied().unwrap_or(f64::INFINITY);
        check_against_brute(n, inst.start, &inst.waits, &est);
    }
}

/// The view-based plan over a real model's units and candidates (some
/// units already done) equals brute force on the same estimates.
#[test]
fn region_plan_on_analyzed_models_equals_brute_force() {
    let ops = [
        UnaryOp::Relu,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::HardSwish,
        UnaryOp::Clip { min: None, max: None },
        UnaryOp::HardSigmoid { alpha: 0.2, beta: 0.5 },
    ];
    let mut rng = SplitMix64::new(7);
    for _ in 0..300 {
        let p = 1 + rng.below(4);
        let n = if p == 1 { 1 } else { 1 + rng.below(6) };
        let inst = instance(&mut rng, n, p, true);
        let mut sets: Vec<u64> = inst.support.clone();
        sets.sort_unstable();
        sets.dedup();
        let op_of = |s: u64| ops[sets.iter().position(|x| *x == s).unwrap()];
        let unit_ops: Vec<UnaryOp> = inst.support.iter().map(|s| op_of(*s)).collect();
        let support: Vec<OpSupport> = (0..p)
            .map(|k| {
                let names: Vec<&str> = sets
                    .iter()
                    .filter(|s| *s & (1 << k) != 0)
                    .map(|s| op_of(*s).onnx_name())
                    .collect();
                support_only(&names)
            })
            .collect();
        let models = vec![model(&unit_ops, &support)];
        assert_eq!(models[0].units.len(), n);
        let mut e = Estimator::new(EstimatorParams::default(), &vec![false; p], &models);
        for ((i, j, k), ms) in &inst.est {
            set(&mut e, &models, 0, (*i, *j), *k, *ms);
        }
        let mut workers = idle_workers(p);
        for (k, w) in inst.waits.iter().enumerate() {
            workers[k].available = w.is_finite();
        }
        let jobs = JobMap::default();
        let view = View {
            now_ms: 0.0,
            queue: &[],
            jobs: &jobs,
            models: &models,
            workers: &workers,
            estimator: &e,
            thermal: None,
        };
        let from = rng.below(n);
        let plan = region_plan(&view, 0, (0, from, inst.start), &inst.waits, false, &[]);
        let est = |i: usize, j: usize, k: usize| {
            let ms = inst.est.get(&(from + i, from + j, k)).copied().unwrap_or(f64::INFINITY);
            if workers[k].available { ms } else { f64::INFINITY }
        };
        let want = brute(n - from, 0, inst.start, &inst.waits, &est);
        if want.is_finite() {
            assert!((plan.finish - want).abs() < 1e-9, "{plan:?} brute force {want}");
            let (c, _) = plan.first.unwrap();
            assert_eq!(models[0].candidates[c].first, from);
        } else {
            assert!(plan.finish.is_infinite() && plan.first.is_none());
        }
    }
}

/// Fig. 12's two models: Job 1 runs A (CPU, NPU), B (NPU), C (CPU); Job 2
/// runs E (CPU, NPU), F (NPU).
fn fig12() -> (Vec<ModelUnits>, Estimator) {
    let support = [
        OpSupport::AllBut(["Sigmoid".to_string(), "Clip".to_string()].into()),
        support_only(&["Relu", "Sigmoid", "HardSwish", "Clip"]),
    ];
    let job1 = model(&[UnaryOp::Relu, UnaryOp::Sigmoid, UnaryOp::Tanh], &support);
    let job2 = model(&[UnaryOp::HardSwish, UnaryOp::Clip { min: None, max: None }], &support);
    assert_eq!((job1.units.len(), job2.units.len()), (3, 2));
    let models = vec![job1, job2];
    let mut e = Estimator::new(EstimatorParams::default(), &[false, true], &models);
    set(&mut e, &models, 0, (0, 0), CPU, 20.0);
    set(&mut e, &models, 0, (0, 0), NPU, 4.0);
    set(&mut e, &models, 0, (1, 1), NPU, 4.0);
    set(&mut e, &models, 0, (0, 1), NPU, 6.0);
    set(&mut e, &models, 0, (2, 2), CPU, 4.0);
    set(&mut e, &models, 1, (0, 0), CPU, 20.0);
    set(&mut e, &models, 1, (0, 0), NPU, 6.0);
    set(&mut e, &models, 1, (1, 1), NPU, 6.0);
    set(&mut e, &models, 1, (0, 1), NPU, 10.0);
    (models, e)
}

/// Band Fig. 12: slacks 80 − 10 = 70 and 100 − 10 = 90, so LST starts Job
/// 1's {A,B} on the NPU although Job 2 is at the head of the queue.
#[test]
fn lst_picks_the_least_slack_job_of_band_fig_12() {
    let (models, e) = fig12();
    let job2 = job(0, 1, &models[1], 0.0, Some(100.0));
    let job1 = job(1, 0, &models[0], 0.0, Some(80.0));
    let jobs: JobMap<Job> = [(0, job2.clone()), (1, job1.clone())].into_iter().collect();
    let queue = [Task { job: 0, region: 0 }, Task { job: 1, region: 0 }];
    let workers = idle_workers(2);
    let view = View {
        now_ms: 0.0,
        queue: &queue,
        jobs: &jobs,
        models: &models,
        workers: &workers,
        estimator: &e,
        thermal: None,
    };
    let ab = models[0].candidate(0, 1).unwrap();
    let ef = models[1].candidate(0, 1).unwrap();
    let w = [0.0, 0.0];
    let p1 = job_plan(&view, &job1, &w, false);
    let p2 = job_plan(&view, &job2, &w, false);
    assert_eq!((p1.latency, p1.regions[0].first), (10.0, Some((ab, NPU))));
    assert_eq!((p2.latency, p2.regions[0].first), (10.0, Some((ef, NPU))));
    let lst = Lst::new(false);
    assert_eq!(lst.slacks(&view), [90.0, 70.0]);
    let got = Lst::new(false).schedule(&view);
    assert_eq!(
        got,
        [Assignment {
            task: queue[1],
            candidate: ab,
            worker: NPU
        }]
    );

    let mut s = Scheduler::new(models.clone(), &names(2), Box::new(Lst::new(false)), e);
    s.submit(spec(1, 0.0, Some(100.0)));
    s.submit(spec(0, 0.0, Some(80.0)));
    let d = s.schedule(0.0).unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].job, d[0].candidate, d[0].worker), (1, ab, NPU));
}

/// A job that can no longer meet its SLO yields to one that still can,
/// even from the queue's head with the least slack, and runs once a worker
/// is free: it is counted late, never dropped.
#[test]
fn lst_runs_late_jobs_after_feasible_ones_and_never_drops_them() {
    let support = [OpSupport::All, OpSupport::All];
    let models = vec![model(&[UnaryOp::Relu], &support)];
    let mut e = Estimator::new(EstimatorParams::default(), &[false, true], &models);
    set(&mut e, &models, 0, (0, 0), CPU, 50.0);
    set(&mut e, &models, 0, (0, 0), NPU, 5.0);
    let mut s = Scheduler::new(models, &names(2), Box::new(Lst::new(false)), e);
    let late = s.submit(spec(0, 0.0, Some(3.0)));
    let feasible = s.submit(spec(0, 0.0, Some(100.0)));
    let d = s.schedule(0.0).unwrap();
    assert_eq!(
        d.iter().map(|d| (d.job, d.worker)).collect::<Vec<_>>(),
        [(feasible, NPU)]
    );
    assert_eq!(s.queue().map(|t| t.job).collect::<Vec<_>>(), [late]);
    assert!(s.workers()[CPU].idle());
    let done = s.finish(5.0, NPU, d[0].seq, Some(5.0)).unwrap();
    assert!(done.met_slo());
    let d = s.schedule(5.0).unwrap();
    assert_eq!(d.iter().map(|d| (d.job, d.worker)).collect::<Vec<_>>(), [(late, NPU)]);
    let done = s.finish(10.0, NPU, d[0].seq, Some(5.0)).unwrap();
    assert_eq!(done.job, late);
    assert!(!done.met_slo());
}

/// With `whole_model_only` the region's remainder runs as one subgraph
/// even where a split would be faster.
#[test]
fn lst_whole_model_only_never_splits_a_region() {
    let support = [OpSupport::All, support_only(&["Relu"])];
    let models = vec![model(&[UnaryOp::Relu, UnaryOp::Tanh], &support)];
    let mut e = Estimator::new(EstimatorParams::default(), &[false, true], &models);
    set(&mut e, &models, 0, (0, 0), NPU, 1.0);
    set(&mut e, &models, 0, (0, 0), CPU, 10.0);
    set(&mut e, &models, 0, (1, 1), CPU, 1.0);
    set(&mut e, &models, 0, (0, 1), CPU, 20.0);
    for (whole, want) in [(false, ((0, 0), NPU)), (true, ((0, 1), CPU))] {
        let mut s = Scheduler::new(models.clone(), &names(2), Box::new(Lst::new(whole)), e.clone());
        s.submit(spec(0, 0.0, Some(50.0)));
        let d = s.schedule(0.0).unwrap();
        let c = &models[0].candidates[d[0].candidate];
        assert_eq!(((c.first, c.last), d[0].worker), want, "whole_model_only = {whole}");
    }
}

/// Two parallel branches: the job's latency is its critical path, a
/// running branch counts from its worker's remaining time, and the merge
/// waits for both branches.
#[test]
fn job_latency_follows_the_critical_path_of_a_dag() {
    let g = scheduler_rt::testing::two_branch(8, 1).unwrap();
    let models = vec![analyze(&g, &names(2), &[OpSupport::All, OpSupport::All]).unwrap()];
    let m = &models[0];
    assert_eq!(m.regions.len(), 4);
    assert!(m.regions.iter().all(|r| r.units.len() == 1));
    let mut e = Estimator::new(EstimatorParams::default(), &[false, false], &models);
    let ms = [[1.0, 1.0], [7.0, 7.0], [3.0, 10.0], [4.0, 2.0]];
    for (r, row) in ms.iter().enumerate() {
        let u = m.regions[r].units.start;
        for (k, v) in row.iter().enumerate() {
            set(&mut e, &models, 0, (u, u), k, *v);
        }
    }
    let mut j = job(0, 0, m, 0.0, None);
    j.done[0] = 1;
    j.running[1] = true;
    let mut workers = idle_workers(2);
    workers[0].running = Some(Running {
        seq: 0,
        task: Task { job: 0, region: 1 },
        model: 0,
        candidate: m.whole_region(1).unwrap(),
        start_ms: Some(0.0),
        expected_ms: 7.0,
    });
    let jobs: JobMap<Job> = [(0, j.clone())].into_iter().collect();
    let queue = [Task { job: 0, region: 2 }];
    let view = View {
        now_ms: 2.0,
        queue: &queue,
        jobs: &jobs,
        models: &models,
        workers: &workers,
        estimator: &e,
        thermal: None,
    };
    let w = [5.0, 0.0];
    let plan = job_plan(&view, &j, &w, false);
    let finishes: Vec<f64> = plan.regions.iter().map(|r| r.finish).collect();
    assert_eq!(finishes, [0.0, 5.0, 8.0, 10.0]);
    assert_eq!(plan.latency, 10.0);
    assert_eq!(plan.regions[1].first, None);
    assert_eq!(plan.regions[2].first, Some((m.whole_region(2).unwrap(), 0)));
}

/// TFLite-style: units the chosen NPU lacks fall back to the CPU, the rest
/// stays on the NPU, and an NPU outage sends everything left to the CPU.
#[test]
fn fixed_falls_back_to_the_cpu_for_unsupported_units() {
    let support = [OpSupport::All, support_only(&["Relu"])];
    let models = vec![model(
        &[UnaryOp::Relu, UnaryOp::Tanh, UnaryOp::Relu, UnaryOp::Tanh],
        &support,
    )];
    assert_eq!(models[0].units.len(), 4);
    let mut e = Estimator::new(EstimatorParams::default(), &[false, true], &models);
    for (c, cand) in models[0].candidates.iter().enumerate() {
        let len = (cand.last - cand.first + 1) as f64;
        e.set(0, c, CPU, 10.0 * len);
        e.set(0, c, NPU, len);
    }
    let mut s = Scheduler::new(models.clone(), &names(2), Box::new(Fixed::new(vec![None])), e);
    s.submit(spec(0, 0.0, None));
    let mut got = Vec::new();
    for t in 0..3 {
        if t == 2 {
            s.set_available(NPU, false);
        }
        let d = s.schedule(t as f64).unwrap();
        assert_eq!(d.len(), 1, "{d:?}");
        let c = &models[0].candidates[d[0].candidate];
        got.push(((c.first, c.last), d[0].worker));
        s.finish(t as f64 + 1.0, d[0].worker, d[0].seq, Some(1.0));
    }
    assert_eq!(got, [((0, 0), NPU), ((1, 1), CPU), ((2, 3), CPU)]);
}

/// Fixed queues every job at once on its processor, busy or not.
#[test]
fn fixed_queues_every_job_on_its_processor() {
    let models = vec![model(&[UnaryOp::Relu], &[OpSupport::All, OpSupport::All])];
    let mut e = Estimator::new(EstimatorParams::default(), &[false, true], &models);
    set(&mut e, &models, 0, (0, 0), CPU, 1.0);
    set(&mut e, &models, 0, (0, 0), NPU, 30.0);
    let mut s = Scheduler::new(models, &names(2), Box::new(Fixed::new(vec![Some(NPU)])), e);
    s.submit(spec(0, 0.0, None));
    assert_eq!(s.schedule(0.0).unwrap()[0].worker, NPU);
    s.submit(spec(0, 1.0, None));
    s.submit(spec(0, 1.0, None));
    assert!(s.schedule(1.0).unwrap().is_empty());
    assert_eq!(s.workers()[NPU].local.len(), 2);
    assert!(s.workers()[CPU].idle() && s.queue().next().is_none());
}

/// Round-robin starts each call after the last worker it used, even when
/// a lower-index worker is idle.
#[test]
fn round_robin_rotates_over_the_workers() {
    let models = vec![model(
        &[UnaryOp::Relu],
        &[OpSupport::All, OpSupport::All, OpSupport::All],
    )];
    let mut e = Estimator::new(EstimatorParams::default(), &[false; 3], &models);
    for k in 0..3 {
        set(&mut e, &models, 0, (0, 0), k, 1.0);
    }
    let mut s = Scheduler::new(models, &names(3), Box::new(RoundRobin::default()), e);
    let mut used = Vec::new();
    for t in 0..5 {
        s.submit(spec(0, t as f64, None));
        let d = s.schedule(t as f64).unwrap();
        used.push(d[0].worker);
        s.finish(t as f64 + 0.5, d[0].worker, d[0].seq, Some(1.0));
    }
    assert_eq!(used, [0, 1, 2, 0, 1]);
}

/// HEFT reserves the busy NPU (finish 4 + 5 ms) over the idle CPU (30 ms).
#[test]
fn heft_reserves_a_busy_faster_worker() {
    let models = vec![model(&[UnaryOp::Relu], &[OpSupport::All, OpSupport::All])];
    let mut e = Estimator::new(EstimatorParams::default(), &[false, true], &models);
    set(&mut e, &models, 0, (0, 0), CPU, 30.0);
    set(&mut e, &models, 0, (0, 0), NPU, 5.0);
    let mut s = Scheduler::new(models, &names(2), Box::new(Heft), e);
    s.submit(spec(0, 0.0, None));
    let d0 = s.schedule(0.0).unwrap();
    assert_eq!(d0[0].worker, NPU);
    let second = s.submit(spec(0, 1.0, None));
    assert!(s.schedule(1.0).unwrap().is_empty());
    assert!(s.workers()[CPU].idle());
    assert_eq!(s.workers()[NPU].local.front().map(|r| r.task.job), Some(second));
    s.finish(5.0, NPU, d0[0].seq, Some(5.0));
    let d1 = s.schedule(5.0).unwrap();
    assert_eq!((d1[0].job, d1[0].worker), (second, NPU));
}

/// SEL runs the shorter job first though the longer one came first.
#[test]
fn sel_runs_the_shortest_job_first() {
    let support = [OpSupport::All];
    let models = vec![model(&[UnaryOp::Relu], &support), model(&[UnaryOp::Tanh], &support)];
    let mut e = Estimator::new(EstimatorParams::default(), &[false], &models);
    set(&mut e, &models, 0, (0, 0), 0, 50.0);
    set(&mut e, &models, 1, (0, 0), 0, 5.0);
    let mut s = Scheduler::new(models, &names(1), Box::new(Sel), e);
    let long = s.submit(spec(0, 0.0, None));
    let short = s.submit(spec(1, 0.0, None));
    let d = s.schedule(0.0).unwrap();
    assert_eq!(d.iter().map(|d| d.job).collect::<Vec<_>>(), [short]);
    s.finish(5.0, 0, d[0].seq, Some(5.0));
    assert_eq!(s.schedule(5.0).unwrap()[0].job, long);
}

#[test]
fn every_policy_name_makes_that_policy() {
    let options = PolicyOptions::default();
    for name in multi_dnn::Registry::builtin().plain_names() {
        let expect = if name == "lst-whole" { "lst" } else { name };
        assert_eq!(policy_by_name(name, &options).map(|p| p.name()), Some(expect));
    }
    assert_eq!(policy_by_name("rr", &options).map(|p| p.name()), Some("round-robin"));
    assert!(policy_by_name("fifo", &options).is_none());
}

/// A thermal oracle with a fixed rise per worker.
struct Rises(Vec<f64>);

impl multi_dnn::splash::thermal::ThermalOracle for Rises {
    fn rise_c(&self, worker: usize, _latency_ms: f64, _io: (u64, u64)) -> Option<f64> {
        self.0.get(worker).copied()
    }
}

/// Fig. 12's Job 2 (E on CPU or NPU, F on the NPU) queued alone, with
/// each worker busy for `busy[k]` ms and an SLO of `slo` ms.
fn one_task(busy: [f64; 2], slo: f64) -> (Vec<ModelUnits>, Estimator, JobMap<Job>, Vec<WorkerState>) {
    let (models, e) = fig12();
    let jobs: JobMap<Job> = [(0, job(0, 1, &models[1], 0.0, Some(slo)))].into_iter().collect();
    let mut workers = idle_workers(2);
    for (k, ms) in busy.iter().enumerate() {
        workers[k].running = Some(Running {
            seq: 9 + k as u64,
            task: Task { job: 99, region: 0 },
            model: 0,
            candidate: 0,
            start_ms: Some(0.0),
            expected_ms: *ms,
        });
    }
    (models, e, jobs, workers)
}

proptest! {
    /// Splash's min-heat: whenever some worker finishes within the SLO, the
    /// chosen one does, and it is the coolest of those; otherwise the fastest.
    #[test]
    fn min_heat_never_misses_an_slo_it_could_meet(
        busy in [0.0f64..40.0, 0.0f64..40.0],
        rises in [0.0f64..8.0, 0.0f64..8.0],
        slo in 5.0f64..60.0,
    ) {
        let (models, e, jobs, workers) = one_task(busy, slo);
        let queue = [Task { job: 0, region: 0 }];
        let oracle = Rises(rises.to_vec());
        let view = View { now_ms: 0.0, queue: &queue, jobs: &jobs, models: &models, workers: &workers, estimator: &e, thermal: Some(&oracle) };
        let a = multi_dnn::splash::min_heat::MinHeat::default().schedule(&view);
        prop_assert_eq!(a.len(), 1);
        let finish = |k: usize| busy[k] + e.estimate(1, multi_dnn::policy::plan::longest_from(&models[1], 0, k).unwrap(), k);
        let chosen = a[0].worker;
        let in_time: Vec<usize> = (0..2).filter(|k| finish(*k) <= slo).collect();
        if in_time.is_empty() {
            prop_assert!(finish(chosen) <= finish(1 - chosen));
        } else {
            prop_assert!(in_time.contains(&chosen), "picked {} ({} ms) while {:?} meet {} ms", chosen, finish(chosen), in_time, slo);
            prop_assert!(in_time.iter().all(|k| rises[chosen] <= rises[*k]));
        }
    }

    /// Max weighted PPT with η = 1 places as the minimum-latency policy
    /// (HEFT's earliest finish) does, with η = 0 on the smallest rise.
    #[test]
    fn max_weighted_ppt_spans_latency_and_heat(
        busy in [0.0f64..40.0, 0.0f64..40.0],
        rises in [0.0f64..8.0, 0.0f64..8.0],
    ) {
        let (models, e, jobs, workers) = one_task(busy, 1e9);
        let queue = [Task { job: 0, region: 0 }];
        let oracle = Rises(rises.to_vec());
        let view = View { now_ms: 0.0, queue: &queue, jobs: &jobs, models: &models, workers: &workers, estimator: &e, thermal: Some(&oracle) };
        let fastest = Heft.schedule(&view);
        let latency = multi_dnn::splash::max_weighted_ppt::MaxWeightedPpt::new(1.0).schedule(&view);
        prop_assert_eq!(&latency, &fastest);
        let heat = multi_dnn::splash::max_weighted_ppt::MaxWeightedPpt::new(0.0).schedule(&view);
        let coolest = if rises[0] <= rises[1] { 0 } else { 1 };
        prop_assume!((rises[0] - rises[1]).abs() > 1e-9);
        prop_assert_eq!(heat[0].worker, coolest);
    }
}

/// LST's blocking guard: once a tight app's arrival rate is known, a job
/// with slack to spare is not given a step on the tight app's worker
/// longer than the cap (budget 1 ms + 1 / 0.5 per ms = 3 ms), and takes
/// the slower worker instead; before the rate is known, and where no other
/// worker can run it, it takes the fast one.
#[test]
fn lst_keeps_long_steps_of_loose_jobs_off_a_tight_apps_worker() {
    let all = [OpSupport::All, OpSupport::All];
    let cpu_only = [OpSupport::All, support_only(&["Relu"])];
    let models = vec![
        model(&[UnaryOp::Relu], &all),
        model(&[UnaryOp::Relu], &all),
        model(&[UnaryOp::Sigmoid], &cpu_only),
    ];
    let mut e = Estimator::new(EstimatorParams::default(), &[false, true], &models);
    set(&mut e, &models, 0, (0, 0), CPU, 1.0);
    set(&mut e, &models, 0, (0, 0), NPU, 10.0);
    set(&mut e, &models, 1, (0, 0), CPU, 8.0);
    set(&mut e, &models, 1, (0, 0), NPU, 16.0);
    set(&mut e, &models, 2, (0, 0), CPU, 8.0);
    let run = |tight: &[f64], loose: usize| {
        let mut s = Scheduler::new(models.clone(), &names(2), Box::new(Lst::new(false)), e.clone());
        let mut now = 0.0;
        for at in tight {
            now = *at;
            s.submit(spec(0, now, Some(2.0)));
            let d = s.schedule(now).unwrap();
            assert_eq!((d.len(), d[0].worker), (1, CPU));
            now += 1.0;
            s.finish(now, CPU, d[0].seq, Some(1.0)).unwrap();
        }
        s.submit(spec(loose, now + 0.5, Some(1000.0)));
        let d = s.schedule(now + 0.5).unwrap();
        d.iter().map(|d| d.worker).collect::<Vec<_>>()
    };
    assert_eq!(run(&[0.0, 2.0], 1), [NPU]);
    assert_eq!(run(&[0.0], 1), [CPU]);
    assert_eq!(run(&[0.0, 2.0], 2), [CPU]);
}

/// Queued jobs wait for a busy fast worker only while the backlog ahead
/// of them there ends sooner than the idle slow worker would: with the
/// NPU (1 ms a job) busy for 0.5 ms more and the CPU (3 ms) idle, one or
/// two queued jobs wait for the NPU, and of four the third goes to the CPU
/// (the NPU would end it at 3.5 ms).
#[test]
fn lst_sends_a_job_to_an_idle_worker_when_the_backlog_on_the_fast_one_is_longer() {
    let all = [OpSupport::All, OpSupport::All];
    let models = vec![model(&[UnaryOp::Relu], &all)];
    let mut e = Estimator::new(EstimatorParams::default(), &[false, true], &models);
    set(&mut e, &models, 0, (0, 0), CPU, 3.0);
    set(&mut e, &models, 0, (0, 0), NPU, 1.0);
    let run = |queued: usize| {
        let mut s = Scheduler::new(models.clone(), &names(2), Box::new(Lst::new(false)), e.clone());
        s.submit(spec(0, 0.0, Some(100.0)));
        let d = s.schedule(0.0).unwrap();
        assert_eq!(d.iter().map(|d| d.worker).collect::<Vec<_>>(), [NPU]);
        for _ in 0..queued {
            s.submit(spec(0, 0.5, Some(100.0)));
        }
        s.schedule(0.5).unwrap().iter().map(|d| d.worker).collect::<Vec<_>>()
    };
    assert_eq!(run(1), Vec::<usize>::new());
    assert_eq!(run(2), Vec::<usize>::new());
    assert_eq!(run(4), [CPU]);
}
