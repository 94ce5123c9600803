//! NSGA-II survivor selection (Deb et al. 2002): fast non-dominated
//! sorting, then crowding distance within the last front that fits.
//! All objectives are minimised.

/// `a` is no worse than `b` everywhere and better somewhere.
pub fn dominates(a: &[f64], b: &[f64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x <= y) && a.iter().zip(b).any(|(x, y)| x < y)
}

/// Indices of `objs` by non-domination rank: front 0 first, each front in
/// increasing index order.
pub fn fronts(objs: &[Vec<f64>]) -> Vec<Vec<usize>> {
    let n = objs.len();
    let mut dominated: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut count = vec![0usize; n];
    for i in 0..n {
        for j in 0..n {
            if i != j && dominates(&objs[i], &objs[j]) {
                dominated[i].push(j);
            } else if i != j && dominates(&objs[j], &objs[i]) {
                count[i] += 1;
            }
        }
    }
    let mut out = Vec::new();
    let mut current: Vec<usize> = (0..n).filter(|i| count[*i] == 0).collect();
    while !current.is_empty() {
        let mut next = Vec::new();
        for &i in &current {
            for &j in &dominated[i] {
                count[j] -= 1;
                if count[j] == 0 {
                    next.push(j);
                }
            }
        }
        next.sort_unstable();
        out.push(std::mem::replace(&mut current, next));
    }
    out
}

/// Crowding distance of each member of `front` (same order): the
/// normalised side lengths of the cuboid its neighbours span, summed over
/// objectives; the extremes of every objective get infinity.
pub fn crowding(objs: &[Vec<f64>], front: &[usize]) -> Vec<f64> {
    let k = front.len();
    let mut d = vec![0.0; k];
    let dims = front.first().map_or(0, |i| objs[*i].len());
    #[allow(clippy::needless_range_loop)]
    for m in 0..dims {
        let mut order: Vec<usize> = (0..k).collect();
        order.sort_by(|a, b| objs[front[*a]][m].total_cmp(&objs[front[*b]][m]).then(a.cmp(b)));
        let (lo, hi) = (objs[front[order[0]]][m], objs[front[order[k - 1]]][m]);
        d[order[0]] = f64::INFINITY;
        d[order[k - 1]] = f64::INFINITY;
        let span = hi - lo;
        if !(span.is_finite() && span > 0.0) {
            continue;
        }
        for w in 1..k.saturating_sub(1) {
            let gap = objs[front[order[w + 1]]][m] - objs[front[order[w - 1]]][m];
            d[order[w]] += gap / span;
        }
    }
    d
}

/// The `n` survivors of `objs`: whole fronts in rank order, then the most
/// crowding-distant members of the first front that does not fit (ties
/// by index).
pub fn select(objs: &[Vec<f64>], n: usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(n);
    for front in fronts(objs) {
        if out.len() + front.len() <= n {
            out.extend(front);
            continue;
        }
        let d = crowding(objs, &front);
        let mut order: Vec<usize> = (0..front.len()).collect();
        order.sort_by(|a, b| d[*b].total_cmp(&d[*a]).then(front[*a].cmp(&front[*b])));
        out.extend(order.into_iter().take(n - out.len()).map(|i| front[i]));
        break;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fronts_rank_by_domination() {
        let objs = vec![
            vec![1.0, 5.0],
            vec![2.0, 2.0],
            vec![5.0, 1.0],
            vec![3.0, 3.0],
            vec![6.0, 6.0],
        ];
        assert_eq!(fronts(&objs), [vec![0, 1, 2], vec![3], vec![4]]);
        assert!(dominates(&[1.0, 1.0], &[1.0, 2.0]) && !dominates(&[1.0, 2.0], &[1.0, 2.0]));
    }

    #[test]
    fn selection_keeps_extremes_of_the_split_front() {
        let objs = vec![
            vec![1.0, 9.0],
            vec![2.0, 7.9],
            vec![3.0, 7.0],
            vec![9.0, 1.0],
            vec![10.0, 10.0],
        ];
        let d = crowding(&objs, &[0, 1, 2, 3]);
        assert!(d[0].is_infinite() && d[3].is_infinite());
        assert!(d[2] > d[1], "{d:?}");
        assert_eq!(select(&objs, 3), [0, 3, 2]);
        assert_eq!(select(&objs, 5).len(), 5);
    }
}
