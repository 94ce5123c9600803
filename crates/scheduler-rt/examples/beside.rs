//! What running beside each other does to a branched model's subgraphs:
//! times the subgraphs of one processor on core 1 while core 0 is idle,
//! while core 0 runs the other processor's subgraphs in a loop, and while
//! core 0 spins without touching memory; the three interleaved (one block
//! of each file per condition per round, the conditions' order rotating).
//! Prints each file's median and minimum per condition and the ratios of
//! their sums to idle.
//!
//! cargo run --release -p scheduler-rt --features ort --example beside -- ENGINE ROUNDS DIR
//! (DIR as `write_subgraphs` writes it: `NN-cpu1.onnx` files are timed on
//! core 1, `NN-cpu0.onnx` files are the load on core 0; ENGINE: tract or ort)

mod common;

use scheduler_rt::{EngineKind, ProcessorConfig, WorkerKind, make_engine};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const BLOCK: usize = 5;
const CONDITIONS: [&str; 3] = ["core 0 idle", "core 0 runs cpu0's subgraphs", "core 0 spins"];
const STOP: u8 = 3;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        return Err("usage: beside ENGINE(tract|ort) ROUNDS DIR".into());
    }
    let engine_kind: EngineKind = args[1].parse()?;
    let rounds: usize = args[2].parse().map_err(|_| format!("bad rounds '{}'", args[2]))?;
    let (timed, load) = (files(&args[3], "-cpu1.onnx")?, files(&args[3], "-cpu0.onnx")?);
    let mode = Arc::new(AtomicU8::new(0));
    let loader = spawn_load(engine_kind, &load, mode.clone())?;
    let engine = engine_on(engine_kind, 1)?;
    let models = timed
        .iter()
        .map(|p| common::load(engine.as_ref(), p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut times = time_rounds(&models, rounds, &mode)?;
    mode.store(STOP, Ordering::Release);
    loader.join().map_err(|_| "the load thread panicked")??;
    let summary: Vec<Vec<(f64, f64)>> = times
        .iter_mut()
        .map(|per_file| per_file.iter_mut().map(|t| common::median_min(t)).collect())
        .collect();
    for (i, m) in models.iter().enumerate() {
        let cells: Vec<String> = summary
            .iter()
            .map(|s| format!("{:.3} ({:.3})", s[i].0, s[i].1))
            .collect();
        println!("{}: median (min) ms, {}", m.path, cells.join(" / "));
    }
    let sums: Vec<(f64, f64)> = summary
        .iter()
        .map(|s| s.iter().fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1)))
        .collect();
    for (c, (median, min)) in CONDITIONS.iter().zip(&sums) {
        println!(
            "{c}: sum of medians {median:.3} ms ({:.2}x idle), of minimums {min:.3} ms ({:.2}x idle)",
            median / sums[0].0,
            min / sums[0].1
        );
    }
    println!(
        "({} on core 1, {} files; load: {} files of cpu0 on core 0; {rounds} rounds of {BLOCK} runs per file and condition)",
        engine.name(),
        models.len(),
        load.len()
    );
    Ok(())
}

/// The files of `dir` whose names end with `suffix`, sorted; at least one.
fn files(dir: &str, suffix: &str) -> Result<Vec<String>, String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("{dir}: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.path().display().to_string()))
        .filter(|p| p.ends_with(suffix))
        .collect();
    v.sort();
    if v.is_empty() {
        return Err(format!("{dir}: no *{suffix}"));
    }
    Ok(v)
}

/// An engine of `kind` with this thread pinned to `core`.
fn engine_on(kind: EngineKind, core: usize) -> Result<Box<dyn scheduler_rt::Engine>, String> {
    let mut cfg = ProcessorConfig::new("p", WorkerKind::Inline);
    cfg.engine = kind;
    cfg.cores = Some(predictor::profiler::CoreSet::new(vec![core]).ok_or("empty core set")?);
    scheduler_rt::affinity::pin_current_thread(cfg.cores.as_ref().ok_or("no core")?)?;
    make_engine(&cfg).map_err(|e| e.to_string())
}

/// The thread on core 0 that idles, runs the `load` files in turn or
/// spins, as `mode` says, until it says [`STOP`].
fn spawn_load(
    kind: EngineKind,
    load: &[String],
    mode: Arc<AtomicU8>,
) -> Result<JoinHandle<Result<(), String>>, String> {
    let engine = engine_on(kind, 0)?;
    let models = load
        .iter()
        .map(|p| common::load(engine.as_ref(), p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(std::thread::spawn(move || -> Result<(), String> {
        let core = predictor::profiler::CoreSet::new(vec![0]).ok_or("empty core set")?;
        scheduler_rt::affinity::pin_current_thread(&core)?;
        let mut next = 0;
        loop {
            match mode.load(Ordering::Acquire) {
                0 => std::thread::sleep(Duration::from_millis(1)),
                1 => {
                    models[next % models.len()].run()?;
                    next += 1;
                }
                2 => {
                    let t = Instant::now();
                    let mut x = 1u64;
                    while t.elapsed() < Duration::from_millis(1) {
                        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                    }
                }
                _ => return Ok(()),
            }
        }
    }))
}

/// Per condition and file, the times of its blocks of runs over `rounds`
/// rounds, the conditions' order rotating each round.
fn time_rounds(models: &[common::Loaded], rounds: usize, mode: &AtomicU8) -> Result<Vec<Vec<Vec<f64>>>, String> {
    let mut times = vec![vec![Vec::new(); models.len()]; CONDITIONS.len()];
    for round in 0..rounds {
        for k in 0..CONDITIONS.len() {
            let c = (round + k) % CONDITIONS.len();
            mode.store(c as u8, Ordering::Release);
            std::thread::sleep(Duration::from_millis(20));
            for (i, m) in models.iter().enumerate() {
                m.run()?;
                for _ in 0..BLOCK {
                    let t = Instant::now();
                    m.run()?;
                    times[c][i].push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
    }
    Ok(times)
}
