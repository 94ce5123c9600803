//! Heimdall's opportunistic CPU offloading (MobiCom '20 §6.3.2, Eq. 7,
//! greedy form of §6.4), as a pure rule the utility policies call once per
//! cycle.

/// Where each model runs and when the rule may next move one.
#[derive(Clone, Debug)]
pub struct Offloader {
    /// The render processor (the paper's GPU).
    pub accelerator: usize,
    /// The processor models are offloaded to.
    pub cpu: usize,
    /// m of Eq. 7: a move needs a (1 + m) advantage (no ping-pong).
    pub margin: f64,
    pub cycle_ms: f64,
    next_cycle_ms: f64,
    /// Moves made: (time, model, to).
    pub moves: Vec<(f64, usize, usize)>,
    /// Per model: how often a move of it undid its previous one.
    reversals: Vec<u32>,
    /// Per model: no move of it before this time (ms).
    held_until_ms: Vec<f64>,
}

/// Most cycles a model is held after a reversal (the hold doubles with
/// each reversal up to this).
pub const MAX_HOLD_CYCLES: f64 = 64.0;

/// A model's latency where it runs now and where it would run after a move (ms).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latencies {
    /// Current latency on the accelerator: measured there, or predicted
    /// from its estimates and the accelerator's backlog while offloaded.
    pub accelerator_ms: f64,
    /// Latency on the CPU: measured there while offloaded, predicted
    /// (estimate plus the CPU's backlog) while on the accelerator.
    pub cpu_ms: f64,
}

impl Offloader {
    pub fn new(accelerator: usize, cpu: usize, margin: f64, cycle_ms: f64) -> Offloader {
        Offloader {
            accelerator,
            cpu,
            margin,
            cycle_ms,
            next_cycle_ms: cycle_ms,
            moves: Vec::new(),
            reversals: Vec::new(),
            held_until_ms: Vec::new(),
        }
    }

    /// At most one move per cycle: the model on the accelerator with the
    /// highest latency goes to the CPU if its CPU latency × (1 + m) is
    /// below it; otherwise the offloaded model whose CPU latency exceeds
    /// (1 + m) × its accelerator latency by the largest ratio comes back.
    /// `home[model]` is updated; returns the move (model, to). `lat[model]`
    /// is `None` for a model with nothing known yet.
    ///
    /// A move that undoes the model's previous move is a reversal; after
    /// its k-th reversal a model stays where it is for 2^k cycles (at most
    /// [`MAX_HOLD_CYCLES`]) before the rule may move it again, so noise
    /// around the (1 + m) threshold settles instead of moving it every
    /// cycle.
    pub fn step(&mut self, now_ms: f64, home: &mut [usize], lat: &[Option<Latencies>]) -> Option<(usize, usize)> {
        if now_ms < self.next_cycle_ms {
            return None;
        }
        while self.next_cycle_ms <= now_ms {
            self.next_cycle_ms += self.cycle_ms;
        }
        let k = 1.0 + self.margin;
        self.reversals.resize(home.len(), 0);
        self.held_until_ms.resize(home.len(), 0.0);
        let held = &self.held_until_ms;
        let known = |m: usize| lat.get(m).copied().flatten().filter(|_| held[m] <= now_ms);
        let out = (0..home.len())
            .filter(|m| home[*m] == self.accelerator)
            .filter_map(|m| known(m).map(|l| (m, l)))
            .max_by(|a, b| a.1.accelerator_ms.total_cmp(&b.1.accelerator_ms))
            .filter(|(_, l)| l.cpu_ms * k < l.accelerator_ms)
            .map(|(m, _)| (m, self.cpu));
        let back = || {
            (0..home.len())
                .filter(|m| home[*m] == self.cpu)
                .filter_map(|m| known(m).map(|l| (m, l.cpu_ms / l.accelerator_ms.max(1e-9))))
                .filter(|(_, ratio)| *ratio > k)
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(m, _)| (m, self.accelerator))
        };
        let mv = out.or_else(back)?;
        home[mv.0] = mv.1;
        if self
            .moves
            .iter()
            .rev()
            .find(|m| m.1 == mv.0)
            .is_some_and(|last| last.2 != mv.1)
        {
            self.reversals[mv.0] += 1;
            let cycles = 2f64.powi(self.reversals[mv.0].min(30) as i32).min(MAX_HOLD_CYCLES);
            self.held_until_ms[mv.0] = now_ms + cycles * self.cycle_ms;
        }
        self.moves.push((now_ms, mv.0, mv.1));
        Some(mv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(accelerator_ms: f64, cpu_ms: f64) -> Option<Latencies> {
        Some(Latencies { accelerator_ms, cpu_ms })
    }

    #[test]
    fn offloads_when_the_accelerator_slows_and_returns_when_it_recovers() {
        let mut o = Offloader::new(0, 1, 0.1, 1000.0);
        let mut home = vec![0, 0];
        // Before the first cycle nothing moves.
        assert_eq!(o.step(500.0, &mut home, &[l(300.0, 100.0), l(50.0, 200.0)]), None);
        // Model 0 at 300 ms on the accelerator, 100 ms on the CPU: it goes.
        assert_eq!(
            o.step(1000.0, &mut home, &[l(300.0, 100.0), l(50.0, 200.0)]),
            Some((0, 1))
        );
        assert_eq!(home, [1, 0]);
        // Steady load, a cycle later: no move either way.
        for t in 2..10 {
            assert_eq!(
                o.step(t as f64 * 1e3, &mut home, &[l(95.0, 100.0), l(50.0, 200.0)]),
                None,
                "at {t} s"
            );
        }
        // The accelerator is free again: 100 ms on the CPU > 1.1 x 60 ms.
        assert_eq!(
            o.step(10_000.0, &mut home, &[l(60.0, 100.0), l(50.0, 200.0)]),
            Some((0, 0))
        );
        assert_eq!(home, [0, 0]);
        assert_eq!(o.moves.len(), 2);
    }

    #[test]
    fn the_margin_keeps_a_near_tie_in_place() {
        let mut o = Offloader::new(0, 1, 0.1, 1000.0);
        let mut home = vec![0];
        // 105 ms vs 100 ms on the CPU: within (1 + m), no move.
        assert_eq!(o.step(1000.0, &mut home, &[l(105.0, 100.0)]), None);
        let mut o = Offloader::new(0, 1, 0.0, 1000.0);
        assert_eq!(o.step(1000.0, &mut home, &[l(105.0, 100.0)]), Some((0, 1)));
    }

    #[test]
    fn one_move_per_cycle_and_the_slowest_goes_first() {
        let mut o = Offloader::new(0, 1, 0.1, 1000.0);
        let mut home = vec![0, 0, 0];
        let lat = [l(200.0, 50.0), l(400.0, 50.0), l(300.0, 50.0)];
        assert_eq!(o.step(1000.0, &mut home, &lat), Some((1, 1)));
        assert_eq!(o.step(1500.0, &mut home, &lat), None);
        assert_eq!(o.step(2000.0, &mut home, &lat), Some((2, 1)));
    }

    #[test]
    fn noise_around_the_threshold_settles() {
        let mut o = Offloader::new(0, 1, 0.1, 1000.0);
        let mut home = vec![0];
        // Latencies that flip across (1 + m) every cycle, as noise does.
        for t in 1..=30 {
            let lat = match home[0] {
                0 => [l(130.0, 100.0)],
                _ => [l(80.0, 100.0)],
            };
            o.step(t as f64 * 1e3, &mut home, &lat);
        }
        let times: Vec<f64> = o.moves.iter().map(|m| m.0 / 1e3).collect();
        // Out at 1 s, back at 2 s (hold 2 cycles), out at 4 s (hold 4),
        // back at 8 s (hold 8), out at 16 s (hold 16): then held past 30 s.
        assert_eq!(times, [1.0, 2.0, 4.0, 8.0, 16.0]);
    }
}
