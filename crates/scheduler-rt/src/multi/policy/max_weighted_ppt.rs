//! Splash's "max weighted PPT" policy (§4.5, Algorithm 3): the worker with
//! the lowest `η · latency + (1 − η) · Δtemp`, latency being the expected
//! finish (waiting time + estimate, ms) and Δtemp the predicted rise (°C).

use super::Policy;
use super::min_heat::{ThermalOption, argmin_by, place_fifo};
use crate::multi::core::{Assignment, Requeue, View};

/// `η = 1` is the minimum-latency choice, `η = 0` the minimum temperature rise.
#[derive(Clone, Debug)]
pub struct MaxWeightedPpt {
    eta: f64,
}

impl MaxWeightedPpt {
    /// The default η: a subgraph's latency (ms) is some hundred times its
    /// temperature rise (°C) on a phone, so an η near 0.005 weighs the two
    /// about equally; η = 0.5 would follow latency almost alone.
    pub const DEFAULT_ETA: f64 = 0.005;

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
        argmin_by(options, |o| self.eta * o.finish_ms + (1.0 - self.eta) * o.rise_c)
    }
}

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
