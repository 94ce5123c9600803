//! Where an extension plugs into the core. A policy sees these traits in
//! its [`View`](crate::core::View), never the extension that implements
//! them: Splash's thermal model answers [`ThermalOracle`].

/// What a thermal-aware policy may ask about the device now.
pub trait ThermalOracle {
    /// Predicted rise (°C) of `worker`'s temperature from running
    /// `latency_ms` of work on it now that reads and writes `io` bytes;
    /// `None` when no prediction exists yet.
    fn rise_c(&self, worker: usize, latency_ms: f64, io: (u64, u64)) -> Option<f64>;
    /// Expected ms of `candidate` of `model` on `worker` at its temperature
    /// now; `None` where nothing is known for that temperature.
    fn latency_ms(&self, _model: usize, _candidate: usize, _worker: usize) -> Option<f64> {
        None
    }
}
