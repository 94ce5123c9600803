//! Import benchmark: wall time of `graph_ir::onnx::import_file` and the
//! process's peak resident memory, against the targets for a full-weight
//! model (time < 1 s, or `--time-target`, peak < 2x the file size).
//!
//! ```text
//! cargo run --release -p graph-ir --example import_bench -- MODEL.onnx [--repeat N] [--time-target SECS]
//! ```
//!
//! Peak memory is the kernel's high-water mark of resident memory (`VmHWM`
//! in `/proc/self/status`), read once before the first import (baseline: the
//! bare process) and once right after it, while the imported graph is still
//! alive. The example is a fresh process, so that figure belongs to exactly
//! one import. Later repetitions only add timings.
//!
//! Exits 2 if the model is missing or cannot be imported, 1 if a target is
//! missed, 0 if both are met.

use graph_ir::onnx::{ImportOptions, import_file};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const TIME_TARGET: Duration = Duration::from_secs(1);
const PEAK_TARGET_RATIO: f64 = 2.0;
const MIB: f64 = 1024.0 * 1024.0;

struct Args {
    model: PathBuf,
    repeat: usize,
    time_target: Duration,
}

fn usage() -> String {
    "usage: import_bench MODEL.onnx [--repeat N] [--time-target SECS]   (N >= 1, default 5; SECS default 1)".to_string()
}

fn parse_args() -> Result<Args, String> {
    let mut model = None;
    let mut repeat = 5;
    let mut time_target = TIME_TARGET;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--repeat" | "-n" => {
                let v = it
                    .next()
                    .ok_or_else(|| format!("--repeat needs a value\n{}", usage()))?;
                repeat = v
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| format!("--repeat `{v}` is not a positive integer\n{}", usage()))?;
            }
            "--time-target" => {
                let v = it
                    .next()
                    .ok_or_else(|| format!("--time-target needs a value\n{}", usage()))?;
                time_target = v
                    .parse::<f64>()
                    .ok()
                    .filter(|&t| t > 0.0 && t.is_finite())
                    .map(Duration::from_secs_f64)
                    .ok_or_else(|| format!("--time-target `{v}` is not a positive number of seconds\n{}", usage()))?;
            }
            "-h" | "--help" => return Err(usage()),
            _ if a.starts_with('-') => return Err(format!("unknown option `{a}`\n{}", usage())),
            _ if model.is_none() => model = Some(PathBuf::from(a)),
            _ => return Err(format!("unexpected argument `{a}`\n{}", usage())),
        }
    }
    Ok(Args {
        model: model.ok_or_else(usage)?,
        repeat,
        time_target,
    })
}

/// A `kB` field of `/proc/self/status` (e.g. `VmHWM`, `VmRSS`), in bytes.
fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        let kb: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
        Some(kb * 1024)
    })
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / MIB)
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let m = match file_size(&args.model).and_then(|size| measure(&args, size)) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    println!("model:        {}", args.model.display());
    println!("file size:    {} bytes ({})", m.file_size, mib(m.file_size));
    println!(
        "graph:        {} nodes, {} of weight data ({} bytes)",
        m.nodes,
        mib(m.weight_bytes as u64),
        m.weight_bytes
    );
    let time_ok = report_time(&m, args.time_target);
    let mem_ok = report_memory(&m);
    println!("result:       {}", if time_ok && mem_ok { "PASS" } else { "FAIL" });
    if time_ok && mem_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The model file's size; the error says how to get the full-weight
/// models when it is missing.
fn file_size(model: &Path) -> Result<u64, String> {
    match std::fs::metadata(model) {
        Ok(m) if m.is_file() => Ok(m.len()),
        Ok(_) => Err(format!("error: {} is not a file", model.display())),
        Err(e) => Err(format!(
            "error: model {} not found ({e}).\n\
             The full-weight models are not in the repository; generate them with\n  \
             python scripts/fixtures/export_torchvision.py --out-full fixtures-full\n\
             (needs torch, torchvision, onnx and onnxruntime) and pass the path of resnet50.onnx.",
            model.display()
        )),
    }
}

/// What the imports measured: the first import's memory, every import's time.
struct Measured {
    file_size: u64,
    nodes: usize,
    weight_bytes: usize,
    first: Duration,
    times: Vec<Duration>,
    baseline_hwm: Option<u64>,
    peak_hwm: Option<u64>,
    rss_with_graph: Option<u64>,
}

/// Imports the model `args.repeat` times; the memory figures belong to
/// the first import, read while its graph is alive.
fn measure(args: &Args, file_size: u64) -> Result<Measured, String> {
    let options = ImportOptions::default();
    let baseline_hwm = proc_status_bytes("VmHWM");
    let start = Instant::now();
    let graph = import_file(&args.model, &options)
        .map_err(|e| format!("error: importing {} failed: {e}", args.model.display()))?;
    let first = start.elapsed();
    let peak_hwm = proc_status_bytes("VmHWM");
    let rss_with_graph = proc_status_bytes("VmRSS");
    let nodes = graph.len();
    let weight_bytes: usize = graph
        .node_ids()
        .into_iter()
        .filter_map(|id| graph.const_tensor(id.out(0)).and_then(|t| t.raw()).map(|b| b.len()))
        .sum();
    drop(graph);

    let mut times = vec![first];
    for _ in 1..args.repeat {
        let start = Instant::now();
        let g = import_file(&args.model, &options).expect("the model imported once already");
        times.push(start.elapsed());
        std::hint::black_box(&g);
        drop(g);
    }
    Ok(Measured {
        file_size,
        nodes,
        weight_bytes,
        first,
        times,
        baseline_hwm,
        peak_hwm,
        rss_with_graph,
    })
}

/// Prints the import times and whether their median meets `target`.
fn report_time(m: &Measured, target: Duration) -> bool {
    let times = &m.times;
    let secs_of: Vec<f64> = times.iter().map(Duration::as_secs_f64).collect();
    let min = times.iter().min().copied().unwrap_or_default();
    let median = Duration::from_secs_f64(graph_ir::stats::median(&secs_of).unwrap_or(0.0));
    println!(
        "import time:  min {}  median {}  first {}  ({} runs: {})",
        secs(min),
        secs(median),
        secs(m.first),
        times.len(),
        times
            .iter()
            .map(|t| format!("{:.3}", t.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let time_ok = median < target;
    println!(
        "  target: median < {}  -> {} ({:.2}x the budget)",
        secs(target),
        verdict(time_ok),
        median.as_secs_f64() / target.as_secs_f64()
    );
    time_ok
}

/// Prints the first import's peak memory and whether it meets the target.
fn report_memory(m: &Measured) -> bool {
    let file_size = m.file_size;
    match (m.baseline_hwm, m.peak_hwm) {
        (Some(base), Some(peak)) => {
            let delta = peak.saturating_sub(base);
            let ratio = peak as f64 / file_size as f64;
            let delta_ratio = delta as f64 / file_size as f64;
            println!(
                "peak memory:  VmHWM {} after first import (baseline before import {}, import's own {})",
                mib(peak),
                mib(base),
                mib(delta)
            );
            if let Some(rss) = m.rss_with_graph {
                println!("              VmRSS {} with the imported graph alive", mib(rss));
            }
            println!("  peak / file size:            {ratio:.3}");
            println!("  (peak - baseline) / file size: {delta_ratio:.3}");
            let ok = ratio < PEAK_TARGET_RATIO;
            println!(
                "  target: peak < {PEAK_TARGET_RATIO}x file size ({})  -> {} (absolute peak, baseline included)",
                mib((PEAK_TARGET_RATIO * file_size as f64) as u64),
                verdict(ok)
            );
            ok
        }
        _ => {
            println!("peak memory:  unavailable (no VmHWM in /proc/self/status; Linux only)  -> FAIL");
            false
        }
    }
}
