//! Splash's online thermal model (§4.3, Eq. 4.4 and 4.6): per worker, the
//! temperature after an inference is a linear function of every worker's
//! temperature and frequency before it and of the inference's expected
//! latency, `T_w(t+1) = θ0·T(t) + θ1·F(t) + θ2·L(t) + θ3`, refitted by least
//! squares over a sliding window of the most recent observations. The
//! cloud worker's node (the modem) follows Eq. 4.5 instead: its own
//! temperature, the bytes sent and received, the link's quality and the
//! latency, `T(t+1) = θ0·T(t) + θ1·I + θ2·O + θ3·R + θ4·L + θ5`.

use std::collections::VecDeque;

/// Ridge added to the normal equations' diagonal, so that a window whose
/// features do not vary (a worker never used) still has a solution.
const RIDGE: f64 = 1e-12;

/// One worker's regression over a sliding window, refitted on demand.
#[derive(Clone, Debug)]
pub struct WindowedLeastSquares {
    dim: usize,
    window: usize,
    rows: VecDeque<(Vec<f64>, f64)>,
    xtx: Vec<f64>,
    xty: Vec<f64>,
    theta: Option<Vec<f64>>,
    since_rebuild: usize,
}

impl WindowedLeastSquares {
    /// `dim` features per row (the caller appends the constant 1), at most
    /// `window` rows kept.
    pub fn new(dim: usize, window: usize) -> WindowedLeastSquares {
        WindowedLeastSquares {
            dim,
            window: window.max(1),
            rows: VecDeque::new(),
            xtx: vec![0.0; dim * dim],
            xty: vec![0.0; dim],
            theta: None,
            since_rebuild: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Features per row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Rows kept at most.
    pub fn window(&self) -> usize {
        self.window
    }

    /// The smallest and largest value of feature `i` in the window.
    pub fn range(&self, i: usize) -> Option<(f64, f64)> {
        self.rows.iter().map(|(x, _)| x[i]).fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
    }

    /// Adds an observation, dropping the oldest beyond the window. The
    /// sums are updated in place and rebuilt from the window every
    /// `window` updates, so rounding never accumulates.
    pub fn push(&mut self, x: Vec<f64>, y: f64) {
        debug_assert_eq!(x.len(), self.dim);
        self.accumulate(&x, y, 1.0);
        self.rows.push_back((x, y));
        if self.rows.len() > self.window
            && let Some((old, oy)) = self.rows.pop_front()
        {
            self.accumulate(&old, oy, -1.0);
        }
        self.since_rebuild += 1;
        if self.since_rebuild >= self.window {
            self.rebuild();
        }
    }

    fn accumulate(&mut self, x: &[f64], y: f64, sign: f64) {
        let d = self.dim;
        for i in 0..d {
            self.xty[i] += sign * x[i] * y;
            for j in 0..d {
                self.xtx[i * d + j] += sign * x[i] * x[j];
            }
        }
    }

    fn rebuild(&mut self) {
        self.xtx.iter_mut().for_each(|v| *v = 0.0);
        self.xty.iter_mut().for_each(|v| *v = 0.0);
        let rows = std::mem::take(&mut self.rows);
        for (x, y) in &rows {
            self.accumulate(x, *y, 1.0);
        }
        self.rows = rows;
        self.since_rebuild = 0;
    }

    /// Solves `θ = (XᵀX + λI)⁻¹ XᵀY` (Eq. 4.6) by Cholesky; keeps the last
    /// solution when the system is singular.
    pub fn refit(&mut self) {
        let d = self.dim;
        let mut a = self.xtx.clone();
        let scale = (0..d).map(|i| a[i * d + i]).fold(0.0f64, f64::max).max(1.0);
        for i in 0..d {
            a[i * d + i] += RIDGE * scale;
        }
        if let Some(theta) = cholesky_solve(&mut a, &self.xty, d) {
            self.theta = Some(theta);
        }
    }

    /// The fitted coefficients, once fitted.
    pub fn theta(&self) -> Option<&[f64]> {
        self.theta.as_deref()
    }

    /// `x · θ`, once fitted.
    pub fn predict(&self, x: &[f64]) -> Option<f64> {
        Some(self.theta.as_ref()?.iter().zip(x).map(|(t, v)| t * v).sum())
    }
}

/// Solves `A x = b` for a symmetric positive definite `A` (row-major,
/// `d`×`d`, overwritten by its factor); `None` when `A` is not positive definite.
fn cholesky_solve(a: &mut [f64], b: &[f64], d: usize) -> Option<Vec<f64>> {
    for j in 0..d {
        let mut s = a[j * d + j];
        for k in 0..j {
            s -= a[j * d + k] * a[j * d + k];
        }
        if s <= 0.0 || !s.is_finite() {
            return None;
        }
        let l = s.sqrt();
        a[j * d + j] = l;
        for i in j + 1..d {
            let mut s = a[i * d + j];
            for k in 0..j {
                s -= a[i * d + k] * a[j * d + k];
            }
            a[i * d + j] = s / l;
        }
    }
    let mut y = vec![0.0; d];
    for i in 0..d {
        let s: f64 = (0..i).map(|k| a[i * d + k] * y[k]).sum();
        y[i] = (b[i] - s) / a[i * d + i];
    }
    let mut x = vec![0.0; d];
    for i in (0..d).rev() {
        let s: f64 = (i + 1..d).map(|k| a[k * d + i] * x[k]).sum();
        x[i] = (y[i] - s) / a[i * d + i];
    }
    Some(x)
}

/// The thermal model of every worker: which worker ran and for how long
/// decides which regression learns from an inference.
#[derive(Clone, Debug)]
pub struct OnlineThermalModel {
    workers: usize,
    per_worker: Vec<WindowedLeastSquares>,
    /// Per worker: the link's quality (Mbit/s) when it is the cloud worker.
    link: Vec<Option<f64>>,
}

/// Features of the cloud worker's row (Eq. 4.5).
const CLOUD_FEATURES: usize = 6;

impl OnlineThermalModel {
    /// Splash's window is 2,000 inferences.
    pub const DEFAULT_WINDOW: usize = 2000;

    pub fn new(workers: usize, window: usize) -> OnlineThermalModel {
        OnlineThermalModel {
            workers,
            per_worker: (0..workers)
                .map(|_| WindowedLeastSquares::new(2 * workers + 2, window))
                .collect(),
            link: vec![None; workers],
        }
    }

    /// Makes `worker` the cloud worker, over a link of `link_mbps` (Splash
    /// reads the signal strength; the emulated link's bandwidth stands in
    /// for it): its regression restarts with the features of Eq. 4.5.
    pub fn set_cloud(&mut self, worker: usize, link_mbps: f64) {
        let window = self.per_worker[worker].window();
        self.per_worker[worker] = WindowedLeastSquares::new(CLOUD_FEATURES, window);
        self.link[worker] = Some(link_mbps);
    }

    /// `worker`'s feature row: for a local worker every worker's
    /// temperature and frequency, the expected latency (ms) and 1; for the
    /// cloud worker its own temperature, MB sent and received (`io`, bytes),
    /// the link's quality, the latency and 1.
    fn row(&self, worker: usize, temps: &[f64], freqs: &[f64], latency_ms: f64, io: (u64, u64)) -> Vec<f64> {
        match self.link[worker] {
            Some(r) => vec![temps[worker], io.0 as f64 / 1e6, io.1 as f64 / 1e6, r, latency_ms, 1.0],
            None => self.features(temps, freqs, latency_ms),
        }
    }

    /// A local worker's feature row: every worker's temperature and
    /// frequency, the expected latency (ms), and 1.
    pub fn features(&self, temps: &[f64], freqs: &[f64], latency_ms: f64) -> Vec<f64> {
        let mut x = Vec::with_capacity(2 * self.workers + 2);
        x.extend_from_slice(&temps[..self.workers]);
        x.extend_from_slice(&freqs[..self.workers]);
        x.push(latency_ms);
        x.push(1.0);
        x
    }

    /// Records an inference on `worker` that took `latency_ms`, with the
    /// temperatures and frequencies before it and `worker`'s temperature
    /// after it, then refits that worker's model (Splash refits after every
    /// inference). The regression's target is the change `T_w(t+1) − T_w(t)`:
    /// the same model as Eq. 4.4 (θ0's own-temperature coefficient less 1),
    /// fitted with a target of the size of the change rather than of the
    /// temperature.
    /// `io` is the bytes the inference read and wrote (used by the cloud
    /// worker's model only).
    pub fn observe(&mut self, worker: usize, before: (&[f64], &[f64]), latency_ms: f64, io: (u64, u64), after_c: f64) {
        let x = self.row(worker, before.0, before.1, latency_ms, io);
        let m = &mut self.per_worker[worker];
        m.push(x, after_c - before.0[worker]);
        m.refit();
    }

    /// `worker`'s predicted temperature after an inference of `latency_ms`
    /// on it; `None` until its model has seen enough inferences to be fitted.
    pub fn predict(&self, worker: usize, temps: &[f64], freqs: &[f64], latency_ms: f64, io: (u64, u64)) -> Option<f64> {
        let m = &self.per_worker[worker];
        if m.len() < m.dim() {
            return None;
        }
        Some(temps[worker] + m.predict(&self.row(worker, temps, freqs, latency_ms, io))?)
    }

    /// Predicted rise of `worker`'s temperature (°C) from running
    /// `latency_ms` on it now, reading and writing `io` bytes; `None`
    /// before its model is fitted.
    pub fn rise(&self, worker: usize, temps: &[f64], freqs: &[f64], latency_ms: f64, io: (u64, u64)) -> Option<f64> {
        Some(self.predict(worker, temps, freqs, latency_ms, io)? - temps[worker])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::splash::thermal::emulator::{ThermalEmulator, illustrative_phone as phone};
    use graph_ir::rng::SplitMix64;

    #[test]
    fn recovers_an_exact_linear_system() {
        let mut m = WindowedLeastSquares::new(3, 50);
        let mut rng = SplitMix64::new(3);
        for _ in 0..120 {
            let a = rng.next_f64() * 10.0;
            let b = rng.next_f64();
            m.push(vec![a, b, 1.0], 0.9 * a - 2.0 * b + 4.0);
        }
        m.refit();
        let t = m.theta().unwrap();
        assert!(
            (t[0] - 0.9).abs() < 1e-4 && (t[1] + 2.0).abs() < 1e-3 && (t[2] - 4.0).abs() < 1e-3,
            "{t:?}"
        );
        assert_eq!(m.len(), 50);
    }

    #[test]
    fn the_window_forgets_old_behaviour() {
        let mut m = WindowedLeastSquares::new(2, 40);
        let mut rng = SplitMix64::new(5);
        for slope in [1.0, -3.0] {
            for _ in 0..40 {
                let a = rng.next_f64();
                m.push(vec![a, 1.0], slope * a);
            }
        }
        m.refit();
        assert!((m.theta().unwrap()[0] + 3.0).abs() < 1e-3, "{:?}", m.theta());
    }

    /// The cloud worker's modem heats with the bytes it moves (Eq. 4.5):
    /// with its features the model learns that exactly; with a local
    /// worker's features (no bytes) it cannot.
    #[test]
    fn the_cloud_model_learns_heat_from_bytes_moved() {
        let truth = |t: f64, io: (u64, u64), ms: f64| {
            t + 0.3 * io.0 as f64 / 1e6 + 0.1 * io.1 as f64 / 1e6 + 0.002 * ms - 0.01 * (t - 25.0)
        };
        let mut rng = SplitMix64::new(4);
        let (mut cloud, mut local) = (OnlineThermalModel::new(2, 500), OnlineThermalModel::new(2, 500));
        cloud.set_cloud(1, 249.0);
        let mut t = 25.0;
        let (mut err_cloud, mut err_local) = (0.0f64, 0.0f64);
        for i in 0..400 {
            let io = (rng.below(3_000_000) as u64, rng.below(200_000) as u64);
            let ms = 5.0 + rng.next_f64() * 40.0;
            let temps = [30.0, t];
            let after = truth(t, io, ms);
            if i >= 100 {
                let e = |m: &OnlineThermalModel| (m.predict(1, &temps, &[1.0, 1.0], ms, io).unwrap() - after).abs();
                err_cloud = err_cloud.max(e(&cloud));
                err_local = err_local.max(e(&local));
            }
            cloud.observe(1, (&temps, &[1.0, 1.0]), ms, io, after);
            local.observe(1, (&temps, &[1.0, 1.0]), ms, io, after);
            t = after;
        }
        assert!(err_cloud < 1e-6, "cloud features: worst error {err_cloud} °C");
        assert!(err_local > 0.1, "local features: worst error {err_local} °C");
    }

    /// One-step RMSE per worker of the online model and of persistence on
    /// an emulator trace with random placements (RetinaFace-like latencies
    /// of Splash Table 2.2), temperatures read as a sensor would: with
    /// Gaussian noise of `noise_c` and rounded to 0.1 °C when `noise_c > 0`.
    pub(crate) fn trace_rmse(seed: u64, inferences: usize, noise_c: f64) -> Vec<(f64, f64, usize)> {
        let mut emu = ThermalEmulator::new(phone()).unwrap();
        let n = emu.params().nodes.len();
        let mut model = OnlineThermalModel::new(n, OnlineThermalModel::DEFAULT_WINDOW);
        let mut rng = SplitMix64::new(seed);
        let read = |temps: &[f64], rng: &mut SplitMix64| -> Vec<f64> {
            if noise_c <= 0.0 {
                return temps.to_vec();
            }
            temps
                .iter()
                .map(|t| {
                    let (u, v) = (rng.next_f64().max(1e-12), rng.next_f64());
                    let g = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
                    ((t + noise_c * g) * 10.0).round() / 10.0
                })
                .collect()
        };
        let base_ms = [11.0, 7.7, 8.6, 9.4];
        let mut err = vec![(0.0, 0.0, 0usize); n];
        for _ in 0..inferences {
            let idle = rng.next_f64() * 30.0;
            emu.advance(idle, 1.0, &vec![0.0; n]).unwrap();
            let mut w = rng.below(n);
            while !emu.available(w) {
                w = rng.below(n);
            }
            let temps = read(emu.temps(), &mut rng);
            let freqs = emu.frequencies();
            let ms = base_ms[w] * emu.latency_factor(w);
            let mut busy = vec![0.0; n];
            busy[w] = 1.0;
            emu.advance(ms, 1.0, &busy).unwrap();
            let after = read(emu.temps(), &mut rng)[w];
            if let Some(p) = model.predict(w, &temps, &freqs, ms, (0, 0)) {
                err[w].0 += (p - after).powi(2);
                err[w].1 += (temps[w] - after).powi(2);
                err[w].2 += 1;
            }
            model.observe(w, (&temps, &freqs), ms, (0, 0), after);
        }
        err.into_iter()
            .map(|(m, p, k)| ((m / k as f64).sqrt(), (p / k as f64).sqrt(), k))
            .collect()
    }

    #[test]
    fn online_model_beats_persistence_on_every_worker() {
        for (seed, noise) in [(1, 0.0), (2, 0.0), (1, 0.1), (2, 0.3)] {
            for (w, (model, persistence, k)) in trace_rmse(seed, 20_000, noise).into_iter().enumerate() {
                eprintln!(
                    "seed {seed} sensor noise {noise} °C, worker {w}: {k} predictions, RMSE model {model:.5} °C, persistence {persistence:.5} °C"
                );
                assert!(k > 1000, "worker {w}: {k} predictions");
                assert!(
                    model < persistence,
                    "seed {seed} noise {noise} worker {w}: model RMSE {model:.4} °C, persistence {persistence:.4} °C"
                );
            }
        }
    }
}
