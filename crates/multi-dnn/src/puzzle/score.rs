//! The XRBench-derived score of Puzzle §6.2, per model group and scenario.
//!
//! A group request's makespan Θ is the time from the group's input (its
//! period tick) until its last member finished; the deadline is the
//! period Φ. RtScore(Θ) = 1 / (1 + e^{k(Θ − Φ)}) with k = 15 per ms; QoE
//! is the share of requests with Θ ≤ Φ; a group scores mean RtScore × QoE
//! and a scenario the mean over its groups.

/// XRBench's sensitivity k, per ms.
pub const K_PER_MS: f64 = 15.0;

/// Score at or above which a scenario counts as saturated (score 1).
pub const SATURATED: f64 = 1.0 - 1e-3;

pub fn rt_score(makespan_ms: f64, period_ms: f64) -> f64 {
    let x = K_PER_MS * (makespan_ms - period_ms);
    if x > 700.0 { 0.0 } else { 1.0 / (1.0 + x.exp()) }
}

/// Share of `makespans` within `period_ms` (0 for no requests).
pub fn qoe(makespans: &[f64], period_ms: f64) -> f64 {
    if makespans.is_empty() {
        return 0.0;
    }
    makespans.iter().filter(|m| **m <= period_ms).count() as f64 / makespans.len() as f64
}

/// A group's score: mean RtScore × QoE (0 for no requests).
pub fn group_score(makespans: &[f64], period_ms: f64) -> f64 {
    if makespans.is_empty() {
        return 0.0;
    }
    let rt = makespans.iter().map(|m| rt_score(*m, period_ms)).sum::<f64>() / makespans.len() as f64;
    rt * qoe(makespans, period_ms)
}

/// The scenario's score: the mean over groups of (makespans, period).
pub fn score(groups: &[(Vec<f64>, f64)]) -> f64 {
    if groups.is_empty() {
        return 0.0;
    }
    groups.iter().map(|(m, p)| group_score(m, *p)).sum::<f64>() / groups.len() as f64
}

/// The saturation multiplier α*: the smallest of `multipliers` (increasing)
/// whose score is at least [`SATURATED`]; `None` if none reaches it.
pub fn saturation(multipliers: &[f64], mut score_at: impl FnMut(f64) -> f64) -> Option<f64> {
    multipliers.iter().copied().find(|m| score_at(*m) >= SATURATED)
}

/// The largest period multiplier α* is looked for under: the sweep tries
/// up to `max / 0.05` coarse and 5 fine multipliers (one simulation each)
/// and the relaxed bound holds arrays proportional to `max`.
pub const MAX_MULTIPLIER: f64 = 20.0;

/// α* to 0.01 over 0.05..=`max`, swept coarse then fine: every 0.05 up to
/// the first that saturates, then every 0.01 in the step below it. Equal
/// to [`saturation`] over [`sweep`]`(max)` unless the score rises to
/// saturation and falls back within one coarse step.
pub fn saturation_coarse_fine(max: f64, mut score_at: impl FnMut(f64) -> f64) -> Option<f64> {
    let top = (max * 100.0).round() as usize;
    let coarse = (1..=top / 5)
        .map(|i| i * 5)
        .find(|c| score_at(*c as f64 / 100.0) >= SATURATED)?;
    let fine = ((coarse.saturating_sub(4)).max(5)..coarse).find(|f| score_at(*f as f64 / 100.0) >= SATURATED);
    Some(fine.unwrap_or(coarse) as f64 / 100.0)
}

/// The multipliers α* is looked for among: 0.05 to `max` in steps of 0.01.
pub fn sweep(max: f64) -> Vec<f64> {
    (5..=(max * 100.0).round() as usize).map(|i| i as f64 / 100.0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rt_score_is_one_half_at_the_deadline_and_falls_past_it() {
        assert_eq!(rt_score(33.0, 33.0), 0.5);
        assert!(rt_score(32.0, 33.0) > 0.999_999);
        assert!(rt_score(33.1, 33.0) < 0.19 && rt_score(33.1, 33.0) > 0.18);
        assert_eq!(rt_score(1e6, 1.0), 0.0);
    }

    #[test]
    fn qoe_counts_requests_within_the_period() {
        assert_eq!(qoe(&[1.0, 2.0, 3.0, 4.0], 3.0), 0.75);
        assert_eq!(qoe(&[], 3.0), 0.0);
    }

    #[test]
    fn the_score_averages_groups_of_rt_times_qoe() {
        let a = (vec![1.0, 1.0], 10.0);
        let b = (vec![1.0, 20.0], 10.0);
        let sb = (rt_score(1.0, 10.0) + rt_score(20.0, 10.0)) / 2.0 * 0.5;
        assert!((score(&[a.clone(), b]) - (group_score(&a.0, 10.0) + sb) / 2.0).abs() < 1e-12);
        assert!(group_score(&a.0, 10.0) > SATURATED);
    }

    #[test]
    fn saturation_is_the_first_multiplier_within_the_tolerance() {
        // makespan 10 ms at every multiplier; base period 10 ms: the score is
        // 0.5 at α = 1 and saturates once k(10 − 10α) < ln(1e-3/(1−1e-3)),
        // i.e. α ≥ 1 + ln(999)/150 ≈ 1.046.
        let at = |m: f64| score(&[(vec![10.0; 5], 10.0 * m)]);
        assert_eq!(saturation(&sweep(3.0), at), Some(1.05));
        assert_eq!(saturation(&sweep(1.0), at), None);
        assert_eq!(saturation_coarse_fine(3.0, at), Some(1.05));
        let at2 = |m: f64| score(&[(vec![10.0; 5], 10.0 * m - 0.3)]);
        assert_eq!(saturation_coarse_fine(3.0, at2), saturation(&sweep(3.0), at2));
        assert_eq!(saturation_coarse_fine(1.0, at), None);
        assert!((at(1.0) - 0.5).abs() < 1e-12);
    }
}
