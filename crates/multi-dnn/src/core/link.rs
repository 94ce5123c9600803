//! What a run's report says about a remote worker's link: the fitted
//! communication cost and how well it predicted. The model that learns
//! them is an extension's (Splash's cloud client).

/// The communication fit's coefficients.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct LinkFit {
    /// Fixed ms per call.
    pub fixed_ms: f64,
    /// ms per megabyte (10⁶ bytes) sent.
    pub ms_per_mb_in: f64,
    /// ms per megabyte received.
    pub ms_per_mb_out: f64,
    /// Calls in the window it was fitted on.
    pub calls: usize,
    /// Whether the window's calls sent inputs of different sizes (by 10%
    /// or more): without that, the per-MB and fixed costs cannot be told
    /// apart (the fit still predicts calls of the sizes seen).
    pub sizes_vary: bool,
}

impl LinkFit {
    /// The bandwidth (Mbit/s) the uplink coefficient implies; `None` when
    /// it is not positive or the sizes did not vary.
    pub fn uplink_mbps(&self) -> Option<f64> {
        (self.sizes_vary && self.ms_per_mb_in > 0.0).then(|| 8.0 * 1e3 / self.ms_per_mb_in)
    }
}

/// One-step errors of the model and of the plain alternative (an EMA of
/// each model's total time), each measured before the call was learnt from.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PredictionErrors {
    pub calls: usize,
    /// Mean |predicted − measured| / measured of compute + fitted communication.
    pub model_mape: f64,
    /// The same for an EMA (weight `ALPHA` of the cloud client's latency model) of each model's total.
    pub ema_mape: f64,
}
