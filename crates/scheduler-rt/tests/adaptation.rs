//! End to end: a processor slowed from outside (a [`Slowed`] engine that
//! sleeps) gets its branch moved off by the adaptive runtime, and back once
//! it is fast again; results stay right throughout.

use engine::{Engine, TractEngine, Value};
use scheduler_rt::testing::{INPUT, slowed_factory, two_branch};
use scheduler_rt::{AdaptiveParams, ProcessorConfig, Runtime};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tract_core::prelude::{IntoTValue, Tensor, tvec};

fn input(seed: u64) -> Value {
    Tensor::from_shape(&INPUT, &scheduler_rt::npy::random_values(seed, INPUT.iter().product()))
        .unwrap()
        .into_tvalue()
}

fn close(a: &Value, b: &Value) -> bool {
    let a = a.to_plain_array_view::<f32>().unwrap();
    let b = b.to_plain_array_view::<f32>().unwrap();
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    a.iter().zip(b.iter()).all(|(x, y)| (x - y).abs() <= 1e-4 * scale)
}

#[test]
fn a_slowed_processor_loses_its_branch_and_gets_it_back() {
    let g = two_branch(8, 1).unwrap();
    let delay = Arc::new(AtomicU64::new(0));
    let procs: Vec<ProcessorConfig> = ["cpu0=inline", "cpu1=pool"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let params = AdaptiveParams {
        margin: 1.5,
        runs: 3,
        probe_ms: 40.0,
    };
    let rt = Runtime::load(&g, &procs, slowed_factory(vec![("cpu1".into(), delay.clone())]))
        .unwrap()
        .with_adaptation(params)
        .unwrap();
    assert_eq!(
        rt.compiled_copies(),
        2 * rt.partition().subgraphs.len(),
        "a policy may move any subgraph anywhere"
    );
    let branch = rt
        .partition()
        .subgraphs
        .iter()
        .position(|s| s.processor == "cpu1")
        .unwrap();
    let name = rt.partition().subgraphs[branch].name.clone();
    let reference = TractEngine::new(1)
        .unwrap()
        .compile(&graph_ir::onnx::export_bytes(&g).unwrap())
        .unwrap();
    let request = |seed: u64| {
        let (out, trace) = rt.run_traced(vec![input(seed)]).unwrap();
        assert!(close(&out[0], &reference.run(tvec![input(seed)]).unwrap()[0]));
        trace
    };
    for seed in 0..10 {
        assert!(request(seed).moves.iter().all(|m| m.subgraph != name));
    }
    delay.store(20_000, Ordering::Relaxed);
    let mut moved_at = None;
    for seed in 10..20 {
        let t = request(seed);
        if let Some(m) = t.moves.iter().find(|m| m.reason == "slow") {
            assert_eq!(
                (m.subgraph.as_str(), m.from.as_str(), m.to.as_str()),
                (name.as_str(), "cpu1", "cpu0")
            );
            assert_eq!(m.to_string(), format!("moved subgraph {name} from cpu1 to cpu0 (slow)"));
            moved_at = Some(seed);
            break;
        }
    }
    assert_eq!(moved_at, Some(12), "moved after the third slow run");
    assert_eq!(rt.placed_on(branch), Some("cpu0"));
    let t = request(30);
    assert!(
        t.spans
            .iter()
            .all(|s| s.processor == "cpu0" && s.end_s - s.start_s < 0.02),
        "the moved branch still runs on the slowed cpu1: {:?}",
        t.spans
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut still_slow = 0;
    while Instant::now() < deadline && still_slow == 0 {
        still_slow += request(40).moves.iter().filter(|m| m.reason == "still slow").count();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(still_slow, 1, "a probe of the loaded cpu1 moves the branch off again");
    delay.store(0, Ordering::Relaxed);
    let mut back = false;
    while Instant::now() < deadline && !back {
        back = request(50).moves.iter().any(|m| m.reason == "back" && m.to == "cpu1");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(back, "the branch never went back to cpu1");
    assert_eq!(rt.placed_on(branch), Some("cpu1"));
    let t = request(60);
    assert!(t.spans.iter().any(|s| s.processor == "cpu1" && s.subgraph == name));
    assert!(t.moves.iter().all(|m| m.subgraph != name), "{:?}", t.moves);
}
