//! A static plan as JSON: per app of the workload, its model's pieces (by
//! node name) with their processors and the model's rank. `stretch
//! analyze` writes it; `serve --plan` and `simulate --plan` read it back
//! against a workload and a set of processors and refuse, naming what
//! differs, a plan made for others.

use crate::core::workload::Workload;
use crate::puzzle::PuzzleError;
use crate::puzzle::chromosome::{LayerGraph, Piece, topological};
use graph_ir::Graph;
use graph_ir::ops::Op;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

pub const FORMAT: &str = "stretch-puzzle-plan/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    pub format: String,
    pub processors: Vec<String>,
    pub apps: Vec<AppPlan>,
    /// Each model group's base period (ms) as analysed, in the workload's
    /// group order; `serve --plan` and `simulate --plan` run at these
    /// periods (times the period multiplier) instead of measuring them
    /// again. Empty in plans written before periods were recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupPlan>,
    /// Free-form figures of the search (objectives, score, α*), not read back.
    #[serde(default)]
    pub figures: serde_json::Value,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppPlan {
    pub app: String,
    /// The model graph's name.
    pub model: String,
    /// 0 runs first.
    pub rank: usize,
    /// The model's inputs as analysed (`name: dtype[dims]`); another input
    /// shape is refused. Empty in plans written before inputs were recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    pub pieces: Vec<PiecePlan>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupPlan {
    pub group: String,
    pub base_period_ms: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PiecePlan {
    pub processor: String,
    pub nodes: Vec<String>,
}

impl PlanFile {
    /// The plan of `pieces` and `rank` for apps `apps` (app `i` runs `graphs[i]`).
    pub fn new(
        processors: &[String],
        apps: &[String],
        graphs: &[Graph],
        layers: &[LayerGraph],
        pieces: &[Vec<Piece>],
        rank: &[usize],
    ) -> PlanFile {
        PlanFile {
            format: FORMAT.into(),
            processors: processors.to_vec(),
            apps: (0..apps.len())
                .map(|i| AppPlan {
                    app: apps[i].clone(),
                    model: graphs[i].name.clone(),
                    rank: rank[i],
                    inputs: input_facts(&graphs[i]),
                    pieces: pieces[i]
                        .iter()
                        .map(|p| PiecePlan {
                            processor: processors[p.processor].clone(),
                            nodes: p
                                .layers
                                .iter()
                                .map(|l| graphs[i].node(layers[i].layers[*l]).name.clone())
                                .collect(),
                        })
                        .collect(),
                })
                .collect(),
            groups: Vec::new(),
            figures: serde_json::Value::Null,
        }
    }

    /// Records the resolved groups' base periods of `workload`.
    pub fn with_groups(mut self, workload: &Workload) -> PlanFile {
        self.groups = workload
            .groups
            .iter()
            .filter_map(|g| {
                Some(GroupPlan {
                    group: g.name.clone(),
                    base_period_ms: g.base_ms?,
                })
            })
            .collect();
        self
    }

    /// The base periods of `workload`'s groups as analysed, in its group
    /// order; `None` for a plan that records none. A plan whose groups are
    /// not the workload's is refused.
    pub fn base_periods(&self, file: &str, workload: &Workload) -> Result<Option<Vec<f64>>, PuzzleError> {
        if self.groups.is_empty() {
            return Ok(None);
        }
        let planned: Vec<&str> = self.groups.iter().map(|g| g.group.as_str()).collect();
        let have: Vec<&str> = workload.groups.iter().map(|g| g.name.as_str()).collect();
        if planned != have {
            return Err(PuzzleError::Plan {
                file: file.to_string(),
                reason: format!("analysed for groups {planned:?}, the workload has {have:?}"),
            });
        }
        if let Some(g) = self
            .groups
            .iter()
            .find(|g| !(g.base_period_ms.is_finite() && g.base_period_ms > 0.0))
        {
            return Err(PuzzleError::Plan {
                file: file.to_string(),
                reason: format!(
                    "group '{}': base_period_ms {} is not positive",
                    g.group, g.base_period_ms
                ),
            });
        }
        Ok(Some(self.groups.iter().map(|g| g.base_period_ms).collect()))
    }

    pub fn load(path: &std::path::Path) -> Result<PlanFile, PuzzleError> {
        let file = path.display().to_string();
        let err = |reason: String| PuzzleError::Plan {
            file: file.clone(),
            reason,
        };
        let text = graph_ir::plain_file::read_plain_text(path, graph_ir::plain_file::MAX_CONFIG_BYTES)
            .map_err(|e| err(e.reason()))?;
        let plan: PlanFile = serde_json::from_str(&text).map_err(|e| err(format!("not a plan: {e}")))?;
        if plan.format != FORMAT {
            return Err(err(format!("format '{}', expected '{FORMAT}'", plan.format)));
        }
        Ok(plan)
    }

    /// The pieces (topologically ordered) and ranks of this plan for the
    /// given processors and apps, checked: same processors in the same
    /// order, same apps and models, every compute node of every model in
    /// exactly one piece, each piece on a processor that runs all its
    /// operators, pieces forming a DAG, ranks a permutation.
    pub fn resolve(
        &self,
        file: &str,
        processors: &[String],
        apps: &[String],
        graphs: &[Graph],
        layers: &[LayerGraph],
    ) -> Result<(Vec<Vec<Piece>>, Vec<usize>), PuzzleError> {
        let err = |reason: String| PuzzleError::Plan {
            file: file.to_string(),
            reason,
        };
        if self.processors != processors {
            return Err(err(format!(
                "made for processors {:?}, configured {:?}",
                self.processors, processors
            )));
        }
        let planned: Vec<&str> = self.apps.iter().map(|a| a.app.as_str()).collect();
        if planned != apps.iter().map(String::as_str).collect::<Vec<_>>() {
            return Err(err(format!("made for apps {planned:?}, the workload has {apps:?}")));
        }
        let mut ranks: Vec<usize> = self.apps.iter().map(|a| a.rank).collect();
        let rank = ranks.clone();
        ranks.sort_unstable();
        if ranks != (0..apps.len()).collect::<Vec<_>>() {
            return Err(err(format!(
                "ranks {rank:?} are not a permutation of 0..{}",
                apps.len()
            )));
        }
        let mut out = Vec::with_capacity(apps.len());
        for (i, a) in self.apps.iter().enumerate() {
            let (g, lg) = (&graphs[i], &layers[i]);
            let at = |reason: String| err(format!("app '{}': {reason}", a.app));
            if a.model != g.name {
                return Err(at(format!(
                    "planned for model '{}', the workload's is '{}'",
                    a.model, g.name
                )));
            }
            let inputs = input_facts(g);
            if !a.inputs.is_empty() && a.inputs != inputs {
                return Err(at(format!(
                    "analysed with inputs {:?}, the workload's model has {inputs:?} (another input shape has other costs: analyze again)",
                    a.inputs
                )));
            }
            let index: HashMap<&str, usize> = lg
                .layers
                .iter()
                .enumerate()
                .map(|(l, id)| (g.node(*id).name.as_str(), l))
                .collect();
            let mut seen = vec![false; lg.len()];
            let mut pieces = Vec::with_capacity(a.pieces.len());
            for (k, p) in a.pieces.iter().enumerate() {
                let proc = processors
                    .iter()
                    .position(|n| *n == p.processor)
                    .ok_or_else(|| at(format!("piece {k}: unknown processor '{}'", p.processor)))?;
                if p.nodes.is_empty() {
                    return Err(at(format!("piece {k} has no nodes")));
                }
                let mut ls = Vec::with_capacity(p.nodes.len());
                for n in &p.nodes {
                    let l = *index
                        .get(n.as_str())
                        .ok_or_else(|| at(format!("piece {k}: no compute node '{n}' in the model")))?;
                    if std::mem::replace(&mut seen[l], true) {
                        return Err(at(format!("node '{n}' is in two pieces")));
                    }
                    if !lg.support[l].contains(proc) {
                        return Err(at(format!("piece {k}: {} cannot run node '{n}'", p.processor)));
                    }
                    ls.push(l);
                }
                ls.sort_unstable();
                pieces.push(Piece {
                    layers: ls,
                    processor: proc,
                });
            }
            if let Some(l) = seen.iter().position(|s| !s) {
                return Err(at(format!("node '{}' is in no piece", g.node(lg.layers[l]).name)));
            }
            let count = pieces.len();
            let ordered = topological(pieces, &lg.edges, lg.len());
            if ordered.len() != count {
                return Err(at("its pieces depend on each other in a cycle".into()));
            }
            out.push(ordered);
        }
        Ok((out, rank))
    }
}

/// `name: fact` of each graph input, in declaration order.
fn input_facts(g: &Graph) -> Vec<String> {
    g.inputs()
        .iter()
        .map(|id| {
            let n = g.node(*id);
            match &n.op {
                Op::Input(f) => format!("{}: {f}", n.name),
                _ => n.name.clone(),
            }
        })
        .collect()
}
