//! Puzzle's static-plan policy: every idle worker, in turn, takes the
//! queued task of the highest-priority model (then the earliest arrival,
//! then queue order) whose next subgraph it runs, among those the workers
//! before it left. The policy finds the answer in one pass over the queue
//! and falls back to taking turns where two workers want the same task;
//! checked here against the rule taken literally.

use graph_ir::ops::UnaryOp;
use multi_dnn::puzzle::static_plan::StaticPlan;
use multi_dnn::{
    Assignment, Estimator, EstimatorParams, Job, JobMap, JobSpec, ModelUnits, OpSupport, Policy, Task, View,
    WorkerState, analyze,
};
use proptest::prelude::*;
use scheduler_rt::testing::{support_only, unary_chain};
use std::collections::VecDeque;

const WORKERS: usize = 3;

fn names() -> Vec<String> {
    (0..WORKERS).map(|i| format!("w{i}")).collect()
}

/// Three models: one every worker runs whole, one whose Sigmoid only w1
/// and w2 run, one only w0 runs.
fn models() -> Vec<ModelUnits> {
    let ops = [UnaryOp::Relu, UnaryOp::Sigmoid];
    vec![
        analyze(
            &unary_chain(&ops).unwrap(),
            &names(),
            &[OpSupport::All, OpSupport::All, OpSupport::All],
        )
        .unwrap(),
        analyze(
            &unary_chain(&ops).unwrap(),
            &names(),
            &[support_only(&["Relu"]), OpSupport::All, OpSupport::All],
        )
        .unwrap(),
        analyze(
            &unary_chain(&ops).unwrap(),
            &names(),
            &[OpSupport::All, support_only(&[]), support_only(&[])],
        )
        .unwrap(),
    ]
}

/// The rule taken literally: worker by worker, a pass over the queue
/// skipping tasks already taken.
fn in_turn(view: &View, rank: &[usize]) -> Vec<Assignment> {
    let mut out: Vec<Assignment> = Vec::new();
    for w in view.idle() {
        let mut best: Option<((usize, f64), Assignment)> = None;
        for t in view.queue {
            if out.iter().any(|a| a.task == *t) {
                continue;
            }
            let job = &view.jobs[&t.job];
            let m = &view.models[job.spec.model];
            let from = m.candidates_from(job.next_unit(m, t.region));
            let Some(c) = from
                .iter()
                .rev()
                .map(|c| *c as usize)
                .find(|c| m.candidates[*c].support.contains(w))
            else {
                continue;
            };
            let key = (rank[job.spec.model], job.spec.arrival_ms);
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                best = Some((
                    key,
                    Assignment {
                        task: *t,
                        candidate: c,
                        worker: w,
                    },
                ));
            }
        }
        out.extend(best.map(|(_, a)| a));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn one_pass_decides_as_the_workers_taking_turns(
        tasks in prop::collection::vec((0usize..3, 0u8..4), 0..12),
        rank in Just([0usize, 1, 2]).prop_shuffle(),
        idle in [any::<bool>(), any::<bool>(), any::<bool>()],
    ) {
        let models = models();
        let mut jobs: JobMap<Job> = JobMap::default();
        let mut queue = Vec::new();
        for (id, (model, arrival)) in tasks.iter().enumerate() {
            let m = &models[*model];
            jobs.insert(id as u64, Job {
                id: id as u64,
                spec: JobSpec { app: *model, model: *model, arrival_ms: *arrival as f64, slo_ms: None, frame: None, content: 0.0 },
                done: vec![0; m.regions.len()],
                running: vec![false; m.regions.len()],
            });
            queue.push(Task { job: id as u64, region: 0 });
        }
        let workers: Vec<WorkerState> = (0..WORKERS)
            .map(|i| WorkerState { name: format!("w{i}"), available: idle[i], running: None, local: VecDeque::new(), render: None })
            .collect();
        let estimator = Estimator::new(EstimatorParams::default(), &[false; WORKERS], &models);
        let view = View { now_ms: 0.0, queue: &queue, jobs: &jobs, models: &models, workers: &workers, estimator: &estimator, thermal: None };
        let got = StaticPlan::new(rank.to_vec()).schedule(&view);
        prop_assert_eq!(got, in_turn(&view, &rank));
    }
}
