//! Adapting placement to outside load (paper §7.4, Fig. 13): a subgraph
//! whose processor turns slow moves to the processor that would finish it
//! first, and goes back once its home processor is fast again.

use crate::policy::{Clock, Decision, Estimates, Observation, PlacementPolicy, SubgraphInfo};

/// When the adaptive policy moves a subgraph away and back.
#[derive(Clone, Debug, PartialEq)]
pub struct AdaptiveParams {
    /// A run is slow when its latency exceeds `margin` × the estimate.
    pub margin: f64,
    /// Consecutive slow runs of a subgraph before it is moved.
    pub runs: usize,
    /// Milliseconds between probes of a moved subgraph's home processor.
    pub probe_ms: f64,
}

impl Default for AdaptiveParams {
    fn default() -> Self {
        AdaptiveParams {
            margin: 1.5,
            runs: 3,
            probe_ms: 200.0,
        }
    }
}

/// Weight of the newest observation in the policy's estimates.
const ALPHA: f64 = 0.3;

/// The longest wait between probes, in units of `probe_ms`.
pub const MAX_BACKOFF: f64 = 16.0;

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Home,
    /// Moved off its home; the home was last tried at `probed_ms` and is
    /// tried again `wait_ms` later.
    Away {
        probed_ms: f64,
        wait_ms: f64,
    },
    /// Trying its home again; goes back to `away` if the home is still
    /// slow, waiting `wait_ms` before the next try.
    Probing {
        away: usize,
        wait_ms: f64,
    },
}

struct Entry {
    info: SubgraphInfo,
    current: usize,
    state: State,
    streak: usize,
    /// Per processor: moving average of the runs that were not slow (the
    /// estimate a slow run is judged against).
    normal: Vec<Option<f64>>,
    /// Per processor: moving average of every run, slow ones included.
    recent: Vec<Option<f64>>,
}

/// The policy of paper §7.4: a subgraph whose runs on its processor take
/// more than `margin` × that processor's estimate for it, `runs` times in a
/// row, moves to the processor where it would finish first: that
/// processor's estimate for it (measured there, else the estimate the
/// caller gives, else its normal latency where it is, i.e. processors
/// assumed equally fast, either scaled by how much slower than normal that
/// processor last ran the subgraphs measured on it) plus the work of the same level
/// already placed there; that estimate becomes its normal latency there until measured,
/// so a destination slower than predicted is left again the same way. A
/// moved subgraph tries its home again `probe_ms` later; it stays home if
/// that run is within `margin` × its home estimate or no slower than it
/// recently ran where it went, else it moves
/// back where it was and waits twice as long before the next try (at most
/// [`MAX_BACKOFF`] × `probe_ms`), so a lasting load costs few slow probes.
pub struct AdaptivePolicy {
    params: AdaptiveParams,
    entries: Vec<Entry>,
}

fn ema(cell: &mut Option<f64>, ms: f64) {
    *cell = Some(cell.map_or(ms, |m| m + ALPHA * (ms - m)));
}

impl AdaptivePolicy {
    /// A policy for subgraphs `infos` (partition order) on `processors` processors.
    pub fn new(params: AdaptiveParams, infos: &[SubgraphInfo], processors: usize) -> AdaptivePolicy {
        let entries = infos
            .iter()
            .map(|info| Entry {
                info: *info,
                current: info.home,
                state: State::Home,
                streak: 0,
                normal: vec![None; processors],
                recent: vec![None; processors],
            })
            .collect();
        AdaptivePolicy { params, entries }
    }

    /// How much slower than normal processor `p` ran the subgraphs last
    /// measured on it (≥ 1; 1 when none was).
    fn load_factor(&self, p: usize) -> f64 {
        let ratios: Vec<f64> = self
            .entries
            .iter()
            .filter_map(|e| Some(e.recent[p]? / e.normal[p]?))
            .collect();
        if ratios.is_empty() {
            return 1.0;
        }
        (ratios.iter().sum::<f64>() / ratios.len() as f64).max(1.0)
    }

    /// Expected ms of subgraph `s` on processor `p` now: measured there,
    /// else the caller's estimate or its normal latency where it is, times
    /// `p`'s load factor.
    fn expected(&self, s: usize, p: usize, estimates: &dyn Estimates) -> Option<f64> {
        let e = &self.entries[s];
        e.recent[p].or(e.normal[p]).or_else(|| {
            let base = estimates.estimate_ms(s, p).or(e.normal[e.current])?;
            Some(base * self.load_factor(p))
        })
    }

    /// When processor `p` would finish subgraph `s` if it ran all of `s`'s
    /// level placed on it, `s` included.
    fn finish(&self, s: usize, p: usize, estimates: &dyn Estimates) -> f64 {
        let level = self.entries[s].info.level;
        let others: f64 = (0..self.entries.len())
            .filter(|&t| t != s && self.entries[t].info.level == level && self.entries[t].current == p)
            .map(|t| self.expected(t, p, estimates).unwrap_or(0.0))
            .sum();
        others + self.expected(s, p, estimates).unwrap_or(f64::INFINITY)
    }

    fn judge(&mut self, o: &Observation, estimates: &dyn Estimates, now: f64) -> Option<Decision> {
        let margin = self.params.margin;
        let e = &mut self.entries[o.subgraph];
        ema(&mut e.recent[o.processor], o.ms);
        if o.processor != e.current {
            return None;
        }
        if let State::Probing { away, wait_ms } = e.state {
            let home = e.info.home;
            let fast = e.normal[home].is_none_or(|n| o.ms <= margin * n) || e.recent[away].is_some_and(|r| o.ms <= r);
            if fast {
                ema(&mut e.normal[home], o.ms);
                e.recent[home] = Some(o.ms);
                e.state = State::Home;
                e.streak = 0;
                return Some(Decision {
                    subgraph: o.subgraph,
                    from: away,
                    to: home,
                    reason: "back",
                });
            }
            e.current = away;
            e.state = State::Away {
                probed_ms: now,
                wait_ms: (2.0 * wait_ms).min(MAX_BACKOFF * self.params.probe_ms),
            };
            return Some(Decision {
                subgraph: o.subgraph,
                from: home,
                to: away,
                reason: "still slow",
            });
        }
        let slow = e.normal[o.processor].is_some_and(|n| o.ms > margin * n);
        if !slow {
            ema(&mut e.normal[o.processor], o.ms);
            e.streak = 0;
            return None;
        }
        e.streak += 1;
        if e.streak < self.params.runs {
            return None;
        }
        let from = o.processor;
        let processors = e.normal.len();
        let (best, cost) = (0..processors)
            .map(|p| (p, self.finish(o.subgraph, p, estimates)))
            .min_by(|a, b| a.1.total_cmp(&b.1))?;
        if best == from || cost >= self.finish(o.subgraph, from, estimates) {
            return None;
        }
        let predicted = self.expected(o.subgraph, best, estimates);
        let e = &mut self.entries[o.subgraph];
        if e.normal[best].is_none() {
            e.normal[best] = predicted;
        }
        e.current = best;
        e.streak = 0;
        e.state = if best == e.info.home {
            State::Home
        } else {
            State::Away {
                probed_ms: now,
                wait_ms: self.params.probe_ms,
            }
        };
        Some(Decision {
            subgraph: o.subgraph,
            from,
            to: best,
            reason: "slow",
        })
    }
}

impl PlacementPolicy for AdaptivePolicy {
    fn placement(&self, subgraph: usize) -> usize {
        self.entries.get(subgraph).map_or(0, |e| e.current)
    }

    fn observe(&mut self, run: &[Observation], clock: &dyn Clock, estimates: &dyn Estimates) -> Vec<Decision> {
        let now = clock.now_ms();
        let mut moves: Vec<Decision> = run.iter().filter_map(|o| self.judge(o, estimates, now)).collect();
        for (s, e) in self.entries.iter_mut().enumerate() {
            if let State::Away { probed_ms, wait_ms } = e.state
                && now - probed_ms >= wait_ms
            {
                moves.push(Decision {
                    subgraph: s,
                    from: e.current,
                    to: e.info.home,
                    reason: "probe",
                });
                e.state = State::Probing {
                    away: e.current,
                    wait_ms,
                };
                e.current = e.info.home;
            }
        }
        moves
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::NoEstimates;
    use std::cell::Cell;

    struct FakeClock(Cell<f64>);

    impl Clock for FakeClock {
        fn now_ms(&self) -> f64 {
            self.0.get()
        }
    }

    /// Stem (level 0, p0), branch a (level 1, p0), branch b (level 1, p1),
    /// merge (level 2, p0).
    fn policy() -> AdaptivePolicy {
        let info = |home, level| SubgraphInfo { home, level };
        AdaptivePolicy::new(
            AdaptiveParams {
                margin: 1.5,
                runs: 3,
                probe_ms: 100.0,
            },
            &[info(0, 0), info(0, 1), info(1, 1), info(0, 2)],
            2,
        )
    }

    /// One request: every subgraph where the policy places it, taking
    /// `ms(subgraph, processor)`.
    fn request(p: &mut AdaptivePolicy, clock: &FakeClock, ms: impl Fn(usize, usize) -> f64) -> Vec<Decision> {
        let run: Vec<Observation> = (0..4)
            .map(|s| {
                let processor = p.placement(s);
                Observation {
                    subgraph: s,
                    processor,
                    ms: ms(s, processor),
                }
            })
            .collect();
        clock.0.set(clock.0.get() + 10.0);
        p.observe(&run, clock, &NoEstimates)
    }

    #[test]
    fn a_branch_on_a_slowed_processor_moves_after_the_streak_and_comes_back() {
        let mut p = policy();
        let clock = FakeClock(Cell::new(0.0));
        let normal = |_: usize, _: usize| 2.0;
        for _ in 0..5 {
            assert!(request(&mut p, &clock, normal).is_empty());
        }
        let loaded = |s: usize, q: usize| if q == 1 { 10.0 } else { normal(s, q) };
        assert!(request(&mut p, &clock, loaded).is_empty());
        assert!(request(&mut p, &clock, loaded).is_empty());
        let moved = request(&mut p, &clock, loaded);
        assert_eq!(
            moved,
            [Decision {
                subgraph: 2,
                from: 1,
                to: 0,
                reason: "slow"
            }]
        );
        assert_eq!(p.placement(2), 0);
        let mut probes = Vec::new();
        for _ in 0..80 {
            for d in request(&mut p, &clock, loaded) {
                match d.reason {
                    "probe" => probes.push(clock.0.get()),
                    "still slow" => assert_eq!((d.from, d.to), (1, 0)),
                    other => panic!("unexpected {other}"),
                }
            }
        }
        let gaps: Vec<f64> = probes.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps, [210.0, 410.0], "probes back off: {probes:?}");
        assert_eq!(p.placement(2), 0);
        let mut reasons = Vec::new();
        for _ in 0..90 {
            reasons.extend(request(&mut p, &clock, normal).iter().map(|d| d.reason));
        }
        assert_eq!(reasons, ["probe", "back"]);
        assert_eq!(p.placement(2), 1);
    }

    #[test]
    fn a_subgraph_stays_when_no_processor_would_finish_it_sooner() {
        let mut p = policy();
        let clock = FakeClock(Cell::new(0.0));
        let b_is_long = |s: usize| if s == 2 { 9.0 } else { 2.0 };
        for _ in 0..3 {
            request(&mut p, &clock, |s, _| b_is_long(s));
        }
        for _ in 0..10 {
            let d = request(
                &mut p,
                &clock,
                |s, q| if q == 0 { 2.0 * b_is_long(s) } else { b_is_long(s) },
            );
            assert!(d.iter().all(|d| d.subgraph != 1), "{d:?}");
        }
        assert_eq!(p.placement(1), 0);
    }

    #[test]
    fn a_destination_slower_than_predicted_is_left_again() {
        let mut p = policy();
        let clock = FakeClock(Cell::new(0.0));
        for _ in 0..3 {
            request(&mut p, &clock, |_, _| 2.0);
        }
        let mut moves = Vec::new();
        for _ in 0..8 {
            let ms = |s: usize, q: usize| match (s, q) {
                (0, 0) => 5.0,
                (0, 1) => 9.0,
                _ => 2.0,
            };
            moves.extend(
                request(&mut p, &clock, ms)
                    .into_iter()
                    .map(|d| (d.subgraph, d.to, d.reason)),
            );
        }
        assert_eq!(moves, [(0, 1, "slow"), (0, 0, "slow")]);
        assert_eq!(p.placement(0), 0);
    }

    #[test]
    fn nothing_moves_onto_a_processor_that_is_slow_itself() {
        let mut p = policy();
        let clock = FakeClock(Cell::new(0.0));
        for _ in 0..3 {
            request(&mut p, &clock, |_, _| 2.0);
        }
        for _ in 0..10 {
            let d = request(&mut p, &clock, |_, q| if q == 1 { 40.0 } else { 4.0 });
            assert!(d.iter().all(|d| d.to == 0), "{d:?}");
        }
        assert_eq!((p.placement(0), p.placement(3)), (0, 0));
    }

    #[test]
    fn an_isolated_slow_run_moves_nothing() {
        let mut p = policy();
        let clock = FakeClock(Cell::new(0.0));
        for k in 0..20 {
            let d = request(&mut p, &clock, |_, q| if q == 1 && k % 3 == 2 { 50.0 } else { 2.0 });
            assert!(d.is_empty(), "{d:?}");
        }
    }
}
