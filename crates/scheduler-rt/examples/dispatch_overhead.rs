//! Scheduling overhead per subgraph dispatch.
//!
//! A chain of `N` tiny ReLU subgraphs alternating between `cpu0` and `cpu1`
//! is run `R` times. Per run, overhead per dispatch = (wall time − time spent
//! inside the engine for every subgraph) / N: partition bookkeeping, job
//! hand-off to the worker thread, wake-up and result delivery. Measured with
//! `cpu1` as a pool worker (a thread hop per subgraph) and, as the baseline,
//! with both processors inline (no hop).
//!
//! Usage: `cargo run --release -p scheduler-rt --example dispatch_overhead -- [N] [R]`

use graph_ir::builder::Builder;
use graph_ir::keys;
use scheduler_rt::{ProcessorConfig, Runtime, WorkerKind, default_factory};
use std::time::Instant;
use tract_onnx::prelude::{IntoTValue, Tensor};

fn chain(n: usize) -> Result<graph_ir::Graph, graph_ir::GraphError> {
    let mut b = Builder::new("chain");
    let mut y = b.input("x", &[1, 16])?;
    for i in 0..n {
        y = b.relu(&format!("r{i}"), y)?;
    }
    let mut g = b.finish("y", y)?;
    for id in g.node_ids() {
        if let Some(i) = g.node(id).name.strip_prefix('r').and_then(|s| s.parse::<usize>().ok()) {
            g.annotate(id, keys::PROCESSOR, format!("cpu{}", i % 2));
        }
    }
    Ok(g)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn measure(g: &graph_ir::Graph, second: WorkerKind, runs: usize) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let procs = [
        ProcessorConfig::new("cpu0", WorkerKind::Inline),
        ProcessorConfig::new("cpu1", second),
    ];
    let rt = Runtime::load(g, &procs, default_factory())?;
    let n = rt.partition().subgraphs.len();
    let x = Tensor::from_shape(&[1, 16], &[0.5f32; 16])?;
    let mut per_dispatch = Vec::new();
    let mut per_run = Vec::new();
    for r in 0..runs + 20 {
        let t = Instant::now();
        let spans = rt.run_traced(vec![x.clone().into_tvalue()])?.1.spans;
        let wall = t.elapsed().as_secs_f64();
        let inside: f64 = spans.iter().map(|s| s.end_s - s.start_s).sum();
        if r >= 20 {
            per_dispatch.push((wall - inside) / n as f64 * 1e6);
            per_run.push(wall * 1e6);
        }
    }
    Ok((median(per_dispatch), median(per_run)))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse()).collect::<Result<_, _>>()?;
    let n = args.first().copied().unwrap_or(64);
    let runs = args.get(1).copied().unwrap_or(500);
    let g = chain(n)?;
    let (pool, pool_run) = measure(&g, WorkerKind::Pool, runs)?;
    let (inline, inline_run) = measure(&g, WorkerKind::Inline, runs)?;
    println!("{n} subgraphs per run, {runs} runs (measured, median)");
    println!("inline only (baseline): {inline:8.2} us overhead per dispatch, {inline_run:9.1} us per run");
    println!("pool worker hop:        {pool:8.2} us overhead per dispatch, {pool_run:9.1} us per run");
    println!("ratio pool/inline:      {:8.2}x", pool / inline.max(1e-9));
    println!(
        "goal: < 20 us per dispatch -> {}",
        if pool < 20.0 { "met" } else { "NOT met" }
    );
    Ok(())
}
