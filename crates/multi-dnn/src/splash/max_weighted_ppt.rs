//! Splash's "max weighted PPT" policy (§4.5, Algorithm 3): the worker with
//! the lowest `η · latency + (1 − η) · Δtemp` (Eq. 4.14), latency being the
//! expected finish (waiting time + estimate) and Δtemp the predicted rise.
//! Each term is divided by its largest value among the task's options, so
//! that η weighs two scale-free terms: in raw units a subgraph's
//! milliseconds are hundreds of times its degrees, and any η short of
//! nearly 0 would follow latency alone.

use crate::core::{Assignment, Requeue, View};
use crate::policy::{Needs, Policy, PolicyEntry};
use crate::splash::min_heat::{ThermalOption, argmin_by, place_fifo};

/// `η = 1` is the minimum-latency choice, `η = 0` the minimum temperature rise.
#[derive(Clone, Debug)]
pub struct MaxWeightedPpt {
    eta: f64,
}

impl MaxWeightedPpt {
    /// Latency and heat weighed equally.
    pub const DEFAULT_ETA: f64 = 0.5;

    /// `eta` is clamped to [0, 1].
    pub fn new(eta: f64) -> MaxWeightedPpt {
        MaxWeightedPpt {
            eta: eta.clamp(0.0, 1.0),
        }
    }

    pub fn eta(&self) -> f64 {
        self.eta
    }

    /// The index in `options` this policy picks.
    pub fn choose(&self, options: &[ThermalOption]) -> usize {
        let top = |f: fn(&ThermalOption) -> f64| {
            let m = options.iter().map(f).fold(0.0, f64::max);
            if m > 0.0 { m } else { 1.0 }
        };
        let (l, t) = (top(|o| o.finish_ms), top(|o| o.rise_c));
        argmin_by(options, |o| {
            self.eta * o.finish_ms / l + (1.0 - self.eta) * o.rise_c / t
        })
    }
}

/// η of `η · latency (ms) + (1 − η) · Δtemp (°C)`, set in
/// [`PolicyOptions`](crate::policy::PolicyOptions); without it the
/// policy's default ([`MaxWeightedPpt::DEFAULT_ETA`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Eta(pub f64);

/// The registry's entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "max-weighted-ppt",
    aliases: &[],
    summary: "Splash: the lowest eta x latency + (1 - eta) x temperature rise",
    needs: Needs::THERMAL,
    make: |o| {
        Ok(Box::new(MaxWeightedPpt::new(
            o.get::<Eta>().map_or(MaxWeightedPpt::DEFAULT_ETA, |e| e.0),
        )))
    },
};

impl Policy for MaxWeightedPpt {
    fn name(&self) -> &'static str {
        "max-weighted-ppt"
    }

    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        place_fifo(view, |_, options| self.choose(options))
    }

    fn requeue(&self) -> Requeue {
        Requeue::Head
    }
}
