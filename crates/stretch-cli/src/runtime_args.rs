//! Options shared by the commands that run models on the runtime.

use anyhow::{Context, Result};
use clap::Args;
use graph_ir::{Graph, keys};
use scheduler_rt::{AdaptiveParams, ProcessorConfig, Runtime, RuntimeConfig, WorkerKind};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct RuntimeArgs {
    /// A processor of the runtime:
    /// `NAME=KIND[:CORES][,threads=N][,alone_threads=M][,engine=E][,wait=W][,spin=S]`.
    /// KIND is `inline` (runs on the scheduling thread, the paper's CPU
    /// worker), `pool` (a thread started once, pinned to CORES, the paper's
    /// DSP-style worker) or `queue` (an asynchronous in-order queue served by
    /// its own thread, the paper's GPU-style worker); CORES is a cpulist such
    /// as `core1`, `0-1` or `0,2`; N is the engine's intra-op threads
    /// (default 1); M the intra-op threads of subgraphs that nothing else of
    /// a request runs beside (stem, head, merges, stages kept whole), whose
    /// extra threads may use the other processors' idle cores (default N;
    /// `alone_threads=2` on two single-core processors lets the core without
    /// a branch of its own help); E is `tract` (default) or `ort`
    /// (onnxruntime, loaded from $ORT_DYLIB_PATH or the .venv wheel); W is
    /// how the processor's thread waits for its next subgraph (a pool or
    /// queue worker) or for other workers' results (an inline processor)
    /// while a request is in flight: `block` (default: polls 0.1 ms, then
    /// blocks, paying a wake-up at the next hand-off) or `poll` (polls,
    /// yielding its core between checks, until the request ends; idle
    /// between requests either way); S is how onnxruntime's intra-op threads
    /// wait for work: `off` (default: they block), `run` (they spin while a
    /// run is in progress and stop when it returns) or `on` (onnxruntime's
    /// default: they go on spinning for tens of ms after a run, taking time
    /// from whatever else runs on their cores). Repeat per processor, e.g.
    /// `--processor cpu0=inline:core0 --processor cpu1=pool:core1`. Without
    /// it, the processors the model's annotations name are used, the first
    /// inline and the others as pool workers, unpinned; nodes without a
    /// processor annotation run on the first processor.
    #[arg(long = "processor", value_name = "SPEC")]
    pub processors: Vec<ProcessorConfig>,

    /// Runtime configuration (TOML): a `[[processor]]` table per processor
    /// with `name`, `kind` (inline|pool|queue), `cores`, `threads`,
    /// `alone_threads`, `engine` (tract|ort), `wait` (block|poll) and `spin`
    /// (off|run|on), in order, and an optional `[adaptive]` table; see
    /// configs/runtime/host.toml. --processor flags replace the
    /// processor of the same name or add one.
    #[arg(long = "runtime-config", value_name = "FILE.toml")]
    pub runtime_config: Option<PathBuf>,

    /// Adapt placement to outside load (paper §7.4): a subgraph whose runs
    /// take more than `margin` (1.5) × its usual latency `runs` (3) times in
    /// a row moves to the processor that would finish it first, and tries
    /// its home again every `probe_ms` (200) ms, staying once it is fast
    /// there. The parameters come from the configuration's [adaptive]
    /// table, whose presence also turns adaptation on.
    #[arg(long)]
    pub adaptive: bool,
}

impl RuntimeArgs {
    /// The runtime configuration file with the --processor flags applied,
    /// or `None` when no file is given.
    pub fn config(&self) -> Result<Option<RuntimeConfig>> {
        let Some(path) = &self.runtime_config else {
            return Ok(None);
        };
        let config = RuntimeConfig::load(path).context("cannot load the runtime configuration")?;
        Ok(Some(config.with_overrides(&self.processors)))
    }

    /// The adaptation parameters, when adaptation is on.
    pub fn adaptive(&self) -> Result<Option<AdaptiveParams>> {
        let configured = self.config()?.and_then(|c| c.adaptive);
        Ok(match configured {
            Some(p) => Some(p),
            None => self.adaptive.then(AdaptiveParams::default),
        })
    }

    /// Whether processors were configured (by file or flags) rather than
    /// derived from the model.
    pub fn is_configured(&self) -> bool {
        self.runtime_config.is_some() || !self.processors.is_empty()
    }

    /// The configured processors (file, then flags), or those the model's
    /// annotations name.
    pub fn processors(&self, g: &Graph) -> Result<Vec<ProcessorConfig>> {
        if let Some(c) = self.config()? {
            return Ok(c.processors);
        }
        Ok(self.flags_or_model(g))
    }

    fn flags_or_model(&self, g: &Graph) -> Vec<ProcessorConfig> {
        if !self.processors.is_empty() {
            return self.processors.clone();
        }
        let mut names: Vec<String> = Vec::new();
        for id in g.topo_order().unwrap_or_else(|_| g.node_ids()) {
            if let Some(p) = g.node(id).annotations.get(keys::PROCESSOR)
                && !names.contains(p)
            {
                names.push(p.clone());
            }
        }
        if names.is_empty() {
            names.push("cpu0".into());
        }
        names
            .iter()
            .enumerate()
            .map(|(i, n)| ProcessorConfig::new(n, if i == 0 { WorkerKind::Inline } else { WorkerKind::Pool }))
            .collect()
    }
}

/// Loads `g` on the runtime with `processors` (each with the engine its
/// configuration names), adapting placement with `adaptive` if given,
/// naming the model in errors.
pub fn load_adaptive(
    g: &Graph,
    processors: &[ProcessorConfig],
    adaptive: Option<AdaptiveParams>,
    label: &str,
) -> Result<Runtime> {
    let rt = Runtime::load(
        g,
        processors,
        scheduler_rt::factory(multi_dnn::splash::cloud::engines()),
    )
    .with_context(|| format!("cannot load {label} on the runtime"))?;
    Ok(match adaptive {
        Some(p) => rt
            .with_adaptation(p)
            .with_context(|| format!("cannot load {label} on every processor for adaptive placement"))?,
        None => rt,
    })
}
