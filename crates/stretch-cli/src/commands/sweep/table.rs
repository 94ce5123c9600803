//! The tables a sweep ends with: `compare-accuracy`'s table for each seed,
//! built from the jobs' `stretch train --json` results, and with several
//! seeds each model's mean and spread.

use std::path::Path;

use anyhow::Result;
use sweep::{Job, SweepFile};
use training::comparison::{self, Failed, SeedRows, SweepReport, Trained};

use crate::commands::compare::rows::lines;
use crate::format::table;

/// The rows of one seed's jobs that did not fail, in `compare-accuracy`'s
/// order, gaps against that seed's original.
pub(crate) fn seed_rows(jobs: &[&Job], failed: &[(String, String)]) -> Result<Vec<comparison::Row>> {
    let models: Vec<Trained> = jobs
        .iter()
        .filter(|job| !failed.iter().any(|(id, _)| id == &job.id))
        .map(|job| Trained {
            label: job.label.clone(),
            source: job.source.clone(),
            distilled: job.distilled,
            result: job.result.clone(),
            quantized: job.quantized.clone(),
        })
        .collect();
    Ok(comparison::seed_rows(&models)?)
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
        let report = SweepReport {
            schema: "stretch.sweep/1",
            dataset: &file.dataset,
            failed: failed.iter().map(|(job, error)| Failed { job, error }).collect(),
            seeds,
        };
        report.write(path)?;
        println!("wrote {}", path.display());
    }
    Ok(())
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
    for m in comparison::over_seeds(seeds) {
        let ((top1, top1_sd), (gap, gap_sd)) = (m.top1, m.gap_top1);
        out.push(vec![
            m.label.clone(),
            m.seeds.to_string(),
            format!("{top1:.2}% ± {top1_sd:.2}"),
            if m.label == "original" {
                "-".into()
            } else {
                format!("{gap:+.2} ± {gap_sd:.2}")
            },
        ]);
    }
    out
}
