//! `stretch predict --bundle DIR`: predicted latency of an exported bundle.

use anyhow::{Context, Result};
use predictor::{DeviceModel, LatencyModel};
use std::collections::HashMap;
use std::path::Path;

/// Predicts every subgraph of the bundle in `dir` on its processor of
/// `device` at the precision its files compute, and the makespan of
/// running them in manifest order (each starts once the subgraphs it reads
/// have finished and their outputs have crossed over, and its processor is free).
pub fn run(dir: &Path, device: &Path, analytic: bool) -> Result<()> {
    let b = bundle::Bundle::open(dir)?;
    let m = &b.manifest;
    let mut model = DeviceModel::load(device)?;
    if analytic {
        model = model.without_regressors();
    }
    let mut notes = Vec::new();
    for p in &m.processors {
        let want: predictor::Precision = p.precision.parse().map_err(anyhow::Error::msg)?;
        let profile = model.profile().processor(&p.name)?;
        if profile.precision() == want {
            continue;
        }
        if profile.precisions().contains(&want) {
            model.set_precision(&p.name, want)?;
        } else {
            notes.push(format!(
                "{}: the bundle computes {want}, which {} rates no figures for; priced at {}",
                p.name,
                device.display(),
                profile.precision()
            ));
        }
    }
    let loaded = b.stitch()?;
    let g = &loaded.graph;
    let mut finish: HashMap<String, f64> = HashMap::new();
    let mut free: HashMap<String, f64> = HashMap::new();
    let mut busy: HashMap<String, f64> = HashMap::new();
    let mut producer: HashMap<String, &bundle::Subgraph> = HashMap::new();
    println!("subgraph   processor  precision  predicted ms  starts at ms  (predicted)");
    for (s, part) in m.subgraphs.iter().zip(&loaded.partition.subgraphs) {
        let ms = model
            .predict(g, &part.nodes, &s.processor)
            .with_context(|| format!("predicting {} on {}", s.model.file, s.processor))?
            .total_ms;
        let mut ready = 0.0f64;
        for (t, outlet) in s.inputs.iter().zip(&part.inputs) {
            let Some(from) = producer.get(&t.name) else { continue };
            let mut at = finish[&from.name];
            if from.processor != s.processor {
                let bytes = g.fact(*outlet).map_or(0, |f| f.bytes()) as u64;
                at += model.comm_ms(&from.processor, &s.processor, bytes)?;
            }
            ready = ready.max(at);
        }
        let start = ready.max(free.get(&s.processor).copied().unwrap_or(0.0));
        let end = start + ms;
        free.insert(s.processor.clone(), end);
        *busy.entry(s.processor.clone()).or_default() += ms;
        finish.insert(s.name.clone(), end);
        for t in &s.outputs {
            producer.insert(t.name.clone(), s);
        }
        let precision = m
            .processors
            .iter()
            .find(|p| p.name == s.processor)
            .map_or("", |p| p.precision.as_str());
        println!(
            "{:10} {:10} {:10} {ms:12.3}  {start:12.3}",
            s.name, s.processor, precision
        );
    }
    for p in &m.processors {
        println!(
            "{}: {:.3} ms busy (predicted)",
            p.name,
            busy.get(&p.name).copied().unwrap_or(0.0)
        );
    }
    for n in &notes {
        println!("note: {n}");
    }
    let total = finish.values().copied().fold(0.0, f64::max);
    println!(
        "predicted makespan of {} on {}: {total:.3} ms ({} subgraphs{})",
        m.model,
        m.device,
        m.subgraphs.len(),
        if m.rewrites.is_empty() {
            String::new()
        } else {
            format!(", {} nodes rewritten", m.rewrites.len())
        }
    );
    Ok(())
}
