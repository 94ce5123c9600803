//! The ideal saturation multiplier: a floor under the α* of every plan,
//! cut or not, on a relaxation of the analyzer's costs.
//!
//! The relaxation: each layer of a model costs, on a processor that runs
//! it, its share of the whole model's cost there (its own cost scaled so
//! the model's layers sum to the whole model's: cuts add no overhead and
//! lose no fusion); a layer's work may be split among processors in any
//! fractions; hand-offs are free; a request only has to respect its
//! model's layer order. Under it, a multiplier α is reachable only if
//!
//! - **work**: an evaluation simulates `P` ticks of the slowest group
//!   (`P` = [`Problem::periods`]): group g ticks at (u_g + k)·Φ_g, Φ_g = α
//!   × base_g, u_g its phase (the workload seed's draw), for every k with
//!   a tick before P·Φ_max. Every request must end by its tick plus Φ_g,
//!   so between the first tick and the last deadline some split must let
//!   every processor run all of them. By LP duality this fails exactly
//!   when some weights λ on the processors (summing to 1) give Σ over the
//!   requests' layers of min over processors of λ_p × cost above that
//!   window; every λ tried that does so proves α unreachable. Requests are
//!   counted low and the window wide where a tick falls within 1e-6 of the
//!   end. Apps outside the groups are left out (their requests may wait
//!   without changing the score);
//! - **latency**: every group member's longest layer path, each layer on
//!   its fastest processor, ends by the period less the margin within
//!   which a request's RtScore falls below 1 − G·(1 − [`SATURATED`]) (G
//!   groups: the scenario's score is their mean, so one group may give up
//!   what the others keep), below which the score cannot reach [`SATURATED`].
//!
//! The ideal is the smallest multiplier of the α* grid that passes both
//! checks: no plan the simulator can run has a smaller α* on these costs.

use super::PuzzleError;
use super::evaluate::Problem;
use super::score::{K_PER_MS, SATURATED, sweep};
use crate::core::arrivals::group_phase_fractions;
use crate::core::workload::Arrival;

/// One layer's relaxed cost per processor (ms; infinite where it cannot run).
type LayerCosts = Vec<f64>;

/// The smallest multiplier in 0.05..=`max` (step 0.01) that the relaxation
/// does not rule out; `None` where every one is ruled out or the costs
/// are not priced without running (measured costs: pricing every layer
/// alone would time each). Only groups' periods scale with the multiplier.
pub fn ideal_saturation(problem: &mut Problem, max: f64) -> Result<Option<f64>, PuzzleError> {
    if !problem.costs.prices_without_running() || problem.workload.groups.is_empty() {
        return Ok(None);
    }
    let n = problem.names.len();
    let bases: Vec<Option<f64>> = problem.workload.groups.iter().map(|g| g.base_ms).collect();
    let base_max = bases.iter().flatten().copied().fold(0.0, f64::max);
    if base_max <= 0.0 {
        return Ok(None);
    }
    let ticks = problem.periods as f64;
    let phases = group_phase_fractions(&problem.workload);
    let spare = bases.len() as f64 * (1.0 - SATURATED);
    let margin = if spare < 0.5 {
        -(1.0 / (1.0 - spare) - 1.0).ln() / K_PER_MS
    } else {
        0.0
    };
    let ahead: Vec<Option<f64>> = bases
        .iter()
        .zip(&phases)
        .map(|(base, u)| base.map(|b| ticks * base_max / b - u))
        .collect();
    let mut first = f64::INFINITY;
    let mut last = 0.0f64;
    for ((base, u), ahead) in bases.iter().zip(&phases).zip(&ahead) {
        if let (Some(base), Some(ahead)) = (base, ahead) {
            first = first.min(u * base);
            last = last.max((u + (ahead + 1e-6).ceil().max(0.0)) * base);
        }
    }
    let mut work = Vec::new();
    let mut need = Vec::new();
    for m in 0..problem.layers.len() {
        let Some(&Arrival::Group { group }) = problem.workload.apps.get(m).map(|a| &a.arrival) else {
            continue;
        };
        let (Some(base), Some(ahead)) = (bases[group], ahead[group]) else {
            continue;
        };
        let costs = relaxed_costs(problem, m, n)?;
        need.push((critical_path(&problem.layers[m].edges, &costs) + margin) / base);
        let requests = (ahead - 1e-6).ceil().max(0.0);
        work.extend(
            costs
                .into_iter()
                .map(|r| r.into_iter().map(|c| c * requests).collect::<Vec<_>>()),
        );
    }
    let window = last - first;
    let weights = simplex_grid(n, if n <= 3 { 200 } else { 20 });
    let least = most_work(&work, &weights);
    Ok(sweep(max)
        .into_iter()
        .find(|&alpha| need.iter().all(|x| *x <= alpha) && least <= alpha * window))
}

/// The most that any of `weights` proves some processor must run of
/// `work` (rows: a layer's cost per processor), whatever the split:
/// max over λ of Σ over rows of min over processors of λ_p × cost.
fn most_work(work: &[LayerCosts], weights: &[Vec<f64>]) -> f64 {
    weights
        .iter()
        .map(|lambda| {
            work.iter()
                .map(|row| {
                    row.iter()
                        .zip(lambda)
                        .filter(|(c, _)| c.is_finite())
                        .map(|(c, l)| l * c)
                        .fold(f64::INFINITY, f64::min)
                })
                .sum::<f64>()
        })
        .fold(0.0, f64::max)
}

/// Every weight vector on `n` processors with entries in steps of 1/`steps`.
fn simplex_grid(n: usize, steps: usize) -> Vec<Vec<f64>> {
    fn fill(left: usize, n: usize, steps: usize, prefix: &mut Vec<usize>, out: &mut Vec<Vec<f64>>) {
        if prefix.len() + 1 == n {
            prefix.push(left);
            out.push(prefix.iter().map(|k| *k as f64 / steps as f64).collect());
            prefix.pop();
            return;
        }
        for k in 0..=left {
            prefix.push(k);
            fill(left - k, n, steps, prefix, out);
            prefix.pop();
        }
    }
    let mut out = Vec::new();
    if n > 0 {
        fill(steps, n, steps, &mut Vec::new(), &mut out);
    }
    out
}

/// Model `m`'s layers, each priced alone on every processor that runs it
/// and scaled so the layers sum to the whole model's cost there; on a
/// processor that runs only some of them, scaled by the least factor of
/// the processors that run them all.
fn relaxed_costs(problem: &mut Problem, m: usize, n: usize) -> Result<Vec<LayerCosts>, PuzzleError> {
    let lg = &problem.layers[m];
    let count = lg.layers.len();
    let support = lg.support.clone();
    let mut columns = vec![vec![f64::INFINITY; count]; n];
    let mut factors = Vec::new();
    let mut partial = Vec::new();
    let all: Vec<usize> = (0..count).collect();
    for (p, column) in columns.iter_mut().enumerate() {
        if !support.iter().all(|s| s.contains(p)) {
            partial.push(p);
            continue;
        }
        let alone: Vec<f64> = (0..count)
            .map(|k| problem.costs.compute_ms(m, &[k], p))
            .collect::<Result<_, _>>()?;
        let whole = problem.costs.compute_ms(m, &all, p)?;
        let sum: f64 = alone.iter().sum();
        let factor = if sum > 0.0 { (whole / sum).min(1.0) } else { 1.0 };
        factors.push(factor);
        *column = alone.into_iter().map(|c| c * factor).collect();
    }
    let factor = factors.into_iter().fold(1.0, f64::min);
    for p in partial {
        for (k, s) in support.iter().enumerate() {
            if s.contains(p) {
                columns[p][k] = problem.costs.compute_ms(m, &[k], p)? * factor;
            }
        }
    }
    Ok((0..count).map(|k| columns.iter().map(|c| c[k]).collect()).collect())
}

/// The longest path through the layers, each at its least cost; `edges`
/// from producer to consumer, sorted ([`super::chromosome::LayerGraph::edges`]), so every
/// edge into a layer comes before the edges out of it.
fn critical_path(edges: &[(usize, usize)], costs: &[LayerCosts]) -> f64 {
    let least: Vec<f64> = costs
        .iter()
        .map(|r| r.iter().copied().fold(f64::INFINITY, f64::min))
        .collect();
    let mut start = vec![0.0f64; costs.len()];
    for &(from, to) in edges {
        start[to] = start[to].max(start[from] + least[from]);
    }
    start.iter().zip(&least).map(|(s, c)| s + c).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_covers_the_simplex() {
        let g = simplex_grid(3, 4);
        assert_eq!(g.len(), 15);
        assert!(g.iter().all(|l| (l.iter().sum::<f64>() - 1.0).abs() < 1e-12));
        assert_eq!(simplex_grid(1, 7), vec![vec![1.0]]);
    }

    #[test]
    fn two_equal_processors_carry_twice_one_and_no_more() {
        let weights = simplex_grid(2, 200);
        let work = vec![vec![2.0, 2.0]; 5];
        assert!((most_work(&work, &weights) - 5.0).abs() < 1e-12);
    }

    #[test]
    fn a_processor_that_cannot_run_a_layer_takes_none_of_it() {
        let weights = simplex_grid(2, 200);
        let work = vec![vec![1.0, f64::INFINITY], vec![1.0, 1.0]];
        assert!((most_work(&work, &weights) - 1.0).abs() < 1e-12);
        let lone = vec![vec![1.0, f64::INFINITY], vec![1.0, f64::INFINITY]];
        assert!((most_work(&lone, &weights) - 2.0).abs() < 1e-12);
        let uneven = vec![vec![1.0, 3.0]; 4];
        assert!((most_work(&uneven, &weights) - 3.0).abs() < 1e-12);
    }

    #[test]
    fn the_critical_path_takes_the_longer_branch() {
        let costs = vec![vec![1.0, 3.0], vec![5.0, 2.0], vec![1.0, 4.0], vec![1.0, 1.0]];
        let edges = [(0, 1), (0, 2), (1, 3), (2, 3)];
        assert_eq!(critical_path(&edges, &costs), 1.0 + 2.0 + 1.0);
    }
}
