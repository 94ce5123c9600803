//! `stretch bench`: a branched model on its processors against the
//! original it was made from, every configuration timed interleaved on one
//! random input ([`crate::timing::interleave`]), and the figures of one
//! [`Report`]: latencies, speedups, the ideal each engine's branched run
//! could reach ([`ideal`]), the adaptive runtime under outside load, and
//! the memory each configuration's loading added.

pub mod ideal;
pub mod measure;
pub mod report;
mod text;

pub use measure::{Measured, measure};
pub use report::Report;

use crate::{AdaptiveParams, ProcessorConfig, WorkerKind};
use engine::host::CoreSet;
use engine::{EngineRegistry, Spin};
use graph_ir::Graph;

/// One configuration to time.
pub struct Config<'g> {
    pub name: String,
    pub graph: &'g Graph,
    pub processors: Vec<ProcessorConfig>,
    /// How errors name the model.
    pub label: &'g str,
    pub adaptive: Option<AdaptiveParams>,
}

/// The two models compared, with how errors and reports name them.
pub struct Models<'g> {
    pub branched: &'g Graph,
    pub branched_label: &'g str,
    pub original: &'g Graph,
    pub original_label: &'g str,
}

/// The configurations of one benchmark and the roles some of them play.
pub struct Configs<'g> {
    pub list: Vec<Config<'g>>,
    /// The branched model on its processors.
    pub main: usize,
    /// The onnxruntime reference, if measured.
    pub ort_row: Option<usize>,
    /// The adaptive runtime, if measured.
    pub adaptive_row: Option<usize>,
    /// Per engine: (sequential on one core, on its processors).
    pub ideal_pairs: Vec<(usize, usize)>,
    /// The reference's processor, or why there is none.
    pub reference: Result<ProcessorConfig, String>,
    /// The branched model's processors.
    pub processors: Vec<ProcessorConfig>,
}

/// Processor `name` pinned to the `core`-th of `cores` (modulo their
/// number), or to all of them when it has more than one thread.
pub fn pinned(name: &str, kind: WorkerKind, core: usize, threads: usize, cores: &CoreSet) -> ProcessorConfig {
    let ids = if threads > 1 {
        cores.ids().to_vec()
    } else {
        vec![cores.ids()[core % cores.len()]]
    };
    ProcessorConfig {
        cores: CoreSet::new(ids),
        threads,
        ..ProcessorConfig::new(name, kind)
    }
}

/// For each engine of this build that not every processor already uses
/// (onnxruntime only where its reference loads, `ort`): its name with
/// `one_core` on it, and `processors` on it.
fn other_engines(
    processors: &[ProcessorConfig],
    one_core: &[ProcessorConfig],
    ort: bool,
) -> Vec<(&'static str, Vec<ProcessorConfig>, Vec<ProcessorConfig>)> {
    let built: &[&'static str] = if engine::ORT_BUILT {
        &["tract", "ort"]
    } else {
        &["tract"]
    };
    let on = |name: &str, ps: &[ProcessorConfig]| -> Vec<ProcessorConfig> {
        ps.iter()
            .map(|p| ProcessorConfig {
                engine: name.to_string(),
                ..p.clone()
            })
            .collect()
    };
    built
        .iter()
        .filter(|&&name| !processors.iter().all(|p| p.engine == name) && (name != "ort" || ort))
        .map(|&name| (name, on(name, one_core), on(name, processors)))
        .collect()
}

/// The onnxruntime reference configuration, or why there is none.
fn ort_reference(cores: &CoreSet) -> Result<ProcessorConfig, String> {
    if !engine::ORT_BUILT {
        return Err("not built (stretch-cli feature `ort`)".into());
    }
    let mut p = pinned("cpu0", WorkerKind::Inline, 0, 2, cores);
    p.engine = "ort".into();
    p.spin = Spin::On;
    EngineRegistry::builtin()
        .make(&p.engine_config())
        .map(|_| p)
        .map_err(|e| e.to_string())
}

/// What `bench` times: (1) the original on one core, (2) with one intra-op
/// thread per core of `cores`, (3) in onnxruntime with 2 threads where
/// available, (4) the branched model with every processor inline on one
/// core, (5) on `processors`, (6) the same pair on each other engine, and
/// (7) with adaptive placement when `adaptive` is given.
pub fn configurations<'g>(
    models: &Models<'g>,
    processors: Vec<ProcessorConfig>,
    adaptive: Option<AdaptiveParams>,
    cores: &CoreSet,
) -> Configs<'g> {
    let (branched, blabel) = (models.branched, models.branched_label);
    let one_core: Vec<ProcessorConfig> = processors
        .iter()
        .map(|p| ProcessorConfig {
            engine: p.engine.clone(),
            ..pinned(&p.name, WorkerKind::Inline, 0, 1, cores)
        })
        .collect();
    let n = processors.len();
    let reference = ort_reference(cores);
    let (mut list, ort_row) = originals(models, cores, &reference);
    list.push(config(
        "branched, 1 core (sequential)".into(),
        branched,
        one_core.clone(),
        blabel,
    ));
    let main = list.len();
    list.push(config(
        format!("branched, {n} processors"),
        branched,
        processors.clone(),
        blabel,
    ));
    let mut ideal_pairs = vec![(main - 1, main)];
    let ort = reference.is_ok();
    for (name, one, all) in other_engines(&processors, &one_core, ort) {
        list.push(config(
            format!("branched, 1 core (sequential), {name}"),
            branched,
            one,
            blabel,
        ));
        list.push(config(
            format!("branched, {n} processors, {name}"),
            branched,
            all,
            blabel,
        ));
        ideal_pairs.push((list.len() - 2, list.len() - 1));
    }
    let adaptive_row = adaptive.map(|params| {
        list.push(Config {
            adaptive: Some(params),
            ..config(
                format!("branched, {n} processors, adaptive"),
                branched,
                processors.clone(),
                blabel,
            )
        });
        list.len() - 1
    });
    Configs {
        list,
        main,
        ort_row,
        adaptive_row,
        ideal_pairs,
        reference,
        processors,
    }
}

fn config<'g>(name: String, graph: &'g Graph, processors: Vec<ProcessorConfig>, label: &'g str) -> Config<'g> {
    Config {
        name,
        graph,
        processors,
        label,
        adaptive: None,
    }
}

/// The original model on one core, with one intra-op thread per core of
/// `cores` and, where there is one, on the onnxruntime `reference` (its
/// row returned beside).
fn originals<'g>(
    models: &Models<'g>,
    cores: &CoreSet,
    reference: &Result<ProcessorConfig, String>,
) -> (Vec<Config<'g>>, Option<usize>) {
    let (original, olabel) = (models.original, models.original_label);
    let mut list = vec![
        config(
            "original, 1 core".into(),
            original,
            vec![pinned("cpu0", WorkerKind::Inline, 0, 1, cores)],
            olabel,
        ),
        config(
            format!("original, {} intra-op threads", cores.len()),
            original,
            vec![pinned("cpu0", WorkerKind::Inline, 0, cores.len(), cores)],
            olabel,
        ),
    ];
    let ort_row = reference.as_ref().ok().map(|p| {
        list.push(config(
            "original, onnxruntime 2 threads".into(),
            original,
            vec![p.clone()],
            olabel,
        ));
        list.len() - 1
    });
    (list, ort_row)
}
