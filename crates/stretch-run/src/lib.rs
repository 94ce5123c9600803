//! The bundle runner's library: a bundle's processors as the runner
//! configures them, and the bundle loaded on the runtime with the engines
//! of a registry, so that a caller (a test, another binary) can add one.

use bundle::{Bundle, Manifest};
use engine::EngineRegistry;
use scheduler_rt::{ProcessorConfig, Runtime, RuntimeError, WorkerKind};
use thiserror::Error;

mod tflite;

/// An error configuring or loading a bundle for a run.
#[derive(Debug, Error)]
pub enum RunError {
    #[error("--processor {spec}: {error}")]
    Spec { spec: String, error: Box<RuntimeError> },
    #[error("--processor {spec}: the bundle has no processor `{name}` (it has {has})")]
    NoProcessor { spec: String, name: String, has: String },
    #[error("{0}")]
    Precision(String),
    #[error(transparent)]
    Runtime(Box<RuntimeError>),
    #[error(transparent)]
    Bundle(#[from] bundle::BundleError),
    /// `--format tflite` on a bundle without a `.tflite` file for a subgraph.
    #[error(
        "--format tflite: subgraph `{subgraph}` has no .tflite file in this bundle (export it with --format onnx,tflite)"
    )]
    NoTflite { subgraph: String },
    /// A `.tflite` boundary the manifest describes inconsistently.
    #[error("--format tflite: subgraph `{subgraph}`: {reason}")]
    TfliteBoundary { subgraph: String, reason: String },
}

impl From<RuntimeError> for RunError {
    fn from(error: RuntimeError) -> Self {
        RunError::Runtime(Box::new(error))
    }
}

/// The processors that run `m`: processor i of the manifest on core i
/// modulo the cores available (the first inline, the others pinned pool
/// workers) with engine `engine`, except those `specs` (`stretch run`'s
/// processor specs) set; each computes in the manifest's precision.
/// Engine names are checked against `engines`.
pub fn processors(
    m: &Manifest,
    engine: &str,
    specs: &[String],
    engines: &EngineRegistry,
) -> Result<Vec<ProcessorConfig>, RunError> {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let engine = engines.canonical(engine).map_err(RuntimeError::from)?;
    let mut given: Vec<ProcessorConfig> = Vec::new();
    for spec in specs {
        let c = ProcessorConfig::parse(spec, engines).map_err(|error| RunError::Spec {
            spec: spec.clone(),
            error: Box::new(error),
        })?;
        if !m.processors.iter().any(|p| p.name == c.name) {
            return Err(RunError::NoProcessor {
                spec: spec.clone(),
                name: c.name,
                has: m
                    .processors
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        given.push(c);
    }
    m.processors
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut c = match given.iter().find(|c| c.name == p.name) {
                Some(c) => c.clone(),
                None => {
                    let kind = if i == 0 { WorkerKind::Inline } else { WorkerKind::Pool };
                    let spec = format!("{}={}:{}", p.name, kind.as_str(), i % cores);
                    let mut c = ProcessorConfig::parse(&spec, engines)?;
                    c.engine = engine.to_string();
                    c
                }
            };
            c.precision = Some(p.precision.parse().map_err(RunError::Precision)?);
            Ok(c)
        })
        .collect()
}

/// `b` on the runtime as its manifest cuts it, each processor of
/// `configs` with its engine made from `engines`, from its ONNX files.
pub fn load(b: &Bundle, configs: &[ProcessorConfig], engines: EngineRegistry) -> Result<Runtime, RunError> {
    let loaded = b.stitch()?;
    let files = loaded.files.into_iter().map(Some).collect();
    Ok(Runtime::load_partitioned(
        &loaded.graph,
        loaded.partition,
        files,
        configs,
        scheduler_rt::factory(engines),
    )?)
}

/// `b` on the runtime as [`load`] runs it, from its `.tflite` files alone:
/// every processor of `configs` runs the tflite engine
/// ([`engine::tflite`]), which takes and returns values in the ONNX
/// files' form; the `.tflite` files joined ([`Bundle::stitch_tflite`])
/// give the partition and meeting points. Fails on a subgraph without a
/// `.tflite` file.
pub fn load_tflite(b: &Bundle, configs: &[ProcessorConfig], engines: EngineRegistry) -> Result<Runtime, RunError> {
    let files = tflite::envelopes(b)?.into_iter().map(Some).collect();
    let loaded = b.stitch_tflite()?;
    let configs = on_tflite(configs);
    Ok(Runtime::load_partitioned(
        &loaded.graph,
        loaded.partition,
        files,
        &configs,
        scheduler_rt::factory(engines.with(engine::tflite::TFLITE_ENTRY)),
    )?)
}

/// `configs` with every processor's engine the tflite engine, as
/// [`load_tflite`] runs them.
pub fn on_tflite(configs: &[ProcessorConfig]) -> Vec<ProcessorConfig> {
    configs
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c.engine = engine::tflite::TFLITE_ENTRY.name.to_string();
            c
        })
        .collect()
}
