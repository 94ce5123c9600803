//! Model-level mappings: whole models placed on processors without cuts,
//! the baselines Puzzle's search is measured against (§6).

use super::PuzzleError;
use super::chromosome::{Chromosome, LayerGraph};
use super::evaluate::Problem;
use super::nsga;

/// Every model whole on processor `p` (layers `p` cannot run go to one that can).
pub fn whole_on(layers: &[LayerGraph], p: usize, rank: Vec<usize>) -> Chromosome {
    mapped(layers, &vec![p; layers.len()], rank)
}

/// Model `m` whole on processor `assign[m]`, each layer that processor
/// cannot run on the first processor that can.
pub fn mapped(layers: &[LayerGraph], assign: &[usize], rank: Vec<usize>) -> Chromosome {
    let mut c = Chromosome::whole(layers, assign, rank);
    for (m, lg) in layers.iter().enumerate() {
        for (l, s) in lg.support.iter().enumerate() {
            if !s.contains(assign[m]) {
                c.mapping[m][l] = s.iter().next().unwrap_or(0) as u8;
            }
        }
    }
    c
}

/// Per model, per processor: its time alone there, whole (ms).
pub fn isolated_ms(problem: &mut Problem) -> Result<Vec<Vec<f64>>, PuzzleError> {
    let n = problem.names.len();
    let models = problem.layers.len();
    let mut out = vec![Vec::with_capacity(n); models];
    for p in 0..n {
        let b = problem.build(&whole_on(problem.layers, p, (0..models).collect()))?;
        for (m, rows) in b.truth.table.iter().enumerate() {
            out[m].push(
                b.pieces[m]
                    .iter()
                    .zip(rows)
                    .map(|(piece, row)| row[piece.processor].alone_ms)
                    .sum(),
            );
        }
    }
    Ok(out)
}

/// Resolves the periods of `problem`'s workload groups from each model's
/// fastest isolated time; returns those times (ms).
pub fn resolve_groups(problem: &mut Problem) -> Result<Vec<f64>, PuzzleError> {
    let iso = isolated_ms(problem)?;
    let fastest: Vec<f64> = iso
        .iter()
        .map(|r| r.iter().copied().fold(f64::INFINITY, f64::min))
        .collect();
    problem.workload.resolve_groups(&fastest)?;
    Ok(fastest)
}

/// Each model's rank when the shortest (by `fastest`, ms) go first; ties
/// by index.
pub fn shortest_first(fastest: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..fastest.len()).collect();
    order.sort_by(|a, b| fastest[*a].total_cmp(&fastest[*b]).then(a.cmp(b)));
    let mut rank = vec![0; fastest.len()];
    for (r, m) in order.into_iter().enumerate() {
        rank[m] = r;
    }
    rank
}

/// The best model-level mappings without cuts at the workload's periods:
/// every assignment of models to processors (or, past 4,096, coordinate
/// descent from each model's fastest processor), ranked by `rank`; the
/// non-dominated ones, at most 9 spread over the first objective, shortest
/// first objective first, each with its objectives.
pub fn best_mappings(problem: &mut Problem, rank: &[usize]) -> Result<Vec<(Chromosome, Vec<f64>)>, PuzzleError> {
    let (m, n) = (problem.layers.len(), problem.names.len());
    let mut tried: Vec<(Chromosome, Vec<f64>)> = Vec::new();
    let mut eval = |problem: &mut Problem, assign: &[usize]| -> Result<Vec<f64>, PuzzleError> {
        let c = mapped(problem.layers, assign, rank.to_vec());
        let o = problem.evaluate(&c)?.objectives();
        tried.push((c, o.clone()));
        Ok(o)
    };
    if (n as f64).powi(m as i32) <= 4096.0 {
        let mut assign = vec![0usize; m];
        'all: loop {
            eval(problem, &assign)?;
            for digit in assign.iter_mut() {
                *digit += 1;
                if *digit < n {
                    continue 'all;
                }
                *digit = 0;
            }
            break;
        }
    } else {
        let iso = isolated_ms(problem)?;
        let mut assign: Vec<usize> = (0..m)
            .map(|i| (0..n).min_by(|a, b| iso[i][*a].total_cmp(&iso[i][*b])).unwrap_or(0))
            .collect();
        let mut best = eval(problem, &assign)?;
        let mut improved = true;
        while improved {
            improved = false;
            for i in 0..m {
                for p in 0..n {
                    let old = assign[i];
                    assign[i] = p;
                    let o = eval(problem, &assign)?;
                    if o[0] < best[0] {
                        best = o;
                        improved = true;
                    } else {
                        assign[i] = old;
                    }
                }
            }
        }
    }
    let objs: Vec<Vec<f64>> = tried.iter().map(|t| t.1.clone()).collect();
    let mut front = nsga::fronts(&objs).into_iter().next().unwrap_or_default();
    front.sort_by(|a, b| objs[*a][0].total_cmp(&objs[*b][0]));
    front.dedup_by(|a, b| objs[*a] == objs[*b]);
    let keep: Vec<usize> = if front.len() <= 9 {
        front
    } else {
        (0..9).map(|k| front[k * (front.len() - 1) / 8]).collect()
    };
    Ok(keep.into_iter().map(|i| tried[i].clone()).collect())
}
