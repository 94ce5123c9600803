//! Times ONNX files on one engine and core, interleaved (rounds of a block
//! of runs of each file after one untimed run), and prints each file's
//! minimum and median and the sum of the medians: for comparing a model's
//! pieces with the pieces of another (`write_subgraphs` writes a model's).
//!
//! cargo run --release -p scheduler-rt --features ort --example time_files -- ENGINE CORE ROUNDS FILE.onnx...
//! (ENGINE: tract or ort; every input is random, its shape read from the file)

use scheduler_rt::{EngineKind, ProcessorConfig, Value, WorkerKind, make_engine};
use std::time::Instant;
use tract_onnx::prelude::*;

const BLOCK: usize = 5;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        return Err("usage: time_files ENGINE(tract|ort) CORE ROUNDS FILE.onnx...".into());
    }
    let engine: EngineKind = args[1].parse()?;
    let core: usize = args[2].parse().map_err(|_| format!("bad core '{}'", args[2]))?;
    let rounds: usize = args[3].parse().map_err(|_| format!("bad rounds '{}'", args[3]))?;
    let mut cfg = ProcessorConfig::new("p", WorkerKind::Inline);
    cfg.engine = engine;
    cfg.cores = Some(predictor::profiler::CoreSet::new(vec![core]).ok_or("empty core set")?);
    scheduler_rt::affinity::pin_current_thread(cfg.cores.as_ref().ok_or("no core")?)?;
    let e = make_engine(&cfg).map_err(|e| e.to_string())?;
    let mut models = Vec::new();
    for path in &args[4..] {
        let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        let graph = graph_ir::onnx::import_file(path, &Default::default()).map_err(|e| format!("{path}: {e}"))?;
        let mut inputs: TVec<Value> = tvec![];
        for (i, node) in graph.inputs().iter().enumerate() {
            let shape = graph
                .fact(node.out(0))
                .map(|f| f.shape.clone())
                .ok_or(format!("{path}: input {i} without a shape"))?;
            let n = shape.iter().product();
            let t = Tensor::from_shape(&shape, &scheduler_rt::npy::random_values(3 + i as u64, n))
                .map_err(|e| e.to_string())?;
            inputs.push(t.into_tvalue());
        }
        models.push((path.clone(), e.compile(&bytes)?, inputs));
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); models.len()];
    for _ in 0..rounds {
        for (k, (_, c, x)) in models.iter().enumerate() {
            c.run(x.clone())?;
            for _ in 0..BLOCK {
                let t = Instant::now();
                c.run(x.clone())?;
                times[k].push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    let mut sum = 0.0;
    for ((path, _, _), ts) in models.iter().zip(&mut times) {
        ts.sort_by(f64::total_cmp);
        sum += ts[ts.len() / 2];
        println!("{path}: min {:.3} ms, median {:.3} ms", ts[0], ts[ts.len() / 2]);
    }
    println!(
        "sum of medians {sum:.3} ms ({} on core {core}, {rounds} rounds of {BLOCK})",
        e.name()
    );
    Ok(())
}
