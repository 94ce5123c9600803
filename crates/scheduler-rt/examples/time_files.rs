//! Times ONNX files on one engine and set of cores (one intra-op thread
//! per core), interleaved (rounds of a block
//! of runs of each file after one untimed run), and prints each file's
//! minimum and median and the sum of the medians: for comparing a model's
//! pieces with the pieces of another (`write_subgraphs` writes a model's).
//!
//! cargo run --release -p scheduler-rt --features ort --example time_files -- ENGINE CORES ROUNDS FILE.onnx...
//! (ENGINE: tract or ort; CORES: `0` or `0,1`; every input is random, its
//! shape read from the file)

mod common;

use engine::EngineRegistry;
use scheduler_rt::{ProcessorConfig, WorkerKind};
use std::time::Instant;

const BLOCK: usize = 5;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        return Err("usage: time_files ENGINE(tract|ort) CORES ROUNDS FILE.onnx...".into());
    }
    let engine = EngineRegistry::builtin().canonical(&args[1])?;
    let cores = args[2]
        .split(',')
        .map(|c| {
            c.parse::<usize>()
                .map_err(|_| format!("bad core '{c}' in '{}'", args[2]))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let rounds: usize = args[3].parse().map_err(|_| format!("bad rounds '{}'", args[3]))?;
    let mut cfg = ProcessorConfig::new("p", WorkerKind::Inline);
    cfg.engine = engine.to_string();
    cfg.threads = cores.len();
    cfg.cores = Some(engine::host::CoreSet::new(cores).ok_or("empty core set")?);
    engine::host::pin_current_thread(cfg.cores.as_ref().ok_or("no core")?)?;
    let e = EngineRegistry::builtin()
        .make(&cfg.engine_config())
        .map_err(|e| e.to_string())?;
    let models = args[4..]
        .iter()
        .map(|p| common::load(e.as_ref(), p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); models.len()];
    for _ in 0..rounds {
        for (k, m) in models.iter().enumerate() {
            m.run()?;
            for _ in 0..BLOCK {
                let t = Instant::now();
                m.run()?;
                times[k].push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    let mut sum = 0.0;
    for (m, ts) in models.iter().zip(&mut times) {
        let (median, min) = common::median_min(ts);
        sum += median;
        println!("{}: min {min:.3} ms, median {median:.3} ms", m.path);
    }
    println!(
        "sum of medians {sum:.3} ms ({} on cores {}, {rounds} rounds of {BLOCK})",
        e.name(),
        args[2]
    );
    Ok(())
}
