//! A serving run on a device that heats (Splash): the thermal emulator
//! runs beside the real workers, fed by their real busy times. A processor
//! that throttles to frequency `f` is slowed for real: the result of each
//! subgraph it ran is held back for `1/f − 1` times the subgraph's time, so
//! the worker stays occupied as a duty-cycled core would (and the
//! estimator sees the longer time); one that switches off is an outage
//! until it cools ([`crate::serve::state::RunState`] applies both).

use crate::splash::thermal::driver::ThermalDriver;
use scheduler_rt::worker::Done;

/// How often the emulator is stepped at the latest while nothing else
/// happens (ms), so throttling is applied on time.
pub(super) const STEP_MS: f64 = 20.0;

/// The driver and the results held back for slowed workers.
pub(super) struct Heat<'d> {
    pub driver: &'d mut ThermalDriver,
    /// (due ms, result) of subgraphs on slowed workers.
    held: Vec<(f64, Done)>,
}

impl<'d> Heat<'d> {
    pub fn new(driver: &'d mut ThermalDriver) -> Heat<'d> {
        Heat {
            driver,
            held: Vec::new(),
        }
    }

    /// Holds `done` back when its worker runs slowed; `Some(done)` to take now.
    pub fn hold(&mut self, done: Done, now: f64, ms: f64) -> Option<Done> {
        let f = self.driver.latency_factor(done.worker);
        if !(f > 1.0 && f.is_finite()) {
            return Some(done);
        }
        self.held.push((now + ms * (f - 1.0), done));
        None
    }

    /// Results whose hold is over at `now`.
    pub fn release(&mut self, now: f64) -> Vec<Done> {
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held).into_iter().partition(|h| h.0 <= now);
        self.held = keep;
        due.into_iter().map(|(_, d)| d).collect()
    }

    /// Drops what `worker` holds back (it went away; its work is re-queued).
    pub fn drop_held(&mut self, worker: usize) {
        self.held.retain(|h| h.1.worker != worker);
    }

    /// When the next held result is due.
    pub fn next_due(&self) -> Option<f64> {
        self.held.iter().map(|h| h.0).min_by(f64::total_cmp)
    }

    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }
}
