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

use engine::EngineRegistry;
use scheduler_rt::{ProcessorConfig, WorkerKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

const BLOCK: usize = 5;
const CONDITIONS: [&str; 3] = ["core 0 idle", "core 0 runs cpu0's subgraphs", "core 0 spins"];
const STOP: u8 = 3;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        return Err("usage: beside ENGINE(tract|ort) ROUNDS DIR".into());
    }
    let engine_kind = EngineRegistry::builtin().canonical(&args[1])?;
    let rounds: usize = args[2].parse().map_err(|_| format!("bad rounds '{}'", args[2]))?;
    let files = |suffix: &str| -> Result<Vec<String>, String> {
        let mut v: Vec<String> = std::fs::read_dir(&args[3])
            .map_err(|e| format!("{}: {e}", args[3]))?
            .filter_map(|e| e.ok().map(|e| e.path().display().to_string()))
            .filter(|p| p.ends_with(suffix))
            .collect();
        v.sort();
        if v.is_empty() {
            return Err(format!("{}: no *{suffix}", args[3]));
        }
        Ok(v)
    };
    let (timed, load) = (files("-cpu1.onnx")?, files("-cpu0.onnx")?);
    let engine_on = |core: usize| engine_on(engine_kind, core);
    let mode = Arc::new(AtomicU8::new(0));
    let loader = {
        let mode = mode.clone();
        let engine = engine_on(0)?;
        let models = load
            .iter()
            .map(|p| common::load(engine.as_ref(), p))
            .collect::<Result<Vec<_>, _>>()?;
        std::thread::spawn(move || -> Result<(), String> {
            let core = engine::host::CoreSet::new(vec![0]).ok_or("empty core set")?;
            engine::host::pin_current_thread(&core).map_err(|e| e.to_string())?;
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
        })
    };
    let engine = engine_on(1)?;
    let models = timed
        .iter()
        .map(|p| common::load(engine.as_ref(), p))
        .collect::<Result<Vec<_>, _>>()?;
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
    mode.store(STOP, Ordering::Release);
    loader.join().map_err(|_| "the load thread panicked")??;
    report(&mut times, &models);
    println!(
        "({} on core 1, {} files; load: {} files of cpu0 on core 0; {rounds} rounds of {BLOCK} runs per file and condition)",
        engine.name(),
        models.len(),
        load.len()
    );
    Ok(())
}

/// The engine `name` made on a thread pinned to `core`.
fn engine_on(name: &str, core: usize) -> Result<Box<dyn engine::Engine>, String> {
    let mut cfg = ProcessorConfig::new("p", WorkerKind::Inline);
    cfg.engine = name.to_string();
    cfg.cores = Some(engine::host::CoreSet::new(vec![core]).ok_or("empty core set")?);
    engine::host::pin_current_thread(cfg.cores.as_ref().ok_or("no core")?).map_err(|e| e.to_string())?;
    EngineRegistry::builtin()
        .make(&cfg.engine_config())
        .map_err(|e| e.to_string())
}

/// Prints each file's median (min) per condition and their sums.
fn report(times: &mut [Vec<Vec<f64>>], models: &[common::Loaded]) {
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
}
