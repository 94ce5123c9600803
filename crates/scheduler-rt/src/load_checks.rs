//! Checks a model and its processors pass before the runtime loads them.

use crate::config::ProcessorConfig;
use crate::error::RuntimeError;
use graph_ir::Graph;

/// Fails when a processor configured with a precision is given nodes the
/// model computes at another one (a model without
/// [`graph_ir::keys::PRECISIONS`] computes everything in fp32).
fn check_precisions(g: &Graph, processors: &[ProcessorConfig]) -> Result<(), RuntimeError> {
    let key = graph_ir::keys::PRECISIONS;
    let table = g.precisions();
    for p in processors {
        let Some(want) = p.precision else { continue };
        let (model, source_of) = match table.iter().find(|(name, _)| *name == p.name) {
            Some((_, v)) => (v.clone(), format!("metadata {key}")),
            None if table.is_empty() => ("fp32".to_string(), format!("no {key} metadata: a float model")),
            None => ("fp32".to_string(), format!("metadata {key} does not name it")),
        };
        if model != want.to_string() {
            return Err(RuntimeError::Precision {
                processor: p.name.clone(),
                configured: want.to_string(),
                model,
                source_of,
            });
        }
    }
    Ok(())
}

/// The checks before loading: some processor, no name twice, precisions
/// as the model computes them, and memory for the weights. Returns the
/// first processor (where unannotated nodes go).
pub(crate) fn preflight<'a>(g: &Graph, processors: &'a [ProcessorConfig]) -> Result<&'a ProcessorConfig, RuntimeError> {
    let first = processors.first().ok_or(RuntimeError::NoProcessors)?;
    for (i, p) in processors.iter().enumerate() {
        if processors[..i].iter().any(|q| q.name == p.name) {
            return Err(RuntimeError::DuplicateProcessor {
                processor: p.name.clone(),
            });
        }
    }
    check_precisions(g, processors)?;
    if let Some(available) = crate::memory::available_bytes() {
        crate::memory::check_fits(g, available)?;
    }
    Ok(first)
}
