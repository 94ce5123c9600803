//! A simulated device from a device profile: each model cut into units for
//! the profile's processors (and any beyond it), each candidate's latency
//! per processor predicted by the profile, the estimator registered as
//! `serve` registers it at start-up, and each model's isolated latency.
//! What `simulate` and `simulate --thermal` run on; [`costs`] and
//! [`layers`]: the cost model they price pieces with.

use crate::core::estimator::Estimator;
use crate::core::units::{Candidate, ModelUnits, analyze, operators};
use crate::core::workload::Workload;
use crate::predicted::costs::{Predicted, candidate_rows};
use crate::predicted::layers::LayerGraph;
use crate::sim::{Latency, Truth};
use crate::{OpSupport, ProcSet};
use graph_ir::Graph;
use predictor::profile::ProcessorKind;
use predictor::{DeviceModel, LatencyModel};
use thiserror::Error;

pub mod costs;
pub mod layers;

/// Why a piece, a hand-off or a model cannot be priced.
#[derive(Debug, Error)]
pub enum CostError {
    #[error("cannot cost model '{model}' on {processor}: {reason}")]
    Cost {
        model: String,
        processor: String,
        reason: String,
    },
    #[error(
        "cannot price a hand-off from {from} to {to}: {reason} (the profile's [[links]] must join every pair of processors a plan may cut between)"
    )]
    Link { from: String, to: String, reason: String },
    #[error("model '{model}': {reason}")]
    Model { model: String, reason: String },
    #[error("{step}: {reason}")]
    Measure { step: String, reason: String },
    #[error(transparent)]
    Timing(#[from] scheduler_rt::timing::TimingError),
}

/// Latencies per model, candidate and processor ([`Truth::table`]).
pub type LatencyTable = Vec<Vec<Vec<Latency>>>;

/// The profile's processors in its order, what each supports, and whether
/// each is an accelerator (not a CPU).
pub fn processors(model: &DeviceModel) -> (Vec<String>, Vec<OpSupport>, Vec<bool>) {
    let profile = model.profile();
    let names = profile.processors.keys().cloned().collect();
    let support = profile
        .processors
        .values()
        .map(|p| OpSupport::from_lists(p.supports.as_deref(), p.unsupported.as_deref()))
        .collect();
    let accel = profile
        .processors
        .values()
        .map(|p| p.kind != ProcessorKind::Cpu)
        .collect();
    (names, support, accel)
}

fn model_error(g: &Graph) -> impl Fn(crate::UnitsError) -> CostError + '_ {
    move |e| CostError::Model {
        model: g.name.clone(),
        reason: e.to_string(),
    }
}

/// Every app's units on processors `names` (the profile's own first, in
/// its order, then any others) and each candidate's latency per processor:
/// predicted by the profile (apps with `scale_like` take that app's
/// factors), then `extra(candidate)` for the processors beyond the profile's.
pub fn table(
    model: &DeviceModel,
    graphs: &[Graph],
    workload: &Workload,
    names: &[String],
    support: &[OpSupport],
    extra: &dyn Fn(&Candidate) -> Vec<Latency>,
) -> Result<(Vec<ModelUnits>, LatencyTable), CostError> {
    let n_dev = model.profile().processors.len();
    let mut layers = Vec::new();
    for g in graphs {
        layers.push(
            LayerGraph::new(g, &names[..n_dev], &support[..n_dev]).map_err(|e| CostError::Model {
                model: g.name.clone(),
                reason: e.to_string(),
            })?,
        );
    }
    let mut costs = Predicted::new(model, graphs, &layers)?;
    for (m, like) in workload
        .apps
        .iter()
        .enumerate()
        .filter_map(|(m, a)| Some((m, a.scale_like?)))
    {
        costs.scale_like(m, like);
    }
    let mut units = Vec::new();
    let mut table = Vec::new();
    for (m, g) in graphs.iter().enumerate() {
        let u = analyze(g, names, support).map_err(model_error(g))?;
        let mut rows = candidate_rows(&mut costs, m, &layers[m], &u, n_dev)?;
        for (row, c) in rows.iter_mut().zip(&u.candidates) {
            row.extend(extra(c));
        }
        table.push(rows);
        units.push(u);
    }
    Ok((units, table))
}

/// Registers each model's largest subgraph on each of the `n` processors
/// with its simulated latency alone (what `serve` measures at start-up).
pub fn register(base: &mut Estimator, units: &[ModelUnits], truth: &Truth, n: usize) {
    for (m, u) in units.iter().enumerate() {
        for w in 0..n {
            if let Some(c) = u.largest_on(w) {
                base.set_base(m, c, w, truth.table[m][c][w].alone_ms);
            }
        }
    }
}

/// Per model, its simulated isolated latency on its fastest of `n`
/// processors (the model alone, missing operators on the first processor
/// that has them).
pub fn fastest_isolated_ms(units: &[ModelUnits], truth: &Truth, n: usize) -> Vec<f64> {
    let isolated = |u: &ModelUnits, t: &[Vec<Latency>], w: usize| {
        u.isolated_plan(w, ProcSet::from_iter(0..n))
            .map_or(f64::INFINITY, |steps| {
                steps.iter().map(|(c, p)| t[*c][*p].alone_ms).sum()
            })
    };
    units
        .iter()
        .zip(&truth.table)
        .map(|(u, t)| (0..n).map(|w| isolated(u, t, w)).fold(f64::INFINITY, f64::min))
        .collect()
}

/// `op_ms[processor][op]` of `g` on processors `names`: predicted, scaled
/// to the profile's whole-model figure where it has one for that processor
/// (or, from another processor's figure, by the predicted ratio); and one
/// note per processor saying how the figures were made.
pub fn operator_ms(
    model: &DeviceModel,
    g: &Graph,
    names: &[String],
) -> Result<(Vec<Vec<f64>>, Vec<String>), CostError> {
    let ops = operators(g).map_err(model_error(g))?;
    let profile = model.profile();
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for n in names {
        let mut per = Vec::with_capacity(ops.len());
        for id in &ops {
            per.push(
                model
                    .predict(g, &[*id], n)
                    .map_err(|e| CostError::Model {
                        model: g.name.clone(),
                        reason: format!("cannot predict '{}' on {n}: {e}", g.node(*id).name),
                    })?
                    .total_ms,
            );
        }
        let predicted: f64 = per.iter().sum();
        if let Some(f) = profile.models.get(&g.name).and_then(|m| m.get(n)) {
            let k = f.value / predicted.max(1e-12);
            per.iter_mut().for_each(|x| *x *= k);
            notes.push(format!(
                "{} on {n}: {:.1} ms ({}; operators in the predictor's proportions)",
                g.name, f.value, f.source
            ));
        } else if let Some((other, f)) = profile
            .models
            .get(&g.name)
            .and_then(|m| m.iter().find(|(p, _)| *p != n).map(|(p, f)| (p.clone(), f.value)))
        {
            let there: f64 = ops
                .iter()
                .map(|id| model.predict(g, &[*id], &other).map(|p| p.total_ms).unwrap_or(0.0))
                .sum();
            let k = f / there.max(1e-12);
            per.iter_mut().for_each(|x| *x *= k);
            notes.push(format!(
                "{} on {n}: {:.1} ms (predicted: the {other} figure times the profile's predicted {n}/{other} ratio {:.2})",
                g.name,
                predicted * k,
                predicted / there.max(1e-12)
            ));
        } else {
            notes.push(format!(
                "{} on {n}: {predicted:.1} ms (predicted by the profile)",
                g.name
            ));
        }
        out.push(per);
    }
    Ok((out, notes))
}
