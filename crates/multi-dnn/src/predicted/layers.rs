//! A model as the cost model sees it: its layers (compute operators), the
//! edges between them and which processors run each.

use crate::ProcSet;
use crate::core::units::{UnitsError, operators};
use graph_ir::{Graph, NodeId};
use scheduler_rt::support::{OpSupport, op_key};
use std::collections::HashMap;

/// The layers (compute operators) of one model and the edges between them.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerGraph {
    /// Compute nodes in topological order.
    pub layers: Vec<NodeId>,
    /// (producer, consumer) layer indices, sorted; one per pair.
    pub edges: Vec<(usize, usize)>,
    /// Processors that run each layer (never empty).
    pub support: Vec<ProcSet>,
}

impl LayerGraph {
    /// The layers and edges of `g`, with each layer's support among `support`.
    pub fn new(g: &Graph, names: &[String], support: &[OpSupport]) -> Result<LayerGraph, UnitsError> {
        let layers = operators(g)?;
        let at: HashMap<NodeId, usize> = layers.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut edges = Vec::new();
        let mut sets = Vec::with_capacity(layers.len());
        for (i, id) in layers.iter().enumerate() {
            let key = op_key(g, *id);
            let set = ProcSet::from_iter((0..support.len()).filter(|p| support[*p].supports(key)));
            if set.is_empty() {
                return Err(UnitsError::Unsupported {
                    op: key.to_string(),
                    node: g.node(*id).name.clone(),
                    processors: names.join(", "),
                });
            }
            sets.push(set);
            for o in &g.node(*id).inputs {
                if let Some(p) = at.get(&o.node) {
                    edges.push((*p, i));
                }
            }
        }
        edges.sort_unstable();
        edges.dedup();
        Ok(LayerGraph {
            layers,
            edges,
            support: sets,
        })
    }

    pub fn len(&self) -> usize {
        self.layers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}
