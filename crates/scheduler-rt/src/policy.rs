//! What a placement policy sees and decides. The same policy code runs in
//! the runtime and in a simulator: it sees a clock, observed latencies and
//! latency estimates through these types, never threads or workers.

use std::time::Instant;

/// Milliseconds on some monotonic clock (real or simulated).
pub trait Clock {
    fn now_ms(&self) -> f64;
}

/// The wall clock, counting from when it was made.
pub struct SystemClock(Instant);

impl SystemClock {
    pub fn new() -> SystemClock {
        SystemClock(Instant::now())
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> f64 {
        self.0.elapsed().as_secs_f64() * 1e3
    }
}

/// Latency estimates of a subgraph on a processor (both by index), in ms:
/// measured moving averages in the runtime, predictions in a simulator.
pub trait Estimates {
    fn estimate_ms(&self, subgraph: usize, processor: usize) -> Option<f64>;
}

/// No estimates at all.
pub struct NoEstimates;

impl Estimates for NoEstimates {
    fn estimate_ms(&self, _: usize, _: usize) -> Option<f64> {
        None
    }
}

/// `table[subgraph][processor]`.
impl Estimates for Vec<Vec<Option<f64>>> {
    fn estimate_ms(&self, subgraph: usize, processor: usize) -> Option<f64> {
        self.get(subgraph)?.get(processor).copied().flatten()
    }
}

/// One subgraph execution of a finished request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    pub subgraph: usize,
    pub processor: usize,
    /// Time inside the engine, ms.
    pub ms: f64,
}

/// A placement change.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    pub subgraph: usize,
    pub from: usize,
    pub to: usize,
    /// See [`crate::Moved::reason`].
    pub reason: &'static str,
}

/// Where a subgraph in the partition sits in the request's dataflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubgraphInfo {
    /// The processor its annotation names.
    pub home: usize,
    /// 0 for subgraphs reading only graph inputs, else one more than the
    /// highest level it reads from: subgraphs of one level (the branches of
    /// a stage) run side by side.
    pub level: usize,
}

/// Decides which processor runs each subgraph, from observed runs.
pub trait PlacementPolicy: Send {
    /// The processor subgraph `subgraph` runs on now.
    fn placement(&self, subgraph: usize) -> usize;
    /// Takes the observations of one finished request; returns the moves
    /// it made ([`PlacementPolicy::placement`] reflects them).
    fn observe(&mut self, run: &[Observation], clock: &dyn Clock, estimates: &dyn Estimates) -> Vec<Decision>;
}
