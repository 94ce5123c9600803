//! Adapting placement to outside load (paper §7.4, Fig. 13).

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
