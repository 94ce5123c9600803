//! Loading and timing `bench`'s configurations, and the figures of its report.

use super::ideal;
use super::report::{Adaptive, Configuration, Ideal, Report, Speedup, SubgraphTimes, Weights, Work};
use super::{Configs, Models};
use crate::timing::TimingError;
use crate::timing::interleave::{Progress, Rounds, SETTLE_AFTER_SPINNING, TimedTrace, recover, time_interleaved};
use crate::timing::load::Interference;
use crate::{EngineFactory, ProcessorConfig, Runtime, RuntimeError, Trace};
use engine::Spin;
use engine::host;
use engine::host::CoreSet;
use graph_ir::Graph;
use std::sync::Arc;
use tract_core::prelude::{IntoTValue, Tensor};

/// A benchmark's figures, one traced run of the branched model on its
/// processors, and every run of the adaptive runtime (load, then none)
/// with its start in seconds.
pub struct Measured {
    /// Its `trace` and `gantt` paths are left empty for the caller.
    pub report: Report,
    pub trace: Trace,
    pub adaptive_runs: Vec<TimedTrace>,
}

/// What a benchmark run is asked for.
pub struct Options<'a> {
    pub rounds: Rounds,
    /// Cores a CPU-burning thread loads during the timed runs.
    pub interference: Option<&'a str>,
    pub engines: Arc<EngineFactory>,
}

struct Row {
    name: String,
    ms: Vec<f64>,
}

impl Row {
    fn quantile(&self, q: f64) -> f64 {
        graph_ir::stats::quantile_nan(&self.ms, q)
    }
}

/// The process's resident set (`VmRSS` of `/proc/self/status`) in bytes,
/// after handing freed heap pages back to the system, so that a load that
/// follows is not hidden by reusing pages an earlier one freed.
fn resident_bytes() -> Option<u64> {
    // SAFETY: malloc_trim only returns free heap memory to the system.
    unsafe { libc::malloc_trim(0) };
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| {
        let kb: u64 = l
            .strip_prefix("VmRSS:")?
            .trim()
            .strip_suffix("kB")?
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    })
}

/// Bytes of every constant tensor in `g`.
fn weight_bytes(g: &Graph) -> u64 {
    g.node_ids()
        .iter()
        .filter_map(|id| g.const_tensor(id.out(0)))
        .map(|t| t.fact().bytes() as u64)
        .sum()
}

/// Each configuration loaded on the runtime (the resident memory loading
/// it added), with the engines used.
type Loaded<'c> = (Vec<(&'c str, Runtime, bool)>, Vec<Option<u64>>, Vec<String>);

fn load<'c>(configs: &'c Configs, cores: &CoreSet, engines: &Arc<EngineFactory>) -> Result<Loaded<'c>, TimingError> {
    let pin = || host::pin_current_thread(cores).map_err(|e| TimingError::Pin { reason: e.to_string() });
    let mut names = Vec::new();
    let mut runtimes = Vec::with_capacity(configs.list.len());
    let mut loaded = Vec::with_capacity(configs.list.len());
    for c in &configs.list {
        pin()?;
        let before = resident_bytes();
        let failed = |on: &'static str| {
            move |source: RuntimeError| TimingError::LoadModel {
                label: c.label.to_string(),
                on,
                error: Box::new(source),
            }
        };
        let mut rt = Runtime::load(c.graph, &c.processors, engines.clone()).map_err(failed("the runtime"))?;
        if let Some(p) = &c.adaptive {
            rt = rt
                .with_adaptation(p.clone())
                .map_err(failed("every processor for adaptive placement"))?;
        }
        loaded.push(before.zip(resident_bytes()).map(|(b, a)| a.saturating_sub(b)));
        for (_, e, v) in rt.engines() {
            let e = format!("{e} {v}");
            if !names.contains(&e) {
                names.push(e);
            }
        }
        runtimes.push((c.name.as_str(), rt, c.processors.iter().any(|p| p.spin == Spin::On)));
    }
    Ok((runtimes, loaded, names))
}

/// Times every configuration of `configs` (see [`super::configurations`])
/// on `cores` and computes the report's figures.
pub fn measure(
    models: &Models,
    configs: &Configs,
    options: &Options,
    cores: &CoreSet,
    progress: &dyn Progress,
) -> Result<Measured, TimingError> {
    let first = models
        .original
        .inputs()
        .first()
        .and_then(|i| models.original.fact(i.out(0)))
        .ok_or(TimingError::NoInput)?;
    let x = Tensor::from_shape(&first.shape, &crate::npy::random_values(1, first.volume()))
        .map_err(|e| TimingError::Input { reason: e.to_string() })?;
    let load_thread = options.interference.map(Interference::start).transpose()?;
    let (runtimes, loaded, engines) = load(configs, cores, &options.engines)?;
    let mut keep: Vec<usize> = configs.ideal_pairs.iter().flat_map(|p| [p.0, p.1]).collect();
    keep.extend(configs.adaptive_row);
    let meter = engine::host::Meter::start();
    let (times, mut traces) = time_interleaved(
        &runtimes,
        &x,
        options.rounds,
        cores,
        load_thread.as_ref(),
        &keep,
        progress,
    )?;
    let steal = meter.and_then(|m| m.read());
    let mut adaptive_runs = configs
        .adaptive_row
        .map_or(Vec::new(), |a| std::mem::take(&mut traces[a]));
    let rows: Vec<Row> = configs
        .list
        .iter()
        .zip(times)
        .map(|(c, ms)| Row {
            name: c.name.clone(),
            ms,
        })
        .collect();
    host::pin_current_thread(cores).map_err(|e| TimingError::Pin { reason: e.to_string() })?;
    let trace = runtimes[configs.main].1.run_traced(vec![x.clone().into_tvalue()])?.1;
    if let Some(a) = configs.adaptive_row {
        let end = adaptive_runs
            .last()
            .map_or(0.0, |(t, tr)| t + tr.spans.iter().map(|s| s.end_s).fold(0.0, f64::max));
        let limit = 20.0 * configs.list[a].adaptive.as_ref().map_or(0.2, |p| p.probe_ms / 1e3);
        adaptive_runs.extend(recover(&runtimes[a].1, &x, end, limit)?);
    }
    if let Some(l) = load_thread {
        l.finish()?;
    }
    let compiled: Vec<usize> = runtimes.iter().map(|r| r.1.compiled_copies()).collect();
    let partitions: Vec<&crate::Partition> = runtimes.iter().map(|r| r.1.partition()).collect();
    let weights = Weights {
        original_bytes: weight_bytes(models.original),
        branched_bytes: weight_bytes(models.branched),
    };
    let figures = Figures {
        models,
        configs,
        rows: &rows,
        traces: &traces,
        weights: &weights,
    };
    let report = Report {
        schema: "stretch.bench/1",
        branched: models.branched_label.to_string(),
        original: models.original_label.to_string(),
        engines,
        cores: cores.to_string(),
        runs: options.rounds.runs,
        block: options.rounds.block,
        processors: configs.processors.iter().map(ProcessorConfig::spec).collect(),
        work: figures.work(),
        reference: configs.reference.as_ref().ok().map(ProcessorConfig::spec),
        reference_skipped: configs.reference.clone().err(),
        settle_after_spinning_ms: SETTLE_AFTER_SPINNING.as_secs_f64() * 1e3,
        interference: options.interference.map(str::to_string),
        configurations: figures.configurations(&loaded, &compiled),
        speedups: figures.speedups(),
        ideals: figures.ideals(&partitions),
        steal,
        adaptive: figures.adaptive(&adaptive_runs),
        weights,
        trace: String::new(),
        gantt: String::new(),
    };
    Ok(Measured {
        report,
        trace,
        adaptive_runs,
    })
}

/// What the report's figures are computed from.
struct Figures<'a> {
    models: &'a Models<'a>,
    configs: &'a Configs<'a>,
    rows: &'a [Row],
    traces: &'a [Vec<TimedTrace>],
    weights: &'a Weights,
}

impl Figures<'_> {
    fn work(&self) -> Work {
        let (b, o) = (
            self.models.branched.total_cost().macs,
            self.models.original.total_cost().macs,
        );
        Work {
            branched_macs: b,
            original_macs: o,
            ratio: b as f64 / o.max(1) as f64,
        }
    }

    fn configurations(&self, loaded: &[Option<u64>], compiled: &[usize]) -> Vec<Configuration> {
        let (w_orig, w_branched) = (self.weights.original_bytes, self.weights.branched_bytes);
        self.configs
            .list
            .iter()
            .zip(self.rows)
            .enumerate()
            .map(|(i, (c, r))| {
                let weights = if std::ptr::eq(c.graph, self.models.original) {
                    w_orig
                } else {
                    w_branched
                };
                Configuration {
                    name: r.name.clone(),
                    min_ms: r.quantile(0.0),
                    p50_ms: r.quantile(0.5),
                    p90_ms: r.quantile(0.9),
                    p99_ms: r.quantile(0.99),
                    loaded_bytes: loaded[i],
                    loaded_over_weights: loaded[i].map(|l| l as f64 / weights.max(1) as f64),
                    compiled_subgraph_copies: compiled[i],
                }
            })
            .collect()
    }

    fn speedups(&self) -> Vec<Speedup> {
        let main = &self.rows[self.configs.main];
        let (b, b_min) = (main.quantile(0.5), main.quantile(0.0));
        self.rows
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != self.configs.main && Some(*i) != self.configs.adaptive_row)
            .map(|(i, r)| Speedup {
                versus: r.name.clone(),
                reference: Some(i) == self.configs.ort_row,
                p50: r.quantile(0.5) / b,
                min: r.quantile(0.0) / b_min,
            })
            .collect()
    }

    fn adaptive(&self, runs: &[TimedTrace]) -> Option<Adaptive> {
        let a = self.configs.adaptive_row?;
        let (ad, fixed) = (&self.rows[a], &self.rows[self.configs.main]);
        let reference = self.configs.ort_row.map_or(&self.rows[1], |o| &self.rows[o]);
        let moves: Vec<String> = runs
            .iter()
            .flat_map(|(_, t)| t.moves.iter().map(|m| m.to_string()))
            .collect();
        Some(Adaptive {
            p50_ms: ad.quantile(0.5),
            p99_ms: ad.quantile(0.99),
            fixed_p50_ms: fixed.quantile(0.5),
            fixed_p99_ms: fixed.quantile(0.99),
            reference: reference.name.clone(),
            reference_p50_ms: reference.quantile(0.5),
            reference_p99_ms: reference.quantile(0.99),
            runs: runs.len(),
            moves: moves.len(),
            moves_off_slow: moves.iter().filter(|m| m.ends_with("(slow)")).count(),
            moves_back: moves.iter().filter(|m| m.ends_with("(back)")).count(),
            first_move: moves.first().cloned(),
        })
    }

    fn ideals(&self, partitions: &[&crate::Partition]) -> Vec<Ideal> {
        let rows = self.rows;
        self.configs
            .ideal_pairs
            .iter()
            .filter_map(|&(seq, on)| {
                let partition = partitions[on];
                let alone = ideal::medians(self.traces[seq].iter().map(|(_, t)| t));
                let beside = ideal::medians(self.traces[on].iter().map(|(_, t)| t));
                let ideal = ideal::ideal_ms(partition, &alone)?;
                let in_run = ideal::ideal_ms(partition, &beside)?;
                let runs_ideal = ideal::runs_ideal_ms(partition, self.traces[on].iter().map(|(_, t)| t))?;
                let p50 = rows[on].quantile(0.5);
                Some(Ideal {
                    configuration: rows[on].name.clone(),
                    sequential: rows[seq].name.clone(),
                    ideal_ms: ideal,
                    p50_ms: p50,
                    p50_over_ideal: p50 / ideal,
                    in_run_ideal_ms: in_run,
                    beside_over_alone: in_run / ideal,
                    runs_ideal_ms: runs_ideal,
                    spread_over_medians: runs_ideal / in_run,
                    p50_over_runs_ideal: p50 / runs_ideal,
                    subgraphs: partition
                        .subgraphs
                        .iter()
                        .map(|s| SubgraphTimes {
                            subgraph: s.name.clone(),
                            processor: s.processor.clone(),
                            sequential_ms: alone[&s.name],
                            in_run_ms: beside[&s.name],
                        })
                        .collect(),
                    reference_over_p50: self.configs.ort_row.map(|o| rows[o].quantile(0.5) / p50),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Row;

    /// `stretch bench`'s min/p50/p90/p99 are the one rule's, pinned on
    /// {15, 20, 35, 40, 50} ms: p50 35, p90 46, p99 49.6 (a rounded-index
    /// rule would read 50 for both).
    #[test]
    fn bench_rows_use_the_one_percentile_rule() {
        let r = Row {
            name: "x".into(),
            ms: vec![50.0, 15.0, 40.0, 20.0, 35.0],
        };
        assert_eq!(r.quantile(0.0), 15.0);
        assert!((r.quantile(0.5) - 35.0).abs() < 1e-9);
        assert!((r.quantile(0.9) - 46.0).abs() < 1e-9);
        assert!((r.quantile(0.99) - 49.6).abs() < 1e-9);
    }
}
