//! The cloud worker's latency model (Splash §4.2): an inference offloaded
//! to the server takes its computation, as the server reports it, plus the
//! communication, fitted online as `θ0 + θ1·MB_in + θ2·MB_out` by least
//! squares over a sliding window of the most recent calls. θ0 is the fixed
//! cost per call (round trip, connection, framing), θ1 and θ2 the ms per
//! megabyte each way (the inverse of the link's bandwidth). The link's
//! quality is not a feature: the client's shaper holds it fixed for a run,
//! so θ1 and θ2 absorb it.

pub use crate::core::link::{LinkFit, PredictionErrors};
use crate::splash::thermal::WindowedLeastSquares;
use std::collections::HashMap;

/// One call to the server, as the client saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct CloudCall {
    /// Which compiled model ran (the server's id).
    pub model: String,
    pub bytes_in: usize,
    pub bytes_out: usize,
    /// From sending the request to decoding the reply (ms).
    pub total_ms: f64,
    /// The server's computation, from its `X-Compute-Ms` header (ms).
    pub compute_ms: f64,
}

/// Computation per model (EMA) and communication (windowed least squares).
#[derive(Clone, Debug)]
pub struct CloudLatencyModel {
    comm: WindowedLeastSquares,
    compute: HashMap<String, f64>,
    total: HashMap<String, f64>,
    last: Option<CloudCall>,
    errors: (usize, f64, f64),
}

impl Default for CloudLatencyModel {
    fn default() -> Self {
        CloudLatencyModel::new(Self::DEFAULT_WINDOW)
    }
}

impl CloudLatencyModel {
    /// Calls the communication fit remembers.
    pub const DEFAULT_WINDOW: usize = 200;
    /// Weight of the newest computation time in its EMA (Band's α).
    pub const ALPHA: f64 = 0.1;
    /// Calls before the fit is used: one per coefficient and one more.
    const MIN_CALLS: usize = 4;

    pub fn new(window: usize) -> CloudLatencyModel {
        CloudLatencyModel {
            comm: WindowedLeastSquares::new(3, window),
            compute: HashMap::new(),
            total: HashMap::new(),
            last: None,
            errors: (0, 0.0, 0.0),
        }
    }

    fn row(bytes_in: usize, bytes_out: usize) -> Vec<f64> {
        vec![1.0, bytes_in as f64 / 1e6, bytes_out as f64 / 1e6]
    }

    /// Learns from a call (after scoring the predictions made without it)
    /// and refits the communication model.
    pub fn observe(&mut self, call: CloudCall) {
        if call.total_ms.is_finite() && call.total_ms > 0.0 {
            let predicted = self.predict(&call.model, call.bytes_in, call.bytes_out);
            if let (Some(p), Some(e)) = (predicted, self.total.get(&call.model)) {
                self.errors.0 += 1;
                self.errors.1 += (p - call.total_ms).abs() / call.total_ms;
                self.errors.2 += (e - call.total_ms).abs() / call.total_ms;
            }
        }
        let ema = |map: &mut HashMap<String, f64>, v: f64| {
            let e = map.entry(call.model.clone()).or_insert(v);
            *e = Self::ALPHA * v + (1.0 - Self::ALPHA) * *e;
        };
        ema(&mut self.compute, call.compute_ms);
        ema(&mut self.total, call.total_ms);
        let comm = (call.total_ms - call.compute_ms).max(0.0);
        self.comm.push(Self::row(call.bytes_in, call.bytes_out), comm);
        self.comm.refit();
        self.last = Some(call);
    }

    /// Expected ms of `model` with these byte counts: its computation so far
    /// plus the fitted communication; `None` before the model has run or
    /// the fit has [`Self::MIN_CALLS`] calls.
    pub fn predict(&self, model: &str, bytes_in: usize, bytes_out: usize) -> Option<f64> {
        if self.comm.len() < Self::MIN_CALLS {
            return None;
        }
        let comm = self.comm.predict(&Self::row(bytes_in, bytes_out))?.max(0.0);
        Some(self.compute.get(model)? + comm)
    }

    /// The most recent call, and the model's prediction for it now.
    pub fn last(&self) -> Option<(&CloudCall, Option<f64>)> {
        let c = self.last.as_ref()?;
        Some((c, self.predict(&c.model, c.bytes_in, c.bytes_out)))
    }

    pub fn fit(&self) -> Option<LinkFit> {
        let t = self.comm.theta()?;
        Some(LinkFit {
            fixed_ms: t[0],
            ms_per_mb_in: t[1],
            ms_per_mb_out: t[2],
            calls: self.comm.len(),
            sizes_vary: self.comm.range(1).is_some_and(|(lo, hi)| hi > 1.1 * lo),
        })
    }

    pub fn errors(&self) -> PredictionErrors {
        let (n, m, e) = self.errors;
        let d = n.max(1) as f64;
        PredictionErrors {
            calls: n,
            model_mape: m / d,
            ema_mape: e / d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::rng::SplitMix64;

    /// Calls over a 13 Mbit/s link with a 40 ms round trip: the fit
    /// recovers the round trip and the bandwidth.
    #[test]
    fn recovers_the_link_from_calls() {
        let mut m = CloudLatencyModel::default();
        let mut rng = SplitMix64::new(9);
        let ms_per_mb = 8.0 * 1e3 / 13.0;
        for i in 0..60 {
            let bytes_in = 1000 + rng.below(400_000);
            let bytes_out = 100 + rng.below(50_000);
            let compute = 5.0 + rng.next_f64();
            let comm = 40.0 + ms_per_mb * (bytes_in + bytes_out) as f64 / 1e6;
            m.observe(CloudCall {
                model: format!("m{}", i % 3),
                bytes_in,
                bytes_out,
                total_ms: compute + comm + 0.2 * rng.next_f64(),
                compute_ms: compute,
            });
        }
        let f = m.fit().unwrap();
        assert!((f.fixed_ms - 40.1).abs() < 0.5, "{f:?}");
        assert!((f.uplink_mbps().unwrap() - 13.0).abs() < 0.3, "{f:?}");
        assert!((f.ms_per_mb_out - ms_per_mb).abs() / ms_per_mb < 0.05, "{f:?}");
        let p = m.predict("m0", 200_000, 10_000).unwrap();
        let want = 5.5 + 40.1 + ms_per_mb * 0.21;
        assert!((p - want).abs() < 1.0, "{p} vs {want}");
        let e = m.errors();
        assert!(e.calls > 40 && e.model_mape < e.ema_mape, "{e:?}");
    }

    #[test]
    fn nothing_is_predicted_before_enough_calls() {
        let mut m = CloudLatencyModel::default();
        for i in 0..3 {
            m.observe(CloudCall {
                model: "a".into(),
                bytes_in: 1000 * (i + 1),
                bytes_out: 10,
                total_ms: 10.0,
                compute_ms: 2.0,
            });
            assert_eq!(m.predict("a", 1000, 10), None);
        }
        m.observe(CloudCall {
            model: "a".into(),
            bytes_in: 5000,
            bytes_out: 20,
            total_ms: 10.0,
            compute_ms: 2.0,
        });
        assert!(m.predict("a", 1000, 10).is_some());
        assert_eq!(m.predict("never-ran", 1000, 10), None);
        let mut same = CloudLatencyModel::default();
        for _ in 0..10 {
            same.observe(CloudCall {
                model: "a".into(),
                bytes_in: 4000,
                bytes_out: 20,
                total_ms: 10.0,
                compute_ms: 2.0,
            });
        }
        let f = same.fit().unwrap();
        assert!(!f.sizes_vary && f.uplink_mbps().is_none(), "{f:?}");
        assert!((same.predict("a", 4000, 20).unwrap() - 10.0).abs() < 1e-6);
    }
}
