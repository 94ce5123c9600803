//! What `stretch bench` measured, printed as text or as JSON
//! (`stretch.bench/1`); both come from the same [`Report`].

use predictor::profiler::steal::Steal;
use scheduler_rt::{ProcessorConfig, Spin};
use serde::Serialize;
use std::io::Write;

/// Every figure one `stretch bench` run prints.
#[derive(Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub branched: String,
    pub original: String,
    /// Engines with their versions.
    pub engines: Vec<String>,
    /// The cores the run may use.
    pub cores: String,
    pub runs: usize,
    pub block: usize,
    /// The branched model's processors, as `--processor` specs.
    pub processors: Vec<String>,
    pub work: Work,
    /// Why the onnxruntime reference was not measured (absent when it was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_skipped: Option<String>,
    /// The onnxruntime reference's processor, as a `--processor` spec
    /// (absent when it was not measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The pause after each block of a configuration whose threads spin
    /// after a run (the reference), in milliseconds.
    pub settle_after_spinning_ms: f64,
    /// Cores a CPU-burning thread loaded during the timed runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interference: Option<String>,
    /// Measured latencies per configuration, in milliseconds.
    pub configurations: Vec<Configuration>,
    /// The branched model on its processors against each other configuration.
    pub speedups: Vec<Speedup>,
    /// Per engine, the branched model on its processors against its ideal.
    pub ideals: Vec<Ideal>,
    /// CPU time the hypervisor gave other guests during the timed runs
    /// (absent where /proc/stat cannot be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steal: Option<Steal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<Adaptive>,
    pub weights: Weights,
    pub trace: String,
    pub gantt: String,
}

/// MACs of the two models.
#[derive(Serialize)]
pub struct Work {
    pub branched_macs: u64,
    pub original_macs: u64,
    /// `branched_macs / original_macs`.
    pub ratio: f64,
}

#[derive(Serialize)]
pub struct Configuration {
    pub name: String,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    /// Resident memory loading it added (absent where it cannot be read).
    pub loaded_bytes: Option<u64>,
    /// `loaded_bytes` over the weights of the model it runs.
    pub loaded_over_weights: Option<f64>,
    pub compiled_subgraph_copies: usize,
}

#[derive(Serialize)]
pub struct Speedup {
    /// The configuration compared against.
    pub versus: String,
    /// Whether it is the onnxruntime reference (original, 2 threads).
    pub reference: bool,
    /// Its time over the branched model's, at the median and at the minimum.
    pub p50: f64,
    pub min: f64,
}

/// A branched run against its ideal ([`super::bench_ideal::ideal_ms`]).
#[derive(Serialize)]
pub struct Ideal {
    pub configuration: String,
    /// The sequential configuration whose subgraph times make the ideal.
    pub sequential: String,
    pub ideal_ms: f64,
    pub p50_ms: f64,
    pub p50_over_ideal: f64,
    /// The same schedule with each subgraph's median time in this
    /// configuration's own runs.
    pub in_run_ideal_ms: f64,
    /// `in_run_ideal_ms / ideal_ms`: what running beside each other does
    /// to the subgraphs themselves.
    pub beside_over_alone: f64,
    /// The median over this configuration's runs of each run's ideal laid
    /// with its own subgraph times.
    pub runs_ideal_ms: f64,
    /// `runs_ideal_ms / in_run_ideal_ms`: what the subgraphs' spread costs
    /// (each meeting point waits for the slowest branch of its run).
    pub spread_over_medians: f64,
    /// `p50_ms / runs_ideal_ms`: what the runtime costs between them.
    pub p50_over_runs_ideal: f64,
    /// Every subgraph's median time in the sequential runs and in these,
    /// in the partition's order.
    pub subgraphs: Vec<SubgraphTimes>,
    /// The onnxruntime reference's p50 over this configuration's (absent
    /// without the reference).
    pub reference_over_p50: Option<f64>,
}

/// One subgraph's median time alone (the sequential runs) and in the
/// branched runs.
#[derive(Serialize)]
pub struct SubgraphTimes {
    pub subgraph: String,
    pub processor: String,
    pub sequential_ms: f64,
    pub in_run_ms: f64,
}

/// The adaptive runtime under outside load against fixed placement.
#[derive(Serialize)]
pub struct Adaptive {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub fixed_p50_ms: f64,
    pub fixed_p99_ms: f64,
    pub reference: String,
    pub reference_p50_ms: f64,
    pub reference_p99_ms: f64,
    pub runs: usize,
    pub moves: usize,
    pub moves_off_slow: usize,
    pub moves_back: usize,
    pub first_move: Option<String>,
}

#[derive(Serialize)]
pub struct Weights {
    pub original_bytes: u64,
    pub branched_bytes: u64,
}

/// Steal share of a CPU above which the report warns.
const STEAL_WARN: f64 = 0.05;

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

impl Report {
    /// The configuration named `name`.
    fn config(&self, name: &str) -> Option<&Configuration> {
        self.configurations.iter().find(|c| c.name == name)
    }

    /// The human-readable report.
    pub fn write_text(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(out, "branched  {}\noriginal  {}", self.branched, self.original)?;
        writeln!(
            out,
            "work      branched {:.3} GMACs, {:.2}x the original's {:.3} GMACs",
            self.work.branched_macs as f64 / 1e9,
            self.work.ratio,
            self.work.original_macs as f64 / 1e9
        )?;
        writeln!(
            out,
            "engines   {}; cores available {}; {} timed runs each, interleaved in blocks of {} (each after one untimed run)",
            self.engines.join(", "),
            self.cores,
            self.runs,
            self.block.min(self.runs)
        )?;
        writeln!(out, "processors {}", self.processors.join(" "))?;
        match (&self.reference_skipped, &self.reference) {
            (Some(reason), _) => writeln!(out, "onnxruntime reference: skipped: {reason}")?,
            (None, Some(spec)) if spec.parse::<ProcessorConfig>().is_ok_and(|p| p.spin == Spin::On) => writeln!(
                out,
                "reference onnxruntime's session defaults, 2 threads (they spin while waiting for work, as out of the box); {:.0} ms pause after each of its blocks, for them to stop",
                self.settle_after_spinning_ms
            )?,
            (None, Some(spec)) => writeln!(out, "reference {spec} (its threads do not spin after a run)")?,
            (None, None) => {}
        }
        if let Some(c) = &self.interference {
            writeln!(
                out,
                "interference: a CPU-burning thread pinned to {c} ran during every timed run (not during warm-up)"
            )?;
        }
        writeln!(
            out,
            "{:<40} {:>10} {:>10} {:>10} {:>10}",
            "configuration (measured)", "min ms", "p50 ms", "p90 ms", "p99 ms"
        )?;
        for c in &self.configurations {
            writeln!(
                out,
                "{:<40} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
                c.name, c.min_ms, c.p50_ms, c.p90_ms, c.p99_ms
            )?;
        }
        for s in &self.speedups {
            if s.reference {
                let p50 = self.config(&s.versus).map_or(f64::NAN, |c| c.p50_ms);
                writeln!(
                    out,
                    "speedup of branched vs the onnxruntime reference (original, 2 threads, p50 {p50:.3} ms) {:.2}x (p50), {:.2}x (min)",
                    s.p50, s.min
                )?;
            } else {
                writeln!(
                    out,
                    "speedup of branched on its processors vs {:<30} {:.2}x (p50), {:.2}x (min)",
                    s.versus, s.p50, s.min
                )?;
            }
        }
        if let Some(st) = &self.steal {
            let high = st.max() > STEAL_WARN;
            writeln!(
                out,
                "steal     {} during the timed runs{}",
                st.line(),
                if high {
                    format!(
                        "; above {:.0}% on a CPU, the timings also measure the machine's other guests",
                        100.0 * STEAL_WARN
                    )
                } else {
                    String::new()
                }
            )?;
        }
        for i in &self.ideals {
            writeln!(
                out,
                "ideal     {}: p50 {:.3} ms, ideal {:.3} ms ({:.2}x; ideal: each subgraph's p50 in '{}', laid on its processor as soon as its inputs exist){}",
                i.configuration,
                i.p50_ms,
                i.ideal_ms,
                i.p50_over_ideal,
                i.sequential,
                i.reference_over_p50.map_or(String::new(), |r| format!(
                    "; the onnxruntime reference over it {r:.2}x (p50)"
                ))
            )?;
            let mut grown: Vec<&SubgraphTimes> = i.subgraphs.iter().collect();
            grown.sort_by(|a, b| (b.in_run_ms - b.sequential_ms).total_cmp(&(a.in_run_ms - a.sequential_ms)));
            writeln!(
                out,
                "in-run    {}: the ideal with each subgraph's p50 in these runs {:.3} ms, with each run's own times {:.3} ms (median); over the ideal: subgraphs beside each other {:.2}x, their spread {:.2}x, the runtime between them {:.2}x; grew most: {}",
                i.configuration,
                i.in_run_ideal_ms,
                i.runs_ideal_ms,
                i.beside_over_alone,
                i.spread_over_medians,
                i.p50_over_runs_ideal,
                grown
                    .iter()
                    .take(3)
                    .map(|s| format!(
                        "{} on {} {:.2} → {:.2} ms",
                        s.subgraph, s.processor, s.sequential_ms, s.in_run_ms
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            )?;
        }
        if let Some(a) = &self.adaptive {
            writeln!(
                out,
                "adaptive vs fixed placement: p50 {:.3} vs {:.3} ms, p99 {:.3} vs {:.3} ms ({} p50 {:.3} ms, p99 {:.3} ms)",
                a.p50_ms, a.fixed_p50_ms, a.p99_ms, a.fixed_p99_ms, a.reference, a.reference_p50_ms, a.reference_p99_ms
            )?;
            writeln!(
                out,
                "adaptation: {} moves ({} off a slow processor, {} back home) in {} runs; first: {}",
                a.moves,
                a.moves_off_slow,
                a.moves_back,
                a.runs,
                a.first_move.as_deref().unwrap_or("none")
            )?;
        }
        writeln!(
            out,
            "memory    weights: original {:.1} MiB, branched {:.1} MiB; resident memory added by loading each configuration (VmRSS, measured before its first run):",
            mib(self.weights.original_bytes),
            mib(self.weights.branched_bytes)
        )?;
        for c in &self.configurations {
            match (c.loaded_bytes, c.loaded_over_weights) {
                (Some(b), Some(r)) => writeln!(
                    out,
                    "          {:<40} {:>8.1} MiB ({r:.2}x its weights, {} compiled subgraph copies)",
                    c.name,
                    mib(b),
                    c.compiled_subgraph_copies
                )?,
                _ => writeln!(out, "          {:<40} (cannot read /proc/self/status)", c.name)?,
            }
        }
        writeln!(out, "trace     {}", self.trace)?;
        writeln!(out, "gantt     {}", self.gantt)?;
        Ok(())
    }
}
