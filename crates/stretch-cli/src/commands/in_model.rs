//! `stretch profile --in-model`: kernels timed inside whole models.

use anyhow::{Context, Result, bail};
use engine::host::CoreSet;
use engine::{Engine, TractEngine};
use graph_ir::onnx::{ImportOptions, import_file};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use predictor::kernels::default_rules;
use predictor::profiler::csv::Store;
use predictor::profiler::in_model::{inputs, time_kernels};
use std::path::{Path, PathBuf};

/// The file `stretch profile --in-model` appends to and `stretch fit` reads.
pub const FILE: &str = "in-model.csv";

/// Times every kernel of each of `models` inside it (`warmup` untimed runs,
/// then `reps` with each node of tract's plan timed) and appends one row of
/// origin `in-model` per kernel of a profiled class to `out`/in-model.csv.
pub fn run(
    engine: &TractEngine,
    cores: &CoreSet,
    models: &[PathBuf],
    out: &Path,
    reps: usize,
    warmup: usize,
) -> Result<()> {
    if reps == 0 {
        bail!("--reps must be at least 1");
    }
    let graphs = models
        .iter()
        .map(|path| {
            import_file(path, &ImportOptions::default()).with_context(|| format!("cannot import {}", path.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let csv = out.join(FILE);
    let (mut store, existing) = Store::open(&csv)?;
    if let Some(line) = existing.torn_line {
        eprintln!(
            "note: {}:{line} was cut off by an interrupted run; dropped",
            csv.display()
        );
    }
    let rules = default_rules();
    let bar = ProgressBar::with_draw_target(Some(models.len() as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} models {wide_msg}")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut written = 0;
    println!(
        "{:<28} {:>8} {:>9} {:>9} {:>6}",
        "model", "kernels", "run ms", "unattr.", "rows"
    );
    for (path, g) in models.iter().zip(&graphs) {
        bar.set_message(path.display().to_string());
        let times = time_kernels(engine, g, &inputs(g, 3), &rules, warmup, reps)
            .with_context(|| format!("{}: timing its kernels inside it", path.display()))?;
        let mut rows = 0;
        for k in &times.kernels {
            if let Some(row) = k.row(engine, cores, 0) {
                store.append(&row)?;
                rows += 1;
            }
        }
        written += rows;
        bar.suspend(|| {
            println!(
                "{:<28} {:>8} {:>9.3} {:>9.3} {:>6}",
                path.file_name()
                    .map_or_else(String::new, |s| s.to_string_lossy().into_owned()),
                times.kernels.len(),
                times.run.median_ms,
                times.unattributed_ms,
                rows
            )
        });
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!(
        "appended {written} rows to {} ({} {} thread(s) on cores {cores}); `stretch fit {}` fits the forests to them",
        csv.display(),
        engine.name(),
        engine.threads(),
        out.display()
    );
    Ok(())
}
