//! Plans as text: the table `plan`, `stretch` and `branch` print, and the
//! precision each processor is priced at.

use branching::plan::Plan;
use predictor::DeviceModel;

/// Each processor's precision and the figures that price it.
pub fn precision_lines(model: &DeviceModel, processors: &[String]) -> String {
    let mut text = String::new();
    for name in processors {
        let Ok(p) = model.profile().processor(name) else {
            continue;
        };
        let (at, rated) = (p.precision(), p.rated());
        let how = if at == rated {
            format!("the profile's figures are rated at {rated}")
        } else {
            let source = p.speedup.get(&at).map_or("", |f| f.source.as_str());
            format!(
                "compute {:.2}x and memory traffic {:.2}x the figures rated at {rated} (speedup.{at}: {source})",
                p.compute_rate(),
                p.bytes_ratio()
            )
        };
        text += &format!("precision: {name} runs {at}; {how}\n");
    }
    text
}

/// `processor` with its precision where the plan records one.
fn at(plan: &Plan, processor: &str) -> String {
    match plan.precisions.get(processor) {
        Some(p) => format!("{processor}[{p}]"),
        None => processor.to_string(),
    }
}

/// A readable table of a plan.
pub fn describe(plan: &Plan) -> String {
    let mut rows = vec![
        [
            "part",
            "processors (depth, width)",
            "predicted ms",
            "work",
            "candidates kept/considered",
            "note",
        ]
        .map(String::from)
        .to_vec(),
    ];
    let stem = if plan.stem.split.is_empty() {
        at(plan, &plan.stem.processor)
    } else {
        let cuts: Vec<String> = plan
            .stem
            .split
            .iter()
            .map(|s| format!("{}({} ch)", at(plan, &s.processor), s.channels))
            .collect();
        format!("{}, merged on {}", cuts.join(" + "), at(plan, &plan.stem.processor))
    };
    rows.push(vec![
        "stem".into(),
        stem,
        format!("{:.3}", plan.stem.predicted_ms),
        String::new(),
        String::new(),
        String::new(),
    ]);
    for s in &plan.stages {
        let what = if s.branches.is_empty() {
            format!(
                "{} (whole: {} blocks, {} ch)",
                at(plan, &s.processor),
                s.blocks,
                s.channels
            )
        } else {
            s.branches
                .iter()
                .map(|b| format!("{}(d{} w{})", at(plan, &b.processor), b.depth, b.width))
                .collect::<Vec<_>>()
                .join(" + ")
        };
        rows.push(vec![
            format!("stage {}", s.index),
            what,
            format!("{:.3}", s.predicted_ms),
            format!("{:.2}x", s.work_ratio),
            format!("{}/{}", s.candidates.kept, s.candidates.considered),
            s.reason.clone().unwrap_or_default(),
        ]);
    }
    rows.push(vec![
        "head".into(),
        at(plan, &plan.head.processor),
        format!("{:.3}", plan.head.predicted_ms),
        String::new(),
        String::new(),
        String::new(),
    ]);
    let multiple = match plan.settings.width_multiple {
        branching::plan::DEFAULT_WIDTH_MULTIPLE => String::new(),
        m => format!("; widths in multiples of {m}"),
    };
    let mut text = format!(
        "plan for {} on {} ({}; merge {:?}{multiple}); latencies: {}\n",
        plan.model,
        plan.device,
        plan.processors.join("+"),
        plan.settings.merge,
        plan.predicted_by
    );
    text += &crate::format::table(&rows, 2);
    let singles: Vec<String> = plan
        .totals
        .original_ms
        .iter()
        .map(|(p, ms)| format!("{p} {ms:.2} ms"))
        .collect();
    let considered: u64 = plan.stages.iter().map(|s| s.candidates.considered).sum();
    let kept: u64 = plan.stages.iter().map(|s| s.candidates.kept).sum();
    text += &format!(
        "original on one processor: {}\nplan: {:.2} ms, {:.2}x over the fastest single processor ({}) with {:.2}x the original's MACs; ideal bound for this work {:.2} ms ({:.2}x)\ncandidates: {considered} considered, {kept} kept\n",
        singles.join(", "),
        plan.totals.plan_ms,
        plan.totals.speedup,
        plan.totals.fastest_single,
        plan.totals.work_ratio,
        plan.totals.ideal_ms,
        plan.totals.ideal_speedup
    );
    text
}
