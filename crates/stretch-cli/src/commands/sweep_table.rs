//! The tables a sweep ends with: `compare-accuracy`'s table for each seed,
//! built from the jobs' `stretch train --json` results, and with several
//! seeds each model's mean and spread.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use sweep::{Job, SweepFile};

use crate::commands::compare_rows::{Row, lines};
use crate::commands::train_result::{self, FileScore, TrainResult};
use crate::format::table;

#[derive(Serialize)]
struct SeedRows {
    seed: u64,
    rows: Vec<Row>,
}

#[derive(Serialize)]
struct Failed<'a> {
    job: &'a str,
    error: &'a str,
}

#[derive(Serialize)]
struct Report<'a> {
    schema: &'static str,
    dataset: &'a str,
    seeds: Vec<SeedRows>,
    failed: Vec<Failed<'a>>,
}

/// The row of a trained model.
fn fp32_row(job: &Job, r: &TrainResult) -> Row {
    Row {
        label: job.label.clone(),
        file: job.source.clone(),
        distilled: job.distilled,
        params: r.params,
        macs: r.macs,
        top1: r.top1,
        top5: r.top5,
        best_top1: r.best_top1,
        gap_top1: 0.0,
        train_seconds: r.train_seconds,
        precision: "fp32",
        file_bytes: r.file_bytes,
        gap_fp32_branched: None,
    }
}

/// The row of a quantized version (`kind`: ptq or qat) of `fp32`'s model.
fn quantized_row(fp32: &Row, kind: &'static str, score: &FileScore, seconds: f64) -> Row {
    Row {
        label: format!("{}-{kind}", fp32.label),
        file: fp32.file.clone(),
        distilled: false,
        params: fp32.params,
        macs: fp32.macs,
        top1: score.top1,
        top5: score.top5,
        best_top1: score.top1,
        gap_top1: 0.0,
        train_seconds: seconds,
        precision: kind,
        file_bytes: score.file_bytes,
        gap_fp32_branched: Some(score.top1 - fp32.top1),
    }
}

/// The rows of one seed's finished jobs, in `compare-accuracy`'s order, gaps
/// against that seed's original.
pub(crate) fn seed_rows(jobs: &[&Job], failed: &[(String, String)]) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for job in jobs {
        if failed.iter().any(|(id, _)| id == &job.id) {
            continue;
        }
        let fp32 = fp32_row(job, &train_result::read(&job.result)?);
        let quantized = match &job.quantized {
            Some(path) => {
                let q = train_result::read(path)?;
                let scores = q
                    .quantized
                    .with_context(|| format!("{}: no quantized scores", path.display()))?;
                let mut extra = Vec::new();
                if let Some(ptq) = &scores.ptq {
                    extra.push(quantized_row(&fp32, "ptq", ptq, 0.0));
                }
                extra.push(quantized_row(&fp32, "qat", &scores.qat, q.train_seconds));
                extra
            }
            None => Vec::new(),
        };
        rows.push(fp32);
        rows.extend(quantized);
    }
    if let Some(base) = rows.iter().find(|r| r.label == "original").map(|r| r.top1) {
        for row in rows.iter_mut().filter(|r| r.label != "original") {
            row.gap_top1 = row.top1 - base;
        }
    }
    Ok(rows)
}

/// Prints each seed's table (and a summary over seeds), lists the failed
/// jobs, and writes the JSON report when asked.
pub fn report(file: &SweepFile, jobs: &[Job], failed: &[(String, String)], json: Option<&Path>) -> Result<()> {
    let mut seeds = Vec::new();
    for &seed in &file.seeds {
        let of_seed: Vec<&Job> = jobs.iter().filter(|j| j.seed == seed).collect();
        let rows = seed_rows(&of_seed, failed)?;
        println!();
        println!("seed {seed}");
        print!("{}", table(&lines(&rows), 1));
        seeds.push(SeedRows { seed, rows });
    }
    println!("gap = branched - original top-1 (points) at the same seed, on the same validation images");
    if seeds.len() > 1 {
        println!();
        print!("{}", table(&summary(&seeds), 1));
    }
    for (job, error) in failed {
        println!("\nfailed: {job}: {error}");
    }
    if let Some(path) = json {
        let report = Report {
            schema: "stretch.sweep/1",
            dataset: &file.dataset,
            failed: failed.iter().map(|(job, error)| Failed { job, error }).collect(),
            seeds,
        };
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Mean and sample standard deviation of `xs`.
fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = if xs.len() > 1 {
        xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var.sqrt())
}

/// One line per model over the seeds it finished at: top-1 and gap, mean
/// ± standard deviation.
fn summary(seeds: &[SeedRows]) -> Vec<Vec<String>> {
    let mut out = vec![vec![
        "model".to_string(),
        "seeds".into(),
        "val top-1 (mean ± sd)".into(),
        "gap top-1 (mean ± sd)".into(),
    ]];
    let mut labels: Vec<&str> = Vec::new();
    for s in seeds {
        for r in &s.rows {
            if !labels.contains(&r.label.as_str()) {
                labels.push(&r.label);
            }
        }
    }
    for label in labels {
        let rows: Vec<&Row> = seeds
            .iter()
            .filter_map(|s| s.rows.iter().find(|r| r.label == label))
            .collect();
        let (top1, top1_sd) = mean_sd(&rows.iter().map(|r| r.top1).collect::<Vec<_>>());
        let (gap, gap_sd) = mean_sd(&rows.iter().map(|r| r.gap_top1).collect::<Vec<_>>());
        out.push(vec![
            label.to_string(),
            rows.len().to_string(),
            format!("{top1:.2}% ± {top1_sd:.2}"),
            if label == "original" {
                "-".into()
            } else {
                format!("{gap:+.2} ± {gap_sd:.2}")
            },
        ]);
    }
    out
}
