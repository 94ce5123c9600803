//! What `stretch bench` measured, printed as text or as JSON
//! (`stretch.bench/1`); both come from the same [`Report`].

use engine::host::Steal;
use serde::Serialize;

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

/// A branched run against its ideal ([`super::ideal::ideal_ms`]).
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
