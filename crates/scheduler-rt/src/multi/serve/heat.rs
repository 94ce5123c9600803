//! A serving run on a device that heats (Splash): the thermal emulator
//! runs beside the real workers, fed by their real busy times. A processor
//! that throttles to frequency `f` is slowed for real: the result of each
//! subgraph it ran is held back for `1/f − 1` times the subgraph's time, so
//! the worker stays occupied as a duty-cycled core would (and the
//! estimator sees the longer time); one that switches off is an outage
//! until it cools.

use super::super::core::Scheduler;
use super::super::report::{RunLog, Span};
use super::super::thermal::driver::{Change, ThermalDriver};
use crate::worker::Done;
use std::collections::HashMap;
use std::time::Instant;

/// How often the emulator is stepped at the latest while nothing else
/// happens (ms), so throttling is applied on time.
pub(super) const STEP_MS: f64 = 20.0;

/// The driver and the results held back for slowed workers.
pub(super) struct Heat<'d> {
    pub driver: &'d mut ThermalDriver,
    /// (due ms, result, factor) of subgraphs on slowed workers.
    held: Vec<(f64, Done, f64)>,
}

/// In-flight subgraphs by dispatch seq: (job, app, model, candidate, handed over at).
pub(super) type Flight = HashMap<u64, (u64, usize, usize, usize, Instant)>;

impl<'d> Heat<'d> {
    pub fn new(driver: &'d mut ThermalDriver) -> Heat<'d> {
        Heat {
            driver,
            held: Vec::new(),
        }
    }

    /// Steps the emulator to `now` and applies throttling: workers that
    /// switch off lose their running subgraph (re-queued by the scheduler)
    /// and come back when cool.
    pub fn advance(
        &mut self,
        now: f64,
        sched: &mut Scheduler,
        log: &mut RunLog,
        flight: &mut Flight,
    ) -> Result<(), crate::error::RuntimeError> {
        loop {
            let busy: Vec<bool> = sched.workers().iter().map(|w| w.running.is_some()).collect();
            let (stop, changes) = self
                .driver
                .advance_until(now, &busy)
                .map_err(|e| crate::error::RuntimeError::Policy { reason: e.to_string() })?;
            for c in changes {
                let Change::Off { worker, off } = c else { continue };
                if off {
                    if let Some(r) = &sched.workers()[worker].running
                        && let Some((job, app, _, cand, _)) = flight.remove(&r.seq)
                    {
                        log.spans.push(Span {
                            worker,
                            app,
                            job,
                            candidate: cand,
                            start_ms: r.start_ms.unwrap_or(stop),
                            end_ms: stop,
                            counted: false,
                        });
                        self.driver.finished(worker, 0, 0, 0.0, false);
                    }
                    self.held.retain(|h| h.1.worker != worker);
                }
                sched.set_available(worker, !off);
                log.outage(worker, !off, stop);
            }
            if stop >= now - 1e-9 {
                return Ok(());
            }
        }
    }

    /// Holds `done` back when its worker runs slowed; `Some(done)` to take now.
    pub fn hold(&mut self, done: Done, now: f64, ms: f64) -> Option<Done> {
        let f = self.driver.latency_factor(done.worker);
        if !(f > 1.0 && f.is_finite()) {
            return Some(done);
        }
        self.held.push((now + ms * (f - 1.0), done, f));
        None
    }

    /// Results whose hold is over at `now`, with their slowing factor.
    pub fn release(&mut self, now: f64) -> Vec<(Done, f64)> {
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held).into_iter().partition(|h| h.0 <= now);
        self.held = keep;
        due.into_iter().map(|(_, d, f)| (d, f)).collect()
    }

    /// When the next held result is due.
    pub fn next_due(&self) -> Option<f64> {
        self.held.iter().map(|h| h.0).min_by(f64::total_cmp)
    }

    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }
}
