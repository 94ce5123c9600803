//! What a simulated device charges: each piece's compute time on its
//! processor and the hand-off of every value that crosses processors.

use crate::core::units::ModelUnits;
use crate::predicted::CostError;
use crate::predicted::layers::LayerGraph;
use crate::sim::Latency;
use graph_ir::{Graph, NodeId};
use predictor::{DeviceModel, LatencyModel};
use std::collections::HashMap;

/// A piece a plan is about to ask [`Costs::compute_ms`] for: layers
/// `layers` of model `model` on processor `processor`, whose requests come
/// every `period_ms` where they come periodically.
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    pub model: usize,
    pub layers: Vec<usize>,
    pub processor: usize,
    pub period_ms: Option<f64>,
}

/// Costs of pieces and transfers, in ms.
pub trait Costs {
    /// Layers `layers` (indices into model `model`'s [`LayerGraph`],
    /// increasing) run as one subgraph on processor `p`.
    fn compute_ms(&mut self, model: usize, layers: &[usize], p: usize) -> Result<f64, CostError>;
    /// Called with every piece of a plan before [`Costs::compute_ms`] is
    /// asked for them: costs that measure may time the ones they do not
    /// know yet together, as the plan would serve them. The default does
    /// nothing.
    fn prefetch(&mut self, _wanted: &[Wanted]) -> Result<(), CostError> {
        Ok(())
    }
    /// Handing `bytes` from processor `from` to processor `to`.
    fn comm_ms(&mut self, from: usize, to: usize, bytes: u64) -> Result<f64, CostError>;
    /// How the figures were made, one line per model and processor where it matters.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Factor on processor `p`'s times while another processor is busy
    /// (shared memory and caches); 1 = none.
    fn shared_factor(&self, _p: usize) -> f64 {
        1.0
    }
    /// The driver's cost around every subgraph (hand-off to a worker and
    /// back), in ms.
    fn dispatch_ms(&self) -> f64 {
        0.0
    }
    /// Processor `p`'s run-time spread: each run over the median at evenly
    /// spaced quantiles, alone and while another processor is busy
    /// ([`crate::sim::Latency::alone_shape`]); empty: every run
    /// takes its figure exactly.
    fn spread(&self, _p: usize) -> (Vec<f64>, Vec<f64>) {
        (Vec::new(), Vec::new())
    }
    /// How much processor `p`'s consecutive runs resemble each other: the
    /// lag-1 correlation of their times (slow phases of a machine span
    /// several runs); 0: each run draws its spread independently
    /// ([`crate::sim::Truth::spread_correlation`]).
    fn spread_correlation(&self, _p: usize) -> f64 {
        0.0
    }
    /// How late the driver wakes for a tick, at evenly spaced quantiles
    /// ([`crate::sim::Truth::arrival_lag_quantiles`]); empty: never.
    fn arrival_lag_ms(&self) -> Vec<f64> {
        Vec::new()
    }
    /// From now on times every piece again, each once until the next call,
    /// without changing what [`Costs::finish`] keeps: a plan chosen for its
    /// figures can then be judged on measurements it was not chosen on.
    /// `false` (and nothing changes) where the costs are not measured.
    fn retime(&mut self) -> bool {
        false
    }
    /// Whether [`Costs::compute_ms`] prices any piece without running it
    /// (a prediction), so that asking for every layer alone is cheap.
    fn prices_without_running(&self) -> bool {
        false
    }
    /// Keeps what was learned (a measurement database); the reason on failure.
    fn finish(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// Costs from a device profile's predictor, memoised per piece. Where the
/// profile carries a whole-model latency for a model (`[models.NAME]`,
/// NAME the graph's name) on a processor, every piece of that model there
/// is scaled by (that figure / the predicted whole model), so pieces keep
/// the predictor's proportions and sum to the measured total; a processor
/// without a figure takes the factor of the model's first processor that
/// has one.
pub struct Predicted<'a> {
    model: &'a DeviceModel,
    graphs: &'a [Graph],
    layers: &'a [LayerGraph],
    names: Vec<String>,
    scale: Vec<Vec<f64>>,
    cache: HashMap<(usize, usize, Vec<usize>), f64>,
    notes: Vec<String>,
}

impl<'a> Predicted<'a> {
    pub fn new(model: &'a DeviceModel, graphs: &'a [Graph], layers: &'a [LayerGraph]) -> Result<Self, CostError> {
        let names: Vec<String> = model.profile().processors.keys().cloned().collect();
        for (i, a) in names.iter().enumerate() {
            for b in &names[i + 1..] {
                model.comm_ms(a, b, 0).map_err(|e| link_error(a, b, e))?;
            }
        }
        let mut scale = Vec::with_capacity(graphs.len());
        let mut notes = Vec::new();
        for (g, lg) in graphs.iter().zip(layers) {
            let figures = model.profile().models.get(&g.name);
            let whole = |p: &str| predict(model, g, &lg.layers, p);
            let mut own: Vec<Option<f64>> = Vec::with_capacity(names.len());
            for n in &names {
                own.push(match figures.and_then(|f| f.get(n)) {
                    Some(f) => {
                        let k = f.value / whole(n)?.max(1e-12);
                        notes.push(format!("{} on {n}: {} ms ({})", g.name, f.value, f.source));
                        Some(k)
                    }
                    None => None,
                });
            }
            let fallback = own.iter().flatten().next().copied();
            let mut row = Vec::with_capacity(names.len());
            for (n, k) in names.iter().zip(&own) {
                row.push(match (k, fallback) {
                    (Some(k), _) => *k,
                    (None, Some(f)) => {
                        notes.push(format!(
                            "{} on {n}: {:.2} ms (predicted, scaled like its measured processors)",
                            g.name,
                            whole(n)? * f
                        ));
                        f
                    }
                    (None, None) => 1.0,
                });
            }
            scale.push(row);
        }
        Ok(Predicted {
            model,
            graphs,
            layers,
            names,
            scale,
            cache: HashMap::new(),
            notes,
        })
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Scales model `model`'s pieces by the factors of model `like` (a
    /// stand-in of the same architecture as `like`'s, whose whole-model
    /// latencies the profile has measured, where `model`'s are not).
    pub fn scale_like(&mut self, model: usize, like: usize) {
        self.scale[model] = self.scale[like].clone();
        self.cache.retain(|k, _| k.0 != model);
        for (n, k) in self.names.iter().zip(&self.scale[model]) {
            self.notes.push(format!(
                "{} on {n}: predictions x{k:.3}, the factor of {} (scale_like)",
                self.graphs[model].name, self.graphs[like].name
            ));
        }
    }
}

fn link_error(from: &str, to: &str, e: impl std::fmt::Display) -> CostError {
    CostError::Link {
        from: from.to_string(),
        to: to.to_string(),
        reason: e.to_string(),
    }
}

fn predict(model: &DeviceModel, g: &Graph, nodes: &[NodeId], p: &str) -> Result<f64, CostError> {
    model
        .predict(g, nodes, p)
        .map(|x| x.total_ms)
        .map_err(|e| CostError::Cost {
            model: g.name.clone(),
            processor: p.to_string(),
            reason: e.to_string(),
        })
}

impl Costs for Predicted<'_> {
    fn compute_ms(&mut self, model: usize, layers: &[usize], p: usize) -> Result<f64, CostError> {
        let key = (model, p, layers.to_vec());
        if let Some(ms) = self.cache.get(&key) {
            return Ok(*ms);
        }
        let lg = &self.layers[model];
        let nodes: Vec<NodeId> = layers.iter().map(|l| lg.layers[*l]).collect();
        let ms = predict(self.model, &self.graphs[model], &nodes, &self.names[p])? * self.scale[model][p];
        self.cache.insert(key, ms);
        Ok(ms)
    }

    fn comm_ms(&mut self, from: usize, to: usize, bytes: u64) -> Result<f64, CostError> {
        self.model
            .comm_ms(&self.names[from], &self.names[to], bytes)
            .map_err(|e| link_error(&self.names[from], &self.names[to], e))
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn prices_without_running(&self) -> bool {
        true
    }
}

/// Each candidate of `u` (model `m`, whose layers are `lg`) on each of
/// `n` processors: its cost where it can run (alone, and while another
/// processor is busy, spread as [`Costs::spread`]), infinite elsewhere.
pub fn candidate_rows(
    costs: &mut dyn Costs,
    m: usize,
    lg: &LayerGraph,
    u: &ModelUnits,
    n: usize,
) -> Result<Vec<Vec<Latency>>, CostError> {
    let at: HashMap<NodeId, usize> = lg.layers.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut rows = Vec::with_capacity(u.candidates.len());
    for c in &u.candidates {
        let mut ls: Vec<usize> = c.subgraph.nodes.iter().filter_map(|id| at.get(id).copied()).collect();
        ls.sort_unstable();
        let mut row = Vec::with_capacity(n);
        for p in 0..n {
            row.push(if c.support.contains(p) {
                let ms = costs.compute_ms(m, &ls, p)?;
                let (alone_shape, shared_shape) = costs.spread(p);
                Latency {
                    shared_ms: ms * costs.shared_factor(p),
                    alone_shape,
                    shared_shape,
                    ..Latency::exact(ms)
                }
            } else {
                Latency::exact(f64::INFINITY)
            });
        }
        rows.push(row);
    }
    Ok(rows)
}
