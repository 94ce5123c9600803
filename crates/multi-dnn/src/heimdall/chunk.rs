//! Heimdall's DNN partitioning (MobiCom '20 §5.3, Eq. 1): a model's
//! operators, in topological order, cut into consecutive chunks whose
//! estimated latency fits the time left between two renders, with as few
//! chunks as possible.
//!
//! A chunk may run over the budget by `margin` (the paper's relaxation,
//! 5 ms by default); an operator longer than `budget + margin` on its own
//! is a chunk by itself and is reported. The paper's greedy cut (grow a
//! chunk until the next operator would not fit) is kept beside an exact
//! dynamic program; [`chunk`] returns the exact one and says whether the
//! greedy cut needed more chunks.

use crate::core::workload::{NoBudget, render_budget_ms};
use std::ops::Range;
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum ChunkError {
    #[error(transparent)]
    NoBudget(#[from] NoBudget),
    #[error(
        "no chunk of model '{model}' fits between two frames on {processor}: even its shortest operator '{op}' takes {ms:.2} ms, over the budget {budget_ms:.2} ms + margin {margin_ms:.2} ms at {fps} fps"
    )]
    NothingFits {
        model: String,
        op: String,
        processor: String,
        ms: f64,
        budget_ms: f64,
        margin_ms: f64,
        fps: f64,
    },
    #[error("latency of operator {index} is {ms} ms: estimates must be finite and >= 0")]
    BadLatency { index: usize, ms: f64 },
}

/// The time a DNN may hold the render processor between two renders (ms).
pub fn budget_ms(fps: f64, render_ms: f64) -> Result<f64, ChunkError> {
    Ok(render_budget_ms(fps, render_ms)?)
}

/// Chunks of one model on one processor.
#[derive(Clone, Debug, PartialEq)]
pub struct Chunking {
    /// Consecutive operator ranges covering `0..n`.
    pub chunks: Vec<Range<usize>>,
    /// Operators longer than `budget + margin` on their own (each a chunk).
    pub oversized: Vec<usize>,
    /// Chunks the paper's greedy cut makes (equal to `chunks.len()` unless
    /// one of the two is wrong: a greedy cut is minimal for this problem).
    pub greedy_chunks: usize,
}

fn check(lat: &[f64]) -> Result<(), ChunkError> {
    match lat.iter().position(|x| !(x.is_finite() && *x >= 0.0)) {
        Some(index) => Err(ChunkError::BadLatency { index, ms: lat[index] }),
        None => Ok(()),
    }
}

/// The paper's cut: from the first operator, grow the chunk while the next
/// operator still fits in `limit`; an operator over `limit` alone is a
/// chunk of its own.
pub fn greedy(lat: &[f64], limit: f64) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut sum = 0.0;
    for (i, &l) in lat.iter().enumerate() {
        if i > start && sum + l > limit {
            out.push(start..i);
            start = i;
            sum = 0.0;
        }
        sum += l;
    }
    if start < lat.len() {
        out.push(start..lat.len());
    }
    out
}

/// The fewest consecutive chunks with every chunk of two or more operators
/// within `limit` (a single operator is always allowed): a dynamic program
/// over prefixes, O(n · chunk length). Among minimal cuts, the one whose
/// chunks end latest (front-loaded, as the greedy cut) is returned.
pub fn exact(lat: &[f64], limit: f64) -> Vec<Range<usize>> {
    let n = lat.len();
    // best[i]: fewest chunks covering lat[i..]; next[i]: end of its first chunk.
    let mut best = vec![usize::MAX; n + 1];
    let mut next = vec![n; n + 1];
    best[n] = 0;
    for i in (0..n).rev() {
        let mut sum = 0.0;
        for j in i + 1..=n {
            sum += lat[j - 1];
            if j > i + 1 && sum > limit {
                break;
            }
            if best[j] != usize::MAX && best[j] < best[i] {
                best[i] = best[j] + 1;
                next[i] = j;
            }
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        out.push(i..next[i]);
        i = next[i];
    }
    out
}

/// Chunks `lat` (one estimate per operator, ms) for `budget + margin`.
pub fn chunk(lat: &[f64], budget: f64, margin: f64) -> Result<Chunking, ChunkError> {
    check(lat)?;
    let limit = budget + margin;
    let chunks = exact(lat, limit);
    let greedy_chunks = greedy(lat, limit).len();
    let oversized = (0..lat.len()).filter(|i| lat[*i] > limit).collect();
    Ok(Chunking {
        chunks,
        oversized,
        greedy_chunks,
    })
}

/// Model-agnostic chunks of `k` operators (MACE's partial runs).
pub fn fixed_size(n: usize, k: usize) -> Vec<Range<usize>> {
    let k = k.max(1);
    (0..n).step_by(k).map(|s| s..(s + k).min(n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::rng::SplitMix64;
    use proptest::prelude::*;

    fn sums(lat: &[f64], c: &[Range<usize>]) -> Vec<f64> {
        c.iter().map(|r| lat[r.clone()].iter().sum()).collect()
    }

    fn covers(c: &[Range<usize>], n: usize) -> bool {
        c.first().is_none_or(|r| r.start == 0)
            && c.windows(2).all(|w| w[0].end == w[1].start)
            && c.last().map_or(n == 0, |r| r.end == n)
            && c.iter().all(|r| r.start < r.end)
    }

    /// Fewest chunks by trying every set of cut points (n ≤ 12).
    fn brute_force(lat: &[f64], limit: f64) -> usize {
        let n = lat.len();
        let mut best = usize::MAX;
        for mask in 0u32..(1 << (n - 1)) {
            let mut start = 0;
            let mut ok = true;
            let mut count = 0;
            for i in 1..=n {
                if i == n || mask & (1 << (i - 1)) != 0 {
                    let s: f64 = lat[start..i].iter().sum();
                    if i - start > 1 && s > limit {
                        ok = false;
                        break;
                    }
                    count += 1;
                    start = i;
                }
            }
            if ok {
                best = best.min(count);
            }
        }
        best
    }

    #[test]
    fn heimdalls_budget_at_30_fps_with_a_27_ms_render() {
        let b = budget_ms(30.0, 2.7).unwrap();
        assert!((b - 30.633).abs() < 1e-3, "{b}");
        assert!(matches!(budget_ms(30.0, 40.0), Err(ChunkError::NoBudget(_))));
        assert!(budget_ms(60.0, 16.0).is_ok());
    }

    #[test]
    fn every_chunk_fits_except_a_single_long_operator() {
        let b = budget_ms(30.0, 2.7).unwrap();
        let lat = [4.0, 9.0, 12.0, 8.0, 40.0, 3.0, 3.0, 20.0, 14.0, 1.0];
        let c = chunk(&lat, b, 5.0).unwrap();
        assert!(covers(&c.chunks, lat.len()), "{:?}", c.chunks);
        for (r, s) in c.chunks.iter().zip(sums(&lat, &c.chunks)) {
            assert!(s <= b + 5.0 || r.len() == 1, "{r:?} takes {s}");
        }
        assert_eq!(c.oversized, [4]);
        assert!(c.chunks.contains(&(4..5)));
        assert_eq!(c.chunks.len(), brute_force(&lat, b + 5.0));
    }

    #[test]
    fn greedy_and_exact_agree_on_a_mixed_sequence() {
        let lat = [6.0, 5.0, 6.0, 5.0, 11.0, 0.5, 30.0, 0.5];
        let (g, e) = (greedy(&lat, 11.0), exact(&lat, 11.0));
        assert!(covers(&g, lat.len()) && covers(&e, lat.len()));
        assert_eq!(e.len(), brute_force(&lat, 11.0));
        assert_eq!(g, e);
    }

    #[test]
    fn fixed_size_chunks_cover_the_model() {
        assert_eq!(fixed_size(12, 5), [0..5, 5..10, 10..12]);
        assert!(covers(&fixed_size(7, 1), 7));
    }

    #[test]
    fn bad_estimates_are_named() {
        let e = chunk(&[1.0, f64::NAN], 10.0, 0.0).unwrap_err();
        assert!(e.to_string().contains("operator 1"), "{e}");
    }

    proptest! {
        #[test]
        fn exact_is_minimal_and_valid(seed in 0u64..10_000, n in 1usize..12, limit in 2.0f64..40.0) {
            let mut rng = SplitMix64::new(seed);
            let lat: Vec<f64> = (0..n).map(|_| {
                let u = rng.next_f64();
                if u < 0.1 { 30.0 + 30.0 * u } else { 12.0 * u }
            }).collect();
            let c = chunk(&lat, limit, 0.0).unwrap();
            prop_assert!(covers(&c.chunks, n));
            for (r, s) in c.chunks.iter().zip(sums(&lat, &c.chunks)) {
                prop_assert!(s <= limit + 1e-9 || r.len() == 1);
            }
            prop_assert_eq!(c.chunks.len(), brute_force(&lat, limit));
            prop_assert_eq!(c.greedy_chunks, c.chunks.len());
        }
    }
}
