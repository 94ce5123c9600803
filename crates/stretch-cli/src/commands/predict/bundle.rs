//! `stretch predict --bundle DIR`: predicted latency of an exported bundle.

use anyhow::{Context, Result};
use predictor::Source;
use predictor::{DeviceModel, LatencyModel};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// One subgraph's predicted figures, and which models priced its kernels.
#[derive(Serialize)]
struct Row {
    subgraph: String,
    processor: String,
    precision: String,
    predicted_ms: f64,
    starts_at_ms: f64,
    /// Per pricing model, how many of the subgraph's kernels it priced.
    priced_by: BTreeMap<String, usize>,
    calibration: Option<String>,
}

/// The model that priced a kernel, in words.
fn label(s: &Source) -> String {
    match s {
        Source::Analytic => "analytic roofline".into(),
        Source::Regressor { file } => format!("regressor {file}"),
        Source::Extrapolated { file, .. } => format!("regressor {file} (extrapolated)"),
        Source::Scaled { file, precision } => format!("regressor {file} scaled to {precision}"),
    }
}

/// The device model pricing each processor at the precision the bundle
/// computes there, with a note where the profile rates no figures for it.
fn model_for(m: &bundle::Manifest, device: &Path, analytic: bool) -> Result<(DeviceModel, Vec<String>)> {
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
    Ok((model, notes))
}

/// Predicts every subgraph of the bundle in `dir` on its processor of
/// `device` at the precision its files compute, and the makespan of
/// running them in manifest order (each starts once the subgraphs it reads
/// have finished and their outputs have crossed over the profile's links,
/// and its processor is free). Each row names the models that priced it;
/// `json` prints the document `stretch.predict-bundle/1` instead.
pub fn run(dir: &Path, device: &Path, analytic: bool, json: bool, tflite: bool) -> Result<()> {
    let b = bundle::Bundle::open(dir)?;
    let m = &b.manifest;
    let (model, mut notes) = model_for(m, device, analytic)?;
    let loaded = b.stitch()?;
    let g = &loaded.graph;
    let files = if tflite {
        let lite = litert_graphs(&b)?;
        let (ops, onnx) = (lite.iter().map(|(_, n)| n.len()).sum::<usize>(), onnx_ops(&loaded));
        notes.push(format!(
            "priced as exported to LiteRT: the .tflite files read back ({ops} operators against the ONNX files' {onnx} nodes: NHWC, with the transposes, pads, reshapes and (de)quantizations the export inserted)"
        ));
        Some(lite)
    } else {
        None
    };
    let mut finish: HashMap<String, f64> = HashMap::new();
    let mut free: HashMap<String, f64> = HashMap::new();
    let mut busy: BTreeMap<String, f64> = m.processors.iter().map(|p| (p.name.clone(), 0.0)).collect();
    let mut producer: HashMap<String, &bundle::Subgraph> = HashMap::new();
    let mut rows = Vec::new();
    for (k, (s, part)) in m.subgraphs.iter().zip(&loaded.partition.subgraphs).enumerate() {
        let (sg, nodes, file) = match &files {
            Some(f) => (&f[k].0, &f[k].1, s.tflite_model.as_ref().map_or(&s.model, |t| &t.model)),
            None => (g, &part.nodes, &s.model),
        };
        let p = model
            .predict(sg, nodes, &s.processor)
            .with_context(|| format!("predicting {} on {}", file.file, s.processor))?;
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
        let end = start + p.total_ms;
        free.insert(s.processor.clone(), end);
        *busy.entry(s.processor.clone()).or_default() += p.total_ms;
        finish.insert(s.name.clone(), end);
        for t in &s.outputs {
            producer.insert(t.name.clone(), s);
        }
        let mut priced_by = BTreeMap::new();
        for k in &p.kernels {
            *priced_by.entry(label(&k.source)).or_default() += 1;
        }
        rows.push(Row {
            subgraph: s.name.clone(),
            processor: s.processor.clone(),
            precision: m
                .processors
                .iter()
                .find(|x| x.name == s.processor)
                .map_or(String::new(), |x| x.precision.clone()),
            predicted_ms: p.total_ms,
            starts_at_ms: start,
            priced_by,
            calibration: p.calibration.clone(),
        });
    }
    let makespan = finish.values().copied().fold(0.0, f64::max);
    if json {
        let doc = serde_json::json!({
            "schema": "stretch.predict-bundle/1",
            "figures": "predicted",
            "bundle": dir.display().to_string(),
            "model": m.model,
            "device": device.display().to_string(),
            "hand_offs": "the profile's links",
            "format": if tflite { "tflite" } else { "onnx" },
            "subgraphs": rows,
            "busy_ms": busy,
            "makespan_ms": makespan,
            "notes": notes,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    print_table(m, device, &rows, &busy, &notes, makespan);
    Ok(())
}

fn print_table(
    m: &bundle::Manifest,
    device: &Path,
    rows: &[Row],
    busy: &BTreeMap<String, f64>,
    notes: &[String],
    makespan: f64,
) {
    println!("subgraph   processor  precision  predicted ms  starts at ms  priced by (kernels)");
    for r in rows {
        let by: Vec<String> = r.priced_by.iter().map(|(k, n)| format!("{k} ({n})")).collect();
        let cal = r
            .calibration
            .as_ref()
            .map_or(String::new(), |c| format!(", calibrated by {c}"));
        println!(
            "{:10} {:10} {:10} {:12.3}  {:12.3}  {}{cal}",
            r.subgraph,
            r.processor,
            r.precision,
            r.predicted_ms,
            r.starts_at_ms,
            by.join(", ")
        );
    }
    for (p, ms) in busy {
        println!("{p}: {ms:.3} ms busy (predicted)");
    }
    for n in notes {
        println!("note: {n}");
    }
    println!(
        "predicted makespan of {} on {} ({}): {makespan:.3} ms ({} subgraphs{}; hand-offs priced by the profile's links)",
        m.model,
        m.device,
        device.display(),
        m.subgraphs.len(),
        if m.rewrites.is_empty() {
            String::new()
        } else {
            format!(", {} nodes rewritten", m.rewrites.len())
        }
    );
}

/// Every subgraph's `.tflite` file read back as a graph to price
/// ([`litert::cost_graph`]), with the nodes that compute.
fn litert_graphs(b: &bundle::Bundle) -> Result<Vec<(graph_ir::Graph, Vec<graph_ir::NodeId>)>> {
    let mut out = Vec::new();
    for s in &b.manifest.subgraphs {
        let t = s.tflite_model.as_ref().with_context(|| {
            format!(
                "subgraph {} has no .tflite file: export with --format onnx,tflite",
                s.name
            )
        })?;
        let g = litert::cost_graph(&b.bytes(&t.model)?, &t.model.file)?;
        let nodes = g.compute_order()?;
        out.push((g, nodes));
    }
    Ok(out)
}

/// The computing nodes of the stitched ONNX files.
fn onnx_ops(loaded: &bundle::Loaded) -> usize {
    loaded.partition.subgraphs.iter().map(|s| s.nodes.len()).sum()
}
