//! Scheduling overhead per subgraph dispatch, for microsecond and for
//! millisecond subgraphs.
//!
//! A chain of `N` subgraphs alternating between `cpu0` and `cpu1` is run
//! `R` times: tiny ones (a ReLU over 16 values, a few µs, so every wait
//! ends inside the runtime's polling window) and stage-sized ones (a 3x3
//! convolution of 32 channels at 56x56, about a millisecond, so the idle
//! side has given up polling and blocked). Per run, overhead per dispatch =
//! (wall time − time spent inside the engine for every subgraph) / N:
//! partition bookkeeping, job hand-off to the worker thread, wake-up and
//! result delivery. Measured with `cpu1` as a pool worker (a thread hop per
//! subgraph) and, as the baseline, with both processors inline (no hop).
//!
//! Usage: `cargo run --release -p scheduler-rt --example dispatch_overhead -- [N] [R] [N_MS] [R_MS]`

use graph_ir::builder::{Builder, ConvSpec};
use graph_ir::keys;
use scheduler_rt::{ProcessorConfig, Runtime, WorkerKind, default_factory};
use std::time::Instant;
use tract_core::prelude::{IntoTValue, Tensor};

fn chain(n: usize, heavy: bool) -> Result<graph_ir::Graph, graph_ir::GraphError> {
    let mut b = Builder::new("chain");
    let mut y = if heavy {
        b.input("x", &[1, 32, 56, 56])?
    } else {
        b.input("x", &[1, 16])?
    };
    for i in 0..n {
        if heavy {
            y = b.conv(&format!("c{i}"), y, ConvSpec::new(32, 3, 1))?;
        }
        y = b.relu(&format!("r{i}"), y)?;
    }
    let mut g = b.finish("y", y)?;
    g.fill_missing_weights(1);
    for id in g.node_ids() {
        let node = g.node(id);
        if matches!(node.op, graph_ir::ops::Op::Const(_)) {
            continue;
        }
        let index = node
            .name
            .strip_prefix('r')
            .or_else(|| node.name.strip_prefix('c'))
            .and_then(|s| s.parse::<usize>().ok());
        if let Some(i) = index {
            g.annotate(id, keys::PROCESSOR, format!("cpu{}", i % 2));
        }
    }
    Ok(g)
}

fn measure(g: &graph_ir::Graph, second: WorkerKind, runs: usize) -> Result<f64, Box<dyn std::error::Error>> {
    let procs = [
        ProcessorConfig::new("cpu0", WorkerKind::Inline),
        ProcessorConfig::new("cpu1", second),
    ];
    let rt = Runtime::load(g, &procs, default_factory())?;
    let n = rt.partition().subgraphs.len();
    let first = g.inputs()[0];
    let shape = g.fact(first.out(0)).map(|f| f.shape.clone()).unwrap_or_default();
    let x = Tensor::from_shape(&shape, &vec![0.5f32; shape.iter().product()])?;
    let warmup = (runs / 10).max(3);
    let mut per_dispatch = Vec::new();
    let mut per_run = Vec::new();
    let mut inside_per = Vec::new();
    for r in 0..runs + warmup {
        let t = Instant::now();
        let spans = rt.run_traced(vec![x.clone().into_tvalue()])?.1.spans;
        let wall = t.elapsed().as_secs_f64();
        let inside: f64 = spans.iter().map(|s| s.end_s - s.start_s).sum();
        if r >= warmup {
            per_dispatch.push((wall - inside) / n as f64 * 1e6);
            per_run.push(wall * 1e6);
            inside_per.push(inside / n as f64 * 1e6);
        }
    }
    println!(
        "  {:<24} {:8.2} us overhead per dispatch, {:10.1} us per run, {:9.1} us in the engine per subgraph",
        match second {
            WorkerKind::Pool => "cpu1 a pool worker (hop)",
            _ => "inline only (baseline)",
        },
        graph_ir::stats::median_nan(&per_dispatch.clone()),
        graph_ir::stats::median_nan(&per_run),
        graph_ir::stats::median_nan(&inside_per)
    );
    Ok(graph_ir::stats::median_nan(&per_dispatch))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse()).collect::<Result<_, _>>()?;
    let arg = |i: usize, default: usize| args.get(i).copied().unwrap_or(default);
    for (heavy, n, runs) in [(false, arg(0, 64), arg(1, 500)), (true, arg(2, 8), arg(3, 60))] {
        let g = chain(n, heavy)?;
        println!(
            "{} subgraphs: {n} per run, {runs} runs (measured, median)",
            if heavy { "millisecond" } else { "microsecond" }
        );
        let inline = measure(&g, WorkerKind::Inline, runs)?;
        let pool = measure(&g, WorkerKind::Pool, runs)?;
        println!(
            "  hop cost {:.2} us per dispatch over inline ({:.2}x); goal < 20 us per dispatch -> {}",
            pool - inline,
            pool / inline.max(1e-9),
            if pool < 20.0 { "met" } else { "NOT met" }
        );
    }
    Ok(())
}
