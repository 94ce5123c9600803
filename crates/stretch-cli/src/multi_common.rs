//! What `serve` and `simulate` share: workloads, models, policies, tables,
//! traces and plots.

use anyhow::{Context, Result, bail};
use clap::Args;
use graph_ir::Graph;
use graph_ir::onnx::{ImportOptions, import_file};
use multi_dnn::Registry;
use multi_dnn::core::report::{Report, RunLog};
use multi_dnn::core::workload::Workload;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The policy sweep and outputs `serve` and `simulate` share.
#[derive(Args, Debug)]
pub struct SweepArgs {
    // Its help lists the registry's policies and defaults.
    #[arg(long, help = Registry::builtin().policy_help())]
    pub policy: Option<String>,

    /// Run the same workload under each of these policies (comma-separated)
    /// and print one table.
    #[arg(long, value_name = "P1,P2,...")]
    pub compare: Option<String>,

    /// Run once per SLO multiplier (x each model's isolated p99 on its
    /// fastest processor), replacing the workload's multiplier SLOs.
    #[arg(long = "slo-multipliers", value_name = "M1,M2,...")]
    pub slo_multipliers: Option<String>,

    /// Override the workload's duration_s.
    #[arg(long = "duration-s")]
    pub duration_s: Option<f64>,

    /// Print the reports as JSON.
    #[arg(long)]
    pub json: bool,

    /// Write a Chrome trace of the last run (one track per processor); with
    /// --plan, of the last round of every plan and of lst, one process each.
    #[arg(long, value_name = "T.json")]
    pub trace: Option<PathBuf>,

    /// Write an SVG of SLO satisfaction against the multiplier per policy.
    #[arg(long, value_name = "P.svg")]
    pub plot: Option<PathBuf>,
}

impl SweepArgs {
    /// The policies to run: `--compare`, else `--policy`, else the
    /// default for the workload (`render`: whether it has a render task).
    pub fn policies_for(&self, render: bool) -> Result<Vec<String>> {
        let default = Registry::builtin().default_policy(render);
        policy_list(self.compare.as_deref().or(self.policy.as_deref()).unwrap_or(default))
    }
}

/// One report per (SLO multiplier, policy) run.
pub type Rows = [(Option<f64>, Report)];

/// Prints the reports (JSON, or `table` of them when there are several; a
/// single report was printed as it finished) and writes the trace of the
/// last run and the plot. `kind` is `measured` or `simulated`; `footer`
/// follows the table.
#[allow(clippy::too_many_arguments)]
pub fn emit(
    args: &SweepArgs,
    kind: &str,
    table: fn(&Rows) -> String,
    footer: &str,
    rows: &[(Option<f64>, Report)],
    last: Option<&RunLog>,
    names: &[String],
    w: &Workload,
) -> Result<()> {
    if args.json {
        let reports: Vec<&Report> = rows.iter().map(|r| &r.1).collect();
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else if rows.len() > 1 {
        print!("{}", table(rows));
        println!("{footer}");
    }
    if let (Some(path), Some(log)) = (&args.trace, last) {
        let apps: Vec<String> = w.apps.iter().map(|x| x.name.clone()).collect();
        write(
            path,
            &serde_json::to_string(&multi_dnn::core::trace::chrome_trace(log, names, &apps, kind))?,
        )?;
    }
    if let Some(path) = &args.plot {
        let tool = if kind == "measured" {
            "stretch serve"
        } else {
            "stretch simulate"
        };
        write(path, &plot_svg(&format!("SLO satisfaction ({kind}, {tool})"), rows))?;
    }
    Ok(())
}

/// The policy names in a line, from the registry.
pub fn policy_help() -> String {
    Registry::builtin().known()
}

/// Splits and checks a comma-separated policy list.
pub fn policy_list(list: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if Registry::builtin().get(p).is_none() {
            bail!("unknown policy '{p}' (known: {})", policy_help());
        }
        out.push(p.to_string());
    }
    if out.is_empty() {
        bail!("no policy given (known: {})", policy_help());
    }
    Ok(out)
}

/// Reads the workload and checks the processors it names.
pub fn load_workload(path: &Path, names: &[String], duration_s: Option<f64>) -> Result<Workload> {
    let mut w = Workload::load(path)?;
    w.check_processors(names)?;
    if let Some(d) = duration_s {
        w.set_duration_s(d, "--duration-s")?;
    }
    Ok(w)
}

/// Imports every app's model, naming the app and file in errors.
pub fn load_graphs(w: &Workload) -> Result<Vec<Graph>> {
    w.apps
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let options = ImportOptions {
                input_shapes: a.input_shape.iter().cloned().collect(),
                random_weights: a.random_weights,
            };
            let mut g = import_file(&a.model, &options)
                .with_context(|| format!("{}: app[{i}] ({}): cannot import {}", w.file, a.name, a.model.display()))?;
            g.name = a.name.clone();
            Ok(g)
        })
        .collect()
}

/// [`load_graphs`] for serving: every weight must have data, else the
/// error names the app, its file and the `random_weights` key to add.
pub fn load_runnable_graphs(w: &Workload) -> Result<Vec<Graph>> {
    let graphs = load_graphs(w)?;
    for (i, (g, a)) in graphs.iter().zip(&w.apps).enumerate() {
        if let Some(what) = crate::model_args::structure_only(g) {
            bail!(
                "{}: app[{i}] ({}): {}: {what}: add random_weights = SEED to the app to serve it with seeded values",
                w.file,
                a.name,
                a.model.display()
            );
        }
    }
    Ok(graphs)
}

/// Fails naming the first of `flags` that was given (`true`) where the
/// command runs a static plan, with `why` it does not apply.
pub fn refuse_with_plan(flags: &[(&str, bool)], why: &str) -> Result<()> {
    match flags.iter().find(|f| f.1) {
        Some((flag, _)) => bail!("{flag} does not apply with --plan: {why}"),
        None => Ok(()),
    }
}

/// The multipliers to sweep: from the flag, or the workload as written.
pub fn multipliers(flag: &Option<String>) -> Result<Vec<Option<f64>>> {
    let Some(list) = flag else { return Ok(vec![None]) };
    list.split(',')
        .map(|s| {
            let m: f64 = s
                .trim()
                .parse()
                .with_context(|| format!("--slo-multipliers: '{s}' is not a number"))?;
            if !(m.is_finite() && m > 0.0) {
                bail!("--slo-multipliers: {m} must be positive");
            }
            Ok(Some(m))
        })
        .collect()
}

/// One row per (policy, multiplier).
pub fn compare_table(rows: &[(Option<f64>, Report)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<12} {:>10} {:>9} {:>11} {:>9} {:>10} {:>8} {:>12} {:>16}",
        "policy", "multiplier", "SLO met", "throughput", "p99 max", "frames/s", "lost", "decision p50", "outputs ≠ ref"
    );
    for (m, r) in rows {
        let p99 = r.apps.iter().map(|a| a.p99_ms).fold(0.0, f64::max);
        let _ = writeln!(
            s,
            "{:<12} {:>10} {:>8.1}% {:>7.2} r/s {:>6.1} ms {:>10} {:>8} {:>9.1} µs {:>16}",
            r.policy,
            m.map_or("-".into(), |m| format!("{m}")),
            r.slo_satisfaction,
            r.throughput_rps,
            p99,
            r.fps.map_or("-".into(), |f| format!("{f:.2}")),
            r.lost,
            r.decision_p50_us,
            if r.outputs_checked > 0 {
                format!("{} of {}", r.mismatches, r.outputs_checked)
            } else {
                "not checked".into()
            }
        );
    }
    s
}

/// SLO satisfaction against the multiplier, one line per policy (SVG).
pub fn plot_svg(title: &str, rows: &[(Option<f64>, Report)]) -> String {
    let (w, h, l, t, r, b) = (640.0, 400.0, 60.0, 40.0, 140.0, 50.0);
    let xs: Vec<f64> = rows.iter().filter_map(|(m, _)| *m).collect();
    let (x0, x1) = xs.iter().fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
    let (x0, x1) = if x1 > x0 { (x0, x1) } else { (x0 - 1.0, x0 + 1.0) };
    let px = |x: f64| l + (x - x0) / (x1 - x0) * (w - l - r);
    let py = |y: f64| t + (100.0 - y) / 100.0 * (h - t - b);
    let colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{l}" y="24" font-size="14" font-weight="bold">{title}</text>"#
    );
    for y in [0.0, 25.0, 50.0, 75.0, 100.0] {
        let _ = writeln!(
            s,
            r##"<line x1="{l}" x2="{}" y1="{}" y2="{}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{y}%</text>"##,
            w - r,
            py(y),
            py(y),
            l - 6.0,
            py(y) + 4.0
        );
    }
    for x in &xs {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{x}</text>"#,
            px(*x),
            h - b + 16.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">SLO multiplier (x isolated p99 on the fastest processor)</text>"#,
        (l + w - r) / 2.0,
        h - 12.0
    );
    let mut policies: Vec<&str> = Vec::new();
    for (_, rep) in rows {
        if !policies.contains(&rep.policy.as_str()) {
            policies.push(&rep.policy);
        }
    }
    for (i, p) in policies.iter().enumerate() {
        let c = colors[i % colors.len()];
        let pts: Vec<String> = rows
            .iter()
            .filter(|(m, rep)| m.is_some() && rep.policy == *p)
            .map(|(m, rep)| format!("{:.1},{:.1}", px(m.unwrap_or(0.0)), py(rep.slo_satisfaction)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            pts.join(" ")
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" fill="{c}">{p}</text>"#,
            w - r + 10.0,
            t + 18.0 * i as f64 + 10.0
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Writes `text` to `path`, naming it in errors.
pub fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
