//! `spin` reaches onnxruntime: `on` keeps the session's intra-op threads
//! burning CPU after a run ends (onnxruntime's default); `off` and `run`
//! leave them blocked then. Its own test binary, so that no other test's
//! threads count in the process's CPU time.
#![cfg(feature = "ort")]

use engine::ort::OrtEngine;
use engine::{Engine, Spin};
use scheduler_rt::testing::{INPUT, two_branch};
use std::time::Duration;
use tract_core::prelude::{IntoTValue, Tensor, tvec};

/// CPU time of every thread of this process but the calling one, in ms.
fn other_threads_cpu_ms() -> f64 {
    let me = std::fs::read_link("/proc/thread-self").unwrap();
    let me = me.file_name().unwrap().to_owned();
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| t.file_name() != me)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .sum::<f64>()
        / 1e6
}

/// CPU time the other threads spend in the 20 ms after 20 runs, in ms
/// (the test takes the least of three windows per mode, interleaved).
fn after_a_run(spin: Spin) -> f64 {
    let g = two_branch(64, 2).unwrap();
    let bytes = graph_ir::onnx::export_bytes(&g).unwrap();
    let x = Tensor::from_shape(&INPUT, &scheduler_rt::npy::random_values(1, INPUT.iter().product()))
        .unwrap()
        .into_tvalue();
    let compiled = OrtEngine::new(2, spin).unwrap().compile(&bytes).unwrap();
    compiled.run(tvec![x.clone()]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..20 {
        compiled.run(tvec![x.clone()]).unwrap();
    }
    let ran = other_threads_cpu_ms();
    std::thread::sleep(Duration::from_millis(20));
    let after = other_threads_cpu_ms() - ran;
    drop(compiled);
    std::thread::sleep(Duration::from_millis(100));
    after
}

/// The least of the windows measured for `spin`: a thread the VM
/// schedules late shows in one window, a spinning one in every window.
fn least(spin: Spin, rounds: &[(Spin, f64)]) -> f64 {
    rounds
        .iter()
        .filter(|(s, _)| *s == spin)
        .map(|(_, ms)| *ms)
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn spinning_threads_keep_their_core_busy_after_a_run_unless_told_to_stop() {
    let mut rounds = Vec::new();
    for _ in 0..3 {
        for spin in [Spin::Off, Spin::Run, Spin::On] {
            rounds.push((spin, after_a_run(spin)));
        }
    }
    let off = least(Spin::Off, &rounds);
    let run = least(Spin::Run, &rounds);
    let on = least(Spin::On, &rounds);
    assert!(
        off < 3.0,
        "spin off: the other threads used {off:.1} ms of CPU in 20 ms after"
    );
    assert!(
        run < 3.0,
        "spin run: the other threads used {run:.1} ms of CPU in 20 ms after"
    );
    assert!(
        on > 8.0,
        "spin on: the other threads used only {on:.1} ms of CPU in 20 ms after"
    );
}
