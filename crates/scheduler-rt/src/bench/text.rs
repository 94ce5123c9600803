//! `stretch bench`'s report as text.

use super::report::{Configuration, Report, SubgraphTimes};
use crate::ProcessorConfig;
use engine::Spin;
use std::io::Write;

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
        self.write_setup(out)?;
        self.write_latencies(out)?;
        self.write_ideals(out)?;
        self.write_memory(out)
    }

    fn write_setup(&self, out: &mut impl Write) -> std::io::Result<()> {
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
        Ok(())
    }

    fn write_latencies(&self, out: &mut impl Write) -> std::io::Result<()> {
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
        Ok(())
    }

    fn write_ideals(&self, out: &mut impl Write) -> std::io::Result<()> {
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
        Ok(())
    }

    fn write_memory(&self, out: &mut impl Write) -> std::io::Result<()> {
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
