//! `stretch profile --link FROM,TO` (the thread hand-off cost between two
//! cores) and `stretch profile --fusion` (the engine's fusion rules).

use anyhow::{Context, Result, bail};
use engine::Engine;
use predictor::profiler::{fusion, link};
use std::fmt::Write as _;
use std::path::Path;

/// Measures hand-offs from core FROM to core TO (`spec` = `FROM,TO`), writes
/// `out/link.csv` and prints the fitted `latency + bytes / bandwidth`.
pub fn run(spec: &str, out: &Path, reps: usize, warmup: usize) -> Result<()> {
    let parse = |s: &str| -> Result<usize> {
        s.trim()
            .parse()
            .with_context(|| format!("--link `{spec}`: `{s}` is not a core number (write FROM,TO, e.g. 0,1)"))
    };
    let Some((a, b)) = spec.split_once(',') else {
        bail!("--link `{spec}`: expected FROM,TO, e.g. 0,1");
    };
    let (from, to) = (parse(a)?, parse(b)?);
    if reps == 0 {
        bail!("--reps must be at least 1");
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    eprintln!("measuring hand-offs core {from} -> core {to} ({reps} reps per size)...");
    let samples = link::measure(from, to, &link::default_sizes(), warmup, reps)?;
    let fit = link::fit(&samples);
    let mut csv = String::from("from,to,bytes,median_us,p10_us,p90_us,reps\n");
    for s in &samples {
        writeln!(
            csv,
            "{from},{to},{},{:.3},{:.3},{:.3},{}",
            s.bytes, s.median_us, s.p10_us, s.p90_us, s.reps
        )?;
    }
    let path = out.join("link.csv");
    std::fs::write(&path, csv).with_context(|| format!("cannot write {}", path.display()))?;
    println!(
        "{:>10}  {:>10}  {:>10}  {:>10}",
        "bytes", "median us", "p10 us", "p90 us"
    );
    for s in &samples {
        println!(
            "{:>10}  {:>10.2}  {:>10.2}  {:>10.2}",
            s.bytes, s.median_us, s.p10_us, s.p90_us
        );
    }
    let pw = link::fit_piecewise(&samples);
    println!(
        "fitted (measured): latency {:.2} us + bytes / {:.2} GB/s (R² {:.4}); wrote {}",
        fit.latency_us,
        fit.bandwidth_gbs,
        link::r_squared(&samples, |b| fit.us(b)),
        path.display()
    );
    println!(
        "piecewise (Puzzle §4.1, break at {} KiB): up to it {:.2} us + bytes / {:.2} GB/s, above it {:.2} us + bytes / {:.2} GB/s (R² {:.4})",
        pw.break_bytes / 1024,
        pw.small.latency_us,
        pw.small.bandwidth_gbs,
        pw.large.latency_us,
        pw.large.bandwidth_gbs,
        link::r_squared(&samples, |b| pw.us(b))
    );
    Ok(())
}

/// Measures the fusion pairs on `engine` (already pinned), writes
/// `out/fusion.csv` and prints the learned rules.
pub fn run_fusion(engine: &dyn Engine, out: &Path, reps: usize, warmup: usize) -> Result<()> {
    if reps == 0 {
        bail!("--reps must be at least 1");
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    eprintln!(
        "timing {} op pairs alone and chained on {} ({reps} reps each)...",
        fusion::PAIRS.len(),
        engine.name()
    );
    let pairs = fusion::measure_pairs(engine, warmup, reps, 0)?;
    let mut csv = String::from("first,second,first_ms,second_ms,chain_ms,saving_ms,fused\n");
    println!(
        "{:<14} {:>9} {:>9} {:>9} {:>9}  fused",
        "pair", "a ms", "b ms", "a→b ms", "saved ms"
    );
    for p in &pairs {
        writeln!(
            csv,
            "{},{},{:.6},{:.6},{:.6},{:.6},{}",
            p.first,
            p.second,
            p.first_ms,
            p.second_ms,
            p.chain_ms,
            p.saving_ms(),
            p.fused()
        )?;
        println!(
            "{:<14} {:>9.4} {:>9.4} {:>9.4} {:>9.4}  {}",
            format!("{}+{}", p.first, p.second),
            p.first_ms,
            p.second_ms,
            p.chain_ms,
            p.saving_ms(),
            if p.fused() { "yes" } else { "no" }
        );
    }
    let path = out.join("fusion.csv");
    std::fs::write(&path, csv).with_context(|| format!("cannot write {}", path.display()))?;
    let rules: Vec<String> = fusion::rules(&pairs).iter().map(|r| format!("\"{r}\"")).collect();
    println!(
        "measured rules (saving > 0.5 x the cheaper op): fusion = [{}]",
        rules.join(", ")
    );
    println!("wrote {}", path.display());
    Ok(())
}
