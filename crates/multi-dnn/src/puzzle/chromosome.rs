//! Puzzle's chromosome (§4.2) and its decoding into a static plan.
//!
//! Per model: one bit per edge between two layers (1 = cut) and one
//! preferred processor per layer; per workload: a priority rank per model.
//! Decoding:
//! 1. the layers joined by uncut edges form the pieces; an edge between
//!    layers whose operator support differs is always cut;
//! 2. pieces that reach each other both ways (a cut that is not convex)
//!    are merged, so pieces form a DAG; a merged piece whose layers no
//!    processor runs in common is split into maximal runs of equal support
//!    in topological order (runs of one cycle only ever feed later runs);
//! 3. a piece runs where the majority of its layers' preferences point,
//!    among the processors that run every layer of it; a tie goes to the
//!    tied processor preferred by the piece's earliest layer; a piece no
//!    layer votes for goes to its lowest-index processor.

use crate::ProcSet;
pub use crate::predicted::layers::LayerGraph;
use graph_ir::rng::SplitMix64;

use std::collections::HashMap;

/// A solution: partition, mapping and priority (Puzzle Fig. 6).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Chromosome {
    /// Per model, per edge of its [`LayerGraph`]: cut.
    pub cuts: Vec<Vec<bool>>,
    /// Per model, per layer: the preferred processor (a member of the layer's support).
    pub mapping: Vec<Vec<u8>>,
    /// Per model: its rank (0 runs first); a permutation of `0..models`.
    pub priority: Vec<usize>,
}

/// A piece of a model and where it runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Piece {
    /// Layer indices, increasing (topological).
    pub layers: Vec<usize>,
    pub processor: usize,
}

impl Chromosome {
    /// A random chromosome: each edge cut with probability `p_cut`, each
    /// layer preferring a random processor of its support, a random priority.
    pub fn random(models: &[LayerGraph], p_cut: f64, rng: &mut SplitMix64) -> Chromosome {
        let cuts = models
            .iter()
            .map(|m| m.edges.iter().map(|_| rng.next_f64() < p_cut).collect())
            .collect();
        let mapping = models
            .iter()
            .map(|m| m.support.iter().map(|s| random_member(*s, rng)).collect())
            .collect();
        let mut priority: Vec<usize> = (0..models.len()).collect();
        rng.shuffle(&mut priority);
        Chromosome {
            cuts,
            mapping,
            priority,
        }
    }

    /// Every model whole on processor `p[m]` (which must run all its layers).
    pub fn whole(models: &[LayerGraph], p: &[usize], priority: Vec<usize>) -> Chromosome {
        Chromosome {
            cuts: models.iter().map(|m| vec![false; m.edges.len()]).collect(),
            mapping: models.iter().zip(p).map(|(m, p)| vec![*p as u8; m.len()]).collect(),
            priority,
        }
    }

    /// The same plan with every cut between two pieces of one model that run
    /// on the same processor removed, until none is left: one subgraph
    /// instead of two (a dispatch less, and an engine can fuse across the
    /// former cut). Every layer of a piece prefers the piece's processor
    /// afterwards, so the vote cannot move a merged piece.
    pub fn merge_same_processor(&self, models: &[LayerGraph]) -> Chromosome {
        let mut c = self.clone();
        for (m, lg) in models.iter().enumerate() {
            for _ in 0..lg.len() {
                let pieces = decode_model(lg, &c.cuts[m], &c.mapping[m]);
                let mut owner = vec![0; lg.len()];
                for (i, p) in pieces.iter().enumerate() {
                    for l in &p.layers {
                        owner[*l] = i;
                    }
                }
                let mut changed = false;
                for (e, &(a, b)) in lg.edges.iter().enumerate() {
                    let (pa, pb) = (owner[a], owner[b]);
                    if c.cuts[m][e] && pa != pb && pieces[pa].processor == pieces[pb].processor {
                        c.cuts[m][e] = false;
                        changed = true;
                    }
                }
                if !changed {
                    break;
                }
                for p in &pieces {
                    for l in &p.layers {
                        if lg.support[*l].contains(p.processor) {
                            c.mapping[m][*l] = p.processor as u8;
                        }
                    }
                }
            }
        }
        c
    }

    /// The pieces of every model (see the module docs).
    pub fn decode(&self, models: &[LayerGraph]) -> Vec<Vec<Piece>> {
        models
            .iter()
            .enumerate()
            .map(|(m, lg)| decode_model(lg, &self.cuts[m], &self.mapping[m]))
            .collect()
    }
}

/// A uniformly drawn member of a non-empty set.
pub fn random_member(s: ProcSet, rng: &mut SplitMix64) -> u8 {
    let members: Vec<usize> = s.iter().collect();
    members[rng.below(members.len())] as u8
}

/// The pieces of one model, in a topological order of the pieces.
pub fn decode_model(lg: &LayerGraph, cuts: &[bool], mapping: &[u8]) -> Vec<Piece> {
    let n = lg.len();
    let mut uf: Vec<usize> = (0..n).collect();
    for (e, &(a, b)) in lg.edges.iter().enumerate() {
        if !cuts.get(e).copied().unwrap_or(true) && lg.support[a] == lg.support[b] {
            let (ra, rb) = (find(&mut uf, a), find(&mut uf, b));
            uf[ra.max(rb)] = ra.min(rb);
        }
    }
    let comp: Vec<usize> = (0..n).map(|i| find(&mut uf, i)).collect();
    let scc = strongly_connected(n, &comp, &lg.edges);
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut slot: HashMap<usize, usize> = HashMap::new();
    for (layer, s) in scc.iter().enumerate() {
        let k = *slot.entry(*s).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[k].push(layer);
    }
    let mut pieces = Vec::new();
    for layers in groups {
        let common = layers.iter().fold(ProcSet::ALL, |s, l| s.and(lg.support[*l]));
        if common.is_empty() {
            let mut run: Vec<usize> = Vec::new();
            for l in layers {
                if run.last().is_some_and(|r| lg.support[*r] != lg.support[l]) {
                    pieces.push(vote(lg, std::mem::take(&mut run), mapping));
                }
                run.push(l);
            }
            pieces.push(vote(lg, run, mapping));
        } else {
            pieces.push(vote(lg, layers, mapping));
        }
    }
    topological(pieces, &lg.edges, n)
}

fn find(uf: &mut [usize], mut i: usize) -> usize {
    while uf[i] != i {
        uf[i] = uf[uf[i]];
        i = uf[i];
    }
    i
}

/// Per layer, a label shared by layers whose components reach each other
/// both ways over `edges` (the components' strongly connected classes).
fn strongly_connected(n: usize, comp: &[usize], edges: &[(usize, usize)]) -> Vec<usize> {
    let mut succ: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut pred: HashMap<usize, Vec<usize>> = HashMap::new();
    for &(a, b) in edges {
        let (ca, cb) = (comp[a], comp[b]);
        if ca != cb {
            succ.entry(ca).or_default().push(cb);
            pred.entry(cb).or_default().push(ca);
        }
    }
    let reach = |from: usize, adj: &HashMap<usize, Vec<usize>>| {
        let mut seen = vec![false; n];
        let mut stack = vec![from];
        seen[from] = true;
        while let Some(c) = stack.pop() {
            for &d in adj.get(&c).map_or(&[][..], |v| v) {
                if !seen[d] {
                    seen[d] = true;
                    stack.push(d);
                }
            }
        }
        seen
    };
    let mut label: Vec<Option<usize>> = vec![None; n];
    let mut roots: Vec<usize> = comp.to_vec();
    roots.sort_unstable();
    roots.dedup();
    for &c in &roots {
        if label[c].is_some() {
            continue;
        }
        if !succ.contains_key(&c) || !pred.contains_key(&c) {
            label[c] = Some(c);
            continue;
        }
        let (fwd, bwd) = (reach(c, &succ), reach(c, &pred));
        for &d in &roots {
            if fwd[d] && bwd[d] {
                label[d] = Some(c);
            }
        }
    }
    comp.iter().map(|c| label[*c].unwrap_or(*c)).collect()
}

/// The piece of `layers` with its processor chosen by majority vote.
fn vote(lg: &LayerGraph, layers: Vec<usize>, mapping: &[u8]) -> Piece {
    let common = layers.iter().fold(ProcSet::ALL, |s, l| s.and(lg.support[*l]));
    let pref = |l: usize| mapping.get(l).map(|p| *p as usize).filter(|p| common.contains(*p));
    let mut votes: HashMap<usize, usize> = HashMap::new();
    for &l in &layers {
        if let Some(p) = pref(l) {
            *votes.entry(p).or_default() += 1;
        }
    }
    let best = votes.values().copied().max().unwrap_or(0);
    let processor = layers
        .iter()
        .filter_map(|l| pref(*l))
        .find(|p| votes[p] == best)
        .or_else(|| common.iter().next())
        .unwrap_or(0);
    Piece { layers, processor }
}

/// `pieces` (each non-empty, together covering layers `0..n` once) in a
/// topological order (Kahn; among ready pieces the one holding the lowest
/// layer first). Pieces on a cycle are left out, so a shorter result
/// means the pieces do not form a DAG.
pub fn topological(mut pieces: Vec<Piece>, edges: &[(usize, usize)], n: usize) -> Vec<Piece> {
    pieces.sort_by_key(|p| p.layers[0]);
    let mut owner = vec![0usize; n];
    for (i, p) in pieces.iter().enumerate() {
        for l in &p.layers {
            owner[*l] = i;
        }
    }
    let k = pieces.len();
    let mut indeg = vec![0usize; k];
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); k];
    for &(a, b) in edges {
        let (pa, pb) = (owner[a], owner[b]);
        if pa != pb && !succ[pa].contains(&pb) {
            succ[pa].push(pb);
            indeg[pb] += 1;
        }
    }
    let mut ready: std::collections::BTreeSet<usize> = (0..k).filter(|i| indeg[*i] == 0).collect();
    let mut order = Vec::with_capacity(k);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &j in &succ[i] {
            indeg[j] -= 1;
            if indeg[j] == 0 {
                ready.insert(j);
            }
        }
    }
    let mut slots: Vec<Option<Piece>> = pieces.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_rt::support::OpSupport;

    const C: u8 = 0;
    const N: u8 = 2;

    /// Puzzle Fig. 7 as its text describes it (the figure itself is not in
    /// the extracted paper): five layers with a skip from layer 1 to layer
    /// 3; edges [0] 0→1, [1] 1→2, [2] 1→3, [3] 2→3, [4] 3→4. Cutting [2]
    /// and [3] leaves two subgraphs; the first holds layers 0-2, whose
    /// layers prefer NPU, NPU, CPU, so it runs on the NPU.
    fn fig7() -> LayerGraph {
        use graph_ir::builder::Builder;
        use graph_ir::ops::UnaryOp;
        let mut b = Builder::new("fig7");
        let x = b.input("x", &[1, 4, 4, 4]).unwrap();
        let l0 = b.unary("l0", x, UnaryOp::Relu).unwrap();
        let l1 = b.unary("l1", l0, UnaryOp::Sigmoid).unwrap();
        let l2 = b.unary("l2", l1, UnaryOp::Tanh).unwrap();
        let l3 = b.add("l3", l1, l2).unwrap();
        let l4 = b.unary("l4", l3, UnaryOp::Relu).unwrap();
        let g = b.finish("y", l4).unwrap();
        let names: Vec<String> = ["C", "G", "N"].iter().map(|s| s.to_string()).collect();
        let lg = LayerGraph::new(&g, &names, &[OpSupport::All, OpSupport::All, OpSupport::All]).unwrap();
        assert_eq!(lg.edges, [(0, 1), (1, 2), (1, 3), (2, 3), (3, 4)]);
        lg
    }

    #[test]
    fn merging_same_processor_neighbours_keeps_only_cuts_between_processors() {
        let lg = fig7();
        let c = Chromosome {
            cuts: vec![vec![true; 5]],
            mapping: vec![vec![N, N, C, C, C]],
            priority: vec![0],
        };
        assert_eq!(c.decode(std::slice::from_ref(&lg))[0].len(), 5);
        let merged = c.merge_same_processor(std::slice::from_ref(&lg));
        assert_eq!(merged.cuts[0], [false, true, true, false, false]);
        assert_eq!(
            merged.decode(std::slice::from_ref(&lg))[0],
            [
                Piece {
                    layers: vec![0, 1],
                    processor: N as usize
                },
                Piece {
                    layers: vec![2, 3, 4],
                    processor: C as usize
                }
            ]
        );
        assert_eq!(merged.merge_same_processor(std::slice::from_ref(&lg)), merged);
    }

    #[test]
    fn cut_bits_and_majority_vote_reproduce_fig7() {
        let lg = fig7();
        let cuts = [false, false, true, true, false];
        let pieces = decode_model(&lg, &cuts, &[N, N, C, C, C]);
        assert_eq!(
            pieces,
            [
                Piece {
                    layers: vec![0, 1, 2],
                    processor: N as usize
                },
                Piece {
                    layers: vec![3, 4],
                    processor: C as usize
                }
            ]
        );
    }

    #[test]
    fn a_tie_goes_to_the_earliest_layers_choice_and_no_cut_gives_one_piece() {
        let lg = fig7();
        let pieces = decode_model(&lg, &[false; 5], &[C, N, N, C, 1]);
        assert_eq!(pieces.len(), 1);
        assert_eq!(pieces[0].processor, C as usize, "C and N tie at 2; layer 0 prefers C");
        let pieces = decode_model(&lg, &[false; 5], &[1, N, N, C, C]);
        assert_eq!(
            pieces[0].processor, N as usize,
            "C and N tie; layer 1 is the first to prefer one"
        );
    }

    #[test]
    fn a_non_convex_cut_is_merged_so_pieces_form_a_dag() {
        let lg = fig7();
        // Cutting only the skip [2] leaves everything connected; cutting [1]
        // and [3] isolates layer 2, which layer 1 feeds and layer 3 reads:
        // {0,1,3,4} would reach {2} and back, so both merge.
        let pieces = decode_model(&lg, &[false, true, false, true, false], &[C; 5]);
        assert_eq!(pieces.len(), 1, "{pieces:?}");
        assert_eq!(pieces[0].layers, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn support_boundaries_are_always_cut_and_votes_stay_within_support() {
        let mut lg = fig7();
        lg.support[3] = ProcSet::single(0);
        lg.support[4] = ProcSet::single(0);
        let pieces = decode_model(&lg, &[false; 5], &[N, N, N, N, N]);
        assert_eq!(pieces.len(), 2, "{pieces:?}");
        assert_eq!((pieces[0].processor, pieces[1].processor), (N as usize, 0));
        assert_eq!(pieces[0].layers, [0, 1, 2]);
    }

    #[test]
    fn a_cycle_of_different_support_is_split_into_ordered_runs() {
        let mut lg = fig7();
        lg.support = vec![ProcSet::single(0); 5];
        lg.support[2] = ProcSet::single(1);
        // Layer 2 runs only on processor 1, the others only on 0; 0,1,3,4
        // join through the skip and reach layer 2 and back: merged, no
        // common processor, split into runs in topological order.
        let pieces = decode_model(&lg, &[false; 5], &[C; 5]);
        let layers: Vec<Vec<usize>> = pieces.iter().map(|p| p.layers.clone()).collect();
        assert_eq!(layers, [vec![0, 1], vec![2], vec![3, 4]]);
        assert_eq!(pieces[1].processor, 1);
    }
}
