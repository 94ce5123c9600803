//! Units and subgraph candidates of a model (Band §4.2), on a DAG.
//!
//! The model is first cut into regions: the processor-level subgraphs of
//! [`scheduler_rt::partition`] (one region for an unannotated model; stem,
//! branches and merges for a branched NN-Stretch model), so parallel
//! branches are separate regions that can run at the same time. Within a
//! region, nodes are taken in topological order and a unit is a maximal run
//! of adjacent nodes supported by exactly the same set of processors. A
//! candidate is every run of adjacent units of one region whose processors
//! have a non-empty intersection; a candidate never crosses a fork or join
//! between regions.

use crate::ProcSet;
use graph_ir::{Graph, NodeId, Outlet};
use scheduler_rt::partition::{Subgraph, partition, subgraph_of};
use scheduler_rt::support::{OpSupport, op_key};
use std::collections::HashMap;
use std::ops::Range;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum UnitsError {
    #[error("operator {op} (node '{node}') is supported by no configured processor ({processors})")]
    Unsupported {
        op: String,
        node: String,
        processors: String,
    },
    #[error("graph: {0}")]
    Graph(graph_ir::GraphError),
    #[error("the model has no operators")]
    Empty,
}

/// The cause is in this error's message, so it is not also its `source()`.
impl From<graph_ir::GraphError> for UnitsError {
    fn from(error: graph_ir::GraphError) -> Self {
        UnitsError::Graph(error)
    }
}

/// Adjacent operators with the same processor set.
#[derive(Clone, Debug, PartialEq)]
pub struct Unit {
    pub region: usize,
    /// Compute nodes in topological order.
    pub nodes: Vec<NodeId>,
    pub support: ProcSet,
}

/// A run of units that no fork or join cuts; see the module docs.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    /// Indices into [`ModelUnits::units`], contiguous.
    pub units: Range<usize>,
    /// Regions whose outputs this region reads.
    pub preds: Vec<usize>,
}

/// Units `first..=last` of one region, runnable on every processor of `support`.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub region: usize,
    pub first: usize,
    pub last: usize,
    pub support: ProcSet,
    /// Nodes, inputs and outputs, ready for [`scheduler_rt::extract`].
    pub subgraph: Subgraph,
    pub flops: u64,
    /// Bytes of the values the candidate reads and writes.
    pub io_bytes: u64,
    /// Of those, the bytes it reads and the bytes it writes.
    pub in_bytes: u64,
    pub out_bytes: u64,
}

impl Candidate {
    /// Units `first..=last` of region `region` computing `subgraph`, with
    /// its FLOPs and the bytes of the values it reads and writes.
    fn new(g: &Graph, region: usize, first: usize, last: usize, support: ProcSet, subgraph: Subgraph) -> Candidate {
        let flops = g.cost_of(&subgraph.nodes).flops;
        let bytes = |outlets: &[graph_ir::Outlet]| -> u64 {
            outlets
                .iter()
                .filter_map(|o| g.fact(*o))
                .map(|f| f.bytes() as u64)
                .sum()
        };
        let (in_bytes, out_bytes) = (bytes(&subgraph.inputs), bytes(&subgraph.outputs));
        Candidate {
            region,
            first,
            last,
            support,
            subgraph,
            flops,
            io_bytes: in_bytes + out_bytes,
            in_bytes,
            out_bytes,
        }
    }
}

/// The units, regions and candidates of one model.
#[derive(Clone, Debug)]
pub struct ModelUnits {
    pub units: Vec<Unit>,
    pub regions: Vec<Region>,
    pub candidates: Vec<Candidate>,
    /// Per region of `n` units, `n × n` candidate indices by (first, last)
    /// relative to the region's start, [`NO_CANDIDATE`] where there is none.
    index: Vec<Vec<u32>>,
}

/// An entry of [`ModelUnits::candidates_from`] where there is no candidate.
pub const NO_CANDIDATE: u32 = u32::MAX;

impl ModelUnits {
    /// The candidate covering units `first..=last`, if there is one.
    pub fn candidate(&self, first: usize, last: usize) -> Option<usize> {
        match *self.candidates_from(first).get(last.checked_sub(first)?)? {
            NO_CANDIDATE => None,
            c => Some(c as usize),
        }
    }

    /// The candidates starting at unit `first`: entry `d` covers units
    /// `first..=first + d` (to the region's end), [`NO_CANDIDATE`] where there is none.
    pub fn candidates_from(&self, first: usize) -> &[u32] {
        let Some(u) = self.units.get(first) else { return &[] };
        let units = &self.regions[u.region].units;
        let (n, f) = (units.len(), first - units.start);
        &self.index[u.region][f * n + f..(f + 1) * n]
    }

    /// The candidate with the most FLOPs that processor `p` can run (Band
    /// times it at registration), if there is one.
    pub fn largest_on(&self, p: usize) -> Option<usize> {
        (0..self.candidates.len())
            .filter(|c| self.candidates[*c].support.contains(p))
            .max_by_key(|c| self.candidates[*c].flops)
    }

    /// Candidates of the whole region `r`, if one exists.
    pub fn whole_region(&self, r: usize) -> Option<usize> {
        let u = &self.regions[r].units;
        self.candidate(u.start, u.end - 1)
    }

    /// TFLite's schedule on processor `p`: from unit `from` of region `r`,
    /// each longest run of units `p` supports as one candidate on `p`, each
    /// longest run it does not support on the lowest-index processor in
    /// `available` that supports that whole run (`None` if there is none).
    pub fn fixed_plan(&self, r: usize, from: usize, p: usize, available: ProcSet) -> Option<Vec<(usize, usize)>> {
        let end = self.regions[r].units.end;
        let mut steps = Vec::new();
        let mut i = from;
        while i < end {
            let on_p = available.contains(p) && self.units[i].support.contains(p);
            let runs_here = |j: usize| (available.contains(p) && self.units[j].support.contains(p)) == on_p;
            let shared = |j: usize| {
                self.candidate(i, j)
                    .is_some_and(|c| on_p || !self.candidates[c].support.and(available).is_empty())
            };
            let mut j = i;
            while j + 1 < end && runs_here(j + 1) && shared(j + 1) {
                j += 1;
            }
            let c = self.candidate(i, j)?;
            let w = if on_p {
                p
            } else {
                self.candidates[c].support.and(available).iter().next()?
            };
            steps.push((c, w));
            i = j + 1;
        }
        Some(steps)
    }

    /// [`ModelUnits::fixed_plan`] of every region from its start, in region
    /// order: the model run alone on `p` with fallbacks (`None` if some run
    /// has no processor in `available`).
    pub fn isolated_plan(&self, p: usize, available: ProcSet) -> Option<Vec<(usize, usize)>> {
        let mut steps = Vec::new();
        for (r, region) in self.regions.iter().enumerate() {
            steps.extend(self.fixed_plan(r, region.units.start, p, available)?);
        }
        Some(steps)
    }

    /// Processors that can run every unit of the model.
    pub fn whole_model_support(&self) -> ProcSet {
        self.units.iter().fold(ProcSet::ALL, |s, u| s.and(u.support))
    }
}

/// Units and candidates of `g` for processors with the given operator sets.
pub fn analyze(g: &Graph, names: &[String], support: &[OpSupport]) -> Result<ModelUnits, UnitsError> {
    let part = partition(g, "-")?;
    if part.subgraphs.is_empty() {
        return Err(UnitsError::Empty);
    }
    let mut producer: HashMap<Outlet, usize> = HashMap::new();
    let mut units: Vec<Unit> = Vec::new();
    let mut regions = Vec::new();
    for (r, sg) in part.subgraphs.iter().enumerate() {
        let mut preds: Vec<usize> = sg.inputs.iter().filter_map(|o| producer.get(o).copied()).collect();
        preds.sort_unstable();
        preds.dedup();
        let start = units.len();
        for &id in &sg.nodes {
            let key = op_key(g, id);
            let set = ProcSet::from_iter(
                support
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.supports(key))
                    .map(|(i, _)| i),
            );
            if set.is_empty() {
                return Err(UnitsError::Unsupported {
                    op: key.to_string(),
                    node: g.node(id).name.clone(),
                    processors: names.join(", "),
                });
            }
            let fresh = units.len() == start;
            match units.last_mut() {
                Some(u) if !fresh && u.support == set => u.nodes.push(id),
                _ => units.push(Unit {
                    region: r,
                    nodes: vec![id],
                    support: set,
                }),
            }
        }
        regions.push(Region {
            units: start..units.len(),
            preds,
        });
        for o in &sg.outputs {
            producer.insert(*o, r);
        }
    }
    let mut candidates = Vec::new();
    let mut index = Vec::with_capacity(regions.len());
    for (r, region) in regions.iter().enumerate() {
        let n = region.units.len();
        let mut dense = vec![NO_CANDIDATE; n * n];
        for first in region.units.clone() {
            let mut set = ProcSet::ALL;
            for last in first..region.units.end {
                set = set.and(units[last].support);
                if set.is_empty() {
                    break;
                }
                let nodes: Vec<NodeId> = units[first..=last]
                    .iter()
                    .flat_map(|u| u.nodes.iter().copied())
                    .collect();
                let subgraph = subgraph_of(g, format!("u{first}-{last}"), nodes);
                dense[(first - region.units.start) * n + (last - region.units.start)] = candidates.len() as u32;
                candidates.push(Candidate::new(g, r, first, last, set, subgraph));
            }
        }
        index.push(dense);
    }
    Ok(ModelUnits {
        units,
        regions,
        candidates,
        index,
    })
}

/// Units and candidates of a static plan (Puzzle): each piece (compute
/// nodes in topological order, pieces in a topological order of the
/// pieces) is one region holding one unit and one candidate, runnable on
/// exactly `support`; a region's predecessors are the pieces it reads.
pub fn from_pieces(g: &Graph, pieces: &[(Vec<NodeId>, ProcSet)]) -> Result<ModelUnits, UnitsError> {
    if pieces.is_empty() {
        return Err(UnitsError::Empty);
    }
    let mut owner: HashMap<NodeId, usize> = HashMap::new();
    let mut units = Vec::with_capacity(pieces.len());
    let mut regions = Vec::with_capacity(pieces.len());
    let mut candidates = Vec::with_capacity(pieces.len());
    for (r, (nodes, support)) in pieces.iter().enumerate() {
        let subgraph = subgraph_of(g, format!("p{r}"), nodes.clone());
        let mut preds: Vec<usize> = subgraph
            .inputs
            .iter()
            .filter_map(|o| owner.get(&o.node).copied())
            .collect();
        preds.sort_unstable();
        preds.dedup();
        for n in nodes {
            owner.insert(*n, r);
        }
        units.push(Unit {
            region: r,
            nodes: nodes.clone(),
            support: *support,
        });
        regions.push(Region { units: r..r + 1, preds });
        candidates.push(Candidate::new(g, r, r, r, *support, subgraph));
    }
    Ok(ModelUnits {
        units,
        regions,
        candidates,
        index: (0..pieces.len()).map(|r| vec![r as u32]).collect(),
    })
}

/// The compute operators of `g` in topological order: what
/// [`chunked`] cuts into chunks.
pub fn operators(g: &Graph) -> Result<Vec<NodeId>, UnitsError> {
    let ops = g.compute_order()?;
    if ops.is_empty() {
        return Err(UnitsError::Empty);
    }
    Ok(ops)
}

/// Units and candidates of `g` for Heimdall's chunks: one region over
/// [`operators`] (parallel branches of a branched model run one after the
/// other); `chunks[p]` cuts the operators into consecutive ranges for
/// processor `p` (empty: `p` runs nothing). Units are the pieces between
/// every processor's cut points; the candidates are exactly the chunks,
/// each supported by the processors that cut the same range.
pub fn chunked(g: &Graph, chunks: &[Vec<Range<usize>>]) -> Result<ModelUnits, UnitsError> {
    let ops = operators(g)?;
    let n = ops.len();
    let mut cuts: Vec<usize> = chunks.iter().flatten().flat_map(|r| [r.start, r.end]).collect();
    cuts.extend([0, n]);
    cuts.sort_unstable();
    cuts.dedup();
    cuts.retain(|c| *c <= n);
    let units: Vec<Unit> = cuts
        .windows(2)
        .map(|w| Unit {
            region: 0,
            nodes: ops[w[0]..w[1]].to_vec(),
            support: ProcSet::from_iter(
                (0..chunks.len()).filter(|p| chunks[*p].iter().any(|r| r.start <= w[0] && w[1] <= r.end)),
            ),
        })
        .collect();
    let unit_at = |op: usize| cuts.binary_search(&op).ok();
    let m = units.len();
    let mut dense = vec![NO_CANDIDATE; m * m];
    let mut candidates: Vec<Candidate> = Vec::new();
    for (p, ranges) in chunks.iter().enumerate() {
        for r in ranges {
            let (Some(first), Some(end)) = (unit_at(r.start), unit_at(r.end)) else {
                continue;
            };
            if end <= first || end > m {
                continue;
            }
            let slot = &mut dense[first * m + end - 1];
            if *slot != NO_CANDIDATE {
                let c = &mut candidates[*slot as usize];
                c.support = ProcSet(c.support.0 | ProcSet::single(p).0);
                continue;
            }
            let subgraph = subgraph_of(g, format!("c{}-{}", r.start, r.end - 1), ops[r.clone()].to_vec());
            *slot = candidates.len() as u32;
            candidates.push(Candidate::new(g, 0, first, end - 1, ProcSet::single(p), subgraph));
        }
    }
    Ok(ModelUnits {
        units,
        regions: vec![Region {
            units: 0..m,
            preds: Vec::new(),
        }],
        candidates,
        index: vec![dense],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::builder::Builder;
    use graph_ir::ops::UnaryOp;

    /// Band Fig. 9/10: ops 1-4; GPU runs {1,2}, NPU {1,2,3}, CPU all.
    #[test]
    fn band_toy_model_gives_the_papers_units_and_subgraphs() {
        let mut b = Builder::new("toy");
        let x = b.input("x", &[1, 4, 4, 4]).unwrap();
        let y = b.unary("op1", x, UnaryOp::Relu).unwrap();
        let y = b.unary("op2", y, UnaryOp::Sigmoid).unwrap();
        let y = b.unary("op3", y, UnaryOp::Tanh).unwrap();
        let y = b.unary("op4", y, UnaryOp::HardSwish).unwrap();
        let g = b.finish("y", y).unwrap();
        let names: Vec<String> = ["C", "G", "N"].iter().map(|s| s.to_string()).collect();
        let only = |ops: &[&str]| OpSupport::Only(ops.iter().map(|s| s.to_string()).collect());
        let support = [
            OpSupport::All,
            only(&["Relu", "Sigmoid"]),
            only(&["Relu", "Sigmoid", "Tanh"]),
        ];
        let m = analyze(&g, &names, &support).unwrap();
        let unit_ops: Vec<Vec<String>> = m
            .units
            .iter()
            .map(|u| u.nodes.iter().map(|n| g.node(*n).name.clone()).collect())
            .collect();
        assert_eq!(unit_ops, [vec!["op1", "op2"], vec!["op3"], vec!["op4"]]);
        let show = |c: &Candidate| {
            let ops: Vec<usize> = (c.first..=c.last)
                .flat_map(|u| m.units[u].nodes.clone())
                .map(|n| g.node(n).name[2..].parse::<usize>().unwrap())
                .collect();
            let procs: String = c.support.iter().map(|p| names[p].clone()).collect();
            (ops, procs)
        };
        let mut got: Vec<_> = m.candidates.iter().map(show).collect();
        got.sort();
        let mut want = vec![
            (vec![1, 2], "CGN".to_string()),
            (vec![3], "CN".into()),
            (vec![4], "C".into()),
            (vec![1, 2, 3], "CN".into()),
            (vec![3, 4], "C".into()),
            (vec![1, 2, 3, 4], "C".into()),
        ];
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn parallel_branches_are_separate_regions() {
        let g = scheduler_rt::testing::two_branch(8, 2).unwrap();
        let names = vec!["cpu0".to_string(), "cpu1".to_string()];
        let m = analyze(&g, &names, &[OpSupport::All, OpSupport::All]).unwrap();
        assert_eq!(m.regions.len(), 4, "{:?}", m.regions);
        assert!(m.regions[1].preds == [0] && m.regions[2].preds == [0]);
        assert_eq!(m.regions[3].preds, [1, 2]);
        for r in 0..4 {
            assert!(m.whole_region(r).is_some());
        }
        assert!(
            m.candidates
                .iter()
                .all(|c| m.units[c.first].region == m.units[c.last].region)
        );
    }

    #[test]
    fn an_operator_no_processor_runs_is_named() {
        let g = scheduler_rt::testing::two_branch(8, 1).unwrap();
        let names = vec!["npu".to_string()];
        let e = analyze(&g, &names, &[OpSupport::Only(["Conv".to_string()].into())]).unwrap_err();
        assert!(
            e.to_string().contains("is supported by no configured processor (npu)"),
            "{e}"
        );
    }
}
