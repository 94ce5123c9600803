//! Puzzle's genetic search (§4.3): an initial population of the given
//! seeds (whole-model mappings, so that survivor selection keeps the
//! baselines' objectives reachable) and random members; every
//! individual is a parent; one-point crossover on each model's partition
//! and mapping arrays, UPMX on the priority; mutation; local search
//! (merge two neighbouring pieces, or move a layer across a cut, kept
//! only when better on every objective); NSGA-II survivor selection over
//! parents and children. Stops when for `patience` generations neither
//! the population's mean score (at the workload's periods) nor its mean
//! first objective (the first group's mean makespan, which keeps falling
//! after every plan scores 1) has improved, or after `generations`.
//! Seeded: the same inputs give the same front.

use crate::puzzle::PuzzleError;
use crate::puzzle::chromosome::{Chromosome, LayerGraph, Piece, random_member};
use crate::puzzle::evaluate::{Outcome, Problem};
use crate::puzzle::nsga;
use graph_ir::rng::SplitMix64;
use std::collections::HashMap;

#[derive(Clone, Debug)]
pub struct GaOptions {
    pub population: usize,
    pub generations: usize,
    /// Generations without a better population mean score before stopping.
    pub patience: usize,
    /// Chance that a child gets a local-search step.
    pub local_search: f64,
    pub seed: u64,
}

impl Default for GaOptions {
    fn default() -> Self {
        GaOptions {
            population: 24,
            generations: 40,
            patience: 3,
            local_search: 0.3,
            seed: 0,
        }
    }
}

/// One evaluated solution.
#[derive(Clone, Debug)]
pub struct Individual {
    pub chromosome: Chromosome,
    pub outcome: Outcome,
    pub objectives: Vec<f64>,
}

/// What one generation ended with (for progress reports).
#[derive(Clone, Debug)]
pub struct Generation {
    pub index: usize,
    pub mean_score: f64,
    pub best_score: f64,
    /// The front's best mean makespan of the first group (ms).
    pub best_mean_ms: f64,
    pub front: usize,
    /// The population's mean of the first objective (ms).
    pub mean_first: f64,
    pub simulations: usize,
}

/// The search's end: the final population and its first front.
#[derive(Clone, Debug)]
pub struct SearchResult {
    pub population: Vec<Individual>,
    /// Indices into `population` of the first front, one plan per distinct
    /// objective vector (the one with the fewest pieces), by objectives.
    pub front: Vec<usize>,
    pub history: Vec<Generation>,
}

type PlanKey = (Vec<Vec<Piece>>, Vec<usize>);

struct Ga<'p, 'a> {
    problem: &'p mut Problem<'a>,
    cache: HashMap<PlanKey, Outcome>,
    rng: SplitMix64,
}

impl Ga<'_, '_> {
    fn eval(&mut self, c: Chromosome) -> Result<Individual, PuzzleError> {
        let key = (c.decode(self.problem.layers), c.priority.clone());
        let outcome = match self.cache.get(&key) {
            Some(o) => o.clone(),
            None => {
                let b = self.problem.build_pieces(key.0.clone(), key.1.clone())?;
                let w = self.problem.workload.clone();
                let o = self.problem.simulate(&b, &w)?;
                self.cache.insert(key, o.clone());
                o
            }
        };
        Ok(Individual {
            objectives: outcome.objectives(),
            outcome,
            chromosome: c,
        })
    }

    fn crossover(&mut self, a: &Chromosome, b: &Chromosome) -> (Chromosome, Chromosome) {
        let (mut x, mut y) = (a.clone(), b.clone());
        for m in 0..x.cuts.len() {
            one_point(&mut x.cuts[m], &mut y.cuts[m], &mut self.rng);
            one_point(&mut x.mapping[m], &mut y.mapping[m], &mut self.rng);
        }
        upmx(&mut x.priority, &mut y.priority, 0.5, &mut self.rng);
        (x, y)
    }

    /// Flips each cut bit with probability 1/edges and redraws each
    /// layer's preference with probability 1/layers; with probability 1/2
    /// moves one whole piece to another processor (a single layer's vote
    /// rarely changes a piece's majority); with probability 0.2 swaps two
    /// models' ranks.
    fn mutate(&mut self, c: &mut Chromosome) {
        let layers = self.problem.layers;
        for (m, lg) in layers.iter().enumerate() {
            let pe = 1.0 / lg.edges.len().max(1) as f64;
            for bit in &mut c.cuts[m] {
                if self.rng.next_f64() < pe {
                    *bit = !*bit;
                }
            }
            let pl = 1.0 / lg.len().max(1) as f64;
            for (l, gene) in c.mapping[m].iter_mut().enumerate() {
                if self.rng.next_f64() < pl {
                    *gene = random_member(lg.support[l], &mut self.rng);
                }
            }
        }
        if self.rng.next_f64() < 0.5 {
            let m = self.rng.below(layers.len());
            let pieces = c.decode(layers).swap_remove(m);
            let piece = &pieces[self.rng.below(pieces.len())];
            let common = piece
                .layers
                .iter()
                .fold(crate::ProcSet::ALL, |s, l| s.and(layers[m].support[*l]));
            let p = random_member(common, &mut self.rng);
            for l in &piece.layers {
                c.mapping[m][*l] = p;
            }
        }
        if c.priority.len() > 1 && self.rng.next_f64() < 0.2 {
            let (i, j) = (self.rng.below(c.priority.len()), self.rng.below(c.priority.len()));
            c.priority.swap(i, j);
        }
    }

    /// One local-search step on `ind`: the neighbour replaces it only if
    /// it dominates it.
    fn local(&mut self, ind: Individual) -> Result<Individual, PuzzleError> {
        let layers = self.problem.layers;
        let models: Vec<usize> = (0..layers.len()).filter(|m| !layers[*m].edges.is_empty()).collect();
        if models.is_empty() {
            return Ok(ind);
        }
        let m = models[self.rng.below(models.len())];
        let pieces = ind.chromosome.decode(layers).swap_remove(m);
        let mut c = ind.chromosome.clone();
        let changed = if self.rng.next_f64() < 0.5 {
            merge_neighbours(&layers[m], &pieces, &mut c, m, &mut self.rng)
        } else {
            move_layer(&layers[m], &pieces, &mut c, m, &mut self.rng)
        };
        if !changed {
            return Ok(ind);
        }
        let n = self.eval(c)?;
        Ok(if nsga::dominates(&n.objectives, &ind.objectives) {
            n
        } else {
            ind
        })
    }
}

fn one_point<T>(a: &mut [T], b: &mut [T], rng: &mut SplitMix64) {
    if a.len() > 1 && a.len() == b.len() {
        let at = 1 + rng.below(a.len() - 1);
        a[at..].swap_with_slice(&mut b[at..]);
    }
}

/// Uniform partially matched crossover (Cicirello & Smith 2000): at each
/// position, with probability `p`, the two values there are exchanged
/// within each parent, so both stay permutations.
pub fn upmx(a: &mut [usize], b: &mut [usize], p: f64, rng: &mut SplitMix64) {
    for i in 0..a.len().min(b.len()) {
        if rng.next_f64() >= p {
            continue;
        }
        let (x, y) = (a[i], b[i]);
        for perm in [&mut *a, &mut *b] {
            if let (Some(px), Some(py)) = (perm.iter().position(|v| *v == x), perm.iter().position(|v| *v == y)) {
                perm.swap(px, py);
            }
        }
    }
}

fn owner_of(pieces: &[Piece], n: usize) -> Vec<usize> {
    let mut owner = vec![0; n];
    for (i, p) in pieces.iter().enumerate() {
        for l in &p.layers {
            owner[*l] = i;
        }
    }
    owner
}

/// Joins two pieces an edge connects: uncuts every edge between them and
/// points the moved layers at the surviving piece's processor.
fn merge_neighbours(lg: &LayerGraph, pieces: &[Piece], c: &mut Chromosome, m: usize, rng: &mut SplitMix64) -> bool {
    let owner = owner_of(pieces, lg.len());
    let across: Vec<usize> = (0..lg.edges.len())
        .filter(|e| owner[lg.edges[*e].0] != owner[lg.edges[*e].1])
        .collect();
    if across.is_empty() {
        return false;
    }
    let (pa, pb) = {
        let (a, b) = lg.edges[across[rng.below(across.len())]];
        (owner[a], owner[b])
    };
    for &e in &across {
        let (a, b) = lg.edges[e];
        if (owner[a] == pa && owner[b] == pb) || (owner[a] == pb && owner[b] == pa) {
            c.cuts[m][e] = false;
        }
    }
    let keep = pieces[pa].processor as u8;
    for &l in &pieces[pb].layers {
        if lg.support[l].contains(keep as usize) {
            c.mapping[m][l] = keep;
        }
    }
    true
}

/// Moves the consumer layer of a random cut edge into the producer's piece
/// (or the producer into the consumer's, at random).
fn move_layer(lg: &LayerGraph, pieces: &[Piece], c: &mut Chromosome, m: usize, rng: &mut SplitMix64) -> bool {
    let owner = owner_of(pieces, lg.len());
    let across: Vec<(usize, usize)> = lg
        .edges
        .iter()
        .copied()
        .filter(|(a, b)| owner[*a] != owner[*b])
        .collect();
    if across.is_empty() {
        return false;
    }
    let (a, b) = across[rng.below(across.len())];
    let (layer, to) = if rng.next_f64() < 0.5 {
        (b, owner[a])
    } else {
        (a, owner[b])
    };
    let from = owner[layer];
    for (e, &(x, y)) in lg.edges.iter().enumerate() {
        if x != layer && y != layer {
            continue;
        }
        let other = if x == layer { y } else { x };
        if owner[other] == to {
            c.cuts[m][e] = false;
        } else if owner[other] == from {
            c.cuts[m][e] = true;
        }
    }
    let p = pieces[to].processor;
    if lg.support[layer].contains(p) {
        c.mapping[m][layer] = p as u8;
    }
    true
}

fn summary(index: usize, pop: &[Individual], simulations: usize) -> Generation {
    let scores: Vec<f64> = pop.iter().map(|i| i.outcome.score()).collect();
    let objs: Vec<Vec<f64>> = pop.iter().map(|i| i.objectives.clone()).collect();
    let front = nsga::fronts(&objs).into_iter().next().unwrap_or_default();
    Generation {
        index,
        mean_score: scores.iter().sum::<f64>() / scores.len().max(1) as f64,
        best_score: scores.iter().copied().fold(0.0, f64::max),
        best_mean_ms: front
            .iter()
            .map(|i| objs[*i].first().copied().unwrap_or(f64::INFINITY))
            .fold(f64::INFINITY, f64::min),
        front: front.len(),
        mean_first: objs.iter().map(|o| o.first().copied().unwrap_or(0.0)).sum::<f64>() / objs.len().max(1) as f64,
        simulations,
    }
}

/// Runs the search on `problem` from `seeds` (at most half the population)
/// and random members; `progress` hears of every generation (generation 0
/// is the initial population).
pub fn search(
    problem: &mut Problem,
    options: &GaOptions,
    seeds: &[Chromosome],
    mut progress: impl FnMut(&Generation),
) -> Result<SearchResult, PuzzleError> {
    let n = options.population.max(2);
    let mut ga = Ga {
        problem,
        cache: HashMap::new(),
        rng: SplitMix64::new(options.seed),
    };
    let mut pop = Vec::with_capacity(n);
    for c in seeds.iter().take(n / 2) {
        pop.push(ga.eval(c.clone())?);
    }
    for i in pop.len()..n {
        let p_cut = [0.0, 0.02, 0.1][i % 3];
        let c = Chromosome::random(ga.problem.layers, p_cut, &mut ga.rng);
        pop.push(ga.eval(c)?);
    }
    let mut history = vec![summary(0, &pop, ga.problem.simulations)];
    progress(&history[0]);
    let mut best_mean = history[0].mean_score;
    let mut best_first = history[0].mean_first;
    let mut stale = 0;
    for g in 1..=options.generations {
        let mut order: Vec<usize> = (0..pop.len()).collect();
        ga.rng.shuffle(&mut order);
        let mut children = Vec::with_capacity(n);
        for pair in order.chunks(2) {
            let a = &pop[pair[0]].chromosome;
            let b = &pop[pair[pair.len() - 1]].chromosome;
            let (mut x, mut y) = ga.crossover(a, b);
            ga.mutate(&mut x);
            ga.mutate(&mut y);
            for c in [x, y].into_iter().take(pair.len()) {
                let mut ind = ga.eval(c)?;
                if ga.rng.next_f64() < options.local_search {
                    ind = ga.local(ind)?;
                }
                children.push(ind);
            }
        }
        pop.extend(children);
        let objs: Vec<Vec<f64>> = pop.iter().map(|i| i.objectives.clone()).collect();
        let keep = nsga::select(&objs, n);
        let mut slots: Vec<Option<Individual>> = pop.into_iter().map(Some).collect();
        pop = keep.into_iter().filter_map(|i| slots[i].take()).collect();
        let s = summary(g, &pop, ga.problem.simulations);
        progress(&s);
        let improved = s.mean_score > best_mean + 1e-9 || s.mean_first < best_first * (1.0 - 1e-3);
        best_mean = best_mean.max(s.mean_score);
        best_first = best_first.min(s.mean_first);
        history.push(s);
        if improved {
            stale = 0;
        } else {
            stale += 1;
            if stale >= options.patience {
                break;
            }
        }
    }
    let objs: Vec<Vec<f64>> = pop.iter().map(|i| i.objectives.clone()).collect();
    let mut first = nsga::fronts(&objs).into_iter().next().unwrap_or_default();
    let pieces = |i: usize| -> usize { pop[i].chromosome.decode(ga.problem.layers).iter().map(Vec::len).sum() };
    first.sort_by_key(|i| (pieces(*i), *i));
    let mut front: Vec<usize> = Vec::new();
    for i in first {
        if !front.iter().any(|f| objs[*f] == objs[i]) {
            front.push(i);
        }
    }
    front.sort_by(|a, b| {
        objs[*a]
            .iter()
            .zip(&objs[*b])
            .map(|(x, y)| x.total_cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(a.cmp(b))
    });
    Ok(SearchResult {
        population: pop,
        front,
        history,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upmx_keeps_permutations() {
        let mut rng = SplitMix64::new(3);
        for _ in 0..100 {
            let mut a: Vec<usize> = (0..7).collect();
            let mut b: Vec<usize> = (0..7).collect();
            rng.shuffle(&mut a);
            rng.shuffle(&mut b);
            upmx(&mut a, &mut b, 0.5, &mut rng);
            for p in [&a, &b] {
                let mut s = p.clone();
                s.sort_unstable();
                assert_eq!(s, (0..7).collect::<Vec<_>>());
            }
        }
    }
}
