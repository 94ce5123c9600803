//! Thermal-aware scheduling (Splash): an emulated device's temperatures
//! where no sensor exists ([`emulator`]; [`sensor`] reads a real device's
//! thermal zones), the online model that predicts a placement's
//! temperature rise ([`online`]) and latency per temperature
//! ([`latency_bins`]), the [`ThermalOracle`] through which policies see
//! them, and the [`driver`] that runs it all beside the simulator or
//! `serve`.

pub mod driver;
pub mod emulator;
pub mod latency_bins;
pub mod online;
pub mod profile;
pub mod sensor;

pub use emulator::{NodeParams, ThermalEmulator, ThermalError, ThermalParams, Throttle, illustrative_phone};
pub use online::{OnlineThermalModel, WindowedLeastSquares};

pub use crate::core::hooks::ThermalOracle;

/// The online model at the temperatures and frequencies read now.
pub struct Snapshot<'a> {
    pub model: &'a OnlineThermalModel,
    pub temps: &'a [f64],
    pub freqs: &'a [f64],
    /// Latency per temperature bin, where the run keeps it.
    pub bins: Option<&'a latency_bins::LatencyBins>,
}

impl ThermalOracle for Snapshot<'_> {
    fn rise_c(&self, worker: usize, latency_ms: f64, io: (u64, u64)) -> Option<f64> {
        self.model.rise(worker, self.temps, self.freqs, latency_ms, io)
    }

    fn latency_ms(&self, model: usize, candidate: usize, worker: usize) -> Option<f64> {
        self.bins?.predict(model, candidate, worker, self.temps[worker])
    }
}
