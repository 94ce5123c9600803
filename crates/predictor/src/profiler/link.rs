//! Measures the cost of handing a tensor from a thread pinned to one core to
//! a thread pinned to another, the way a runtime meets at a meeting point: the
//! producer sends a filled buffer over a channel, the consumer copies it into
//! its own buffer. Fitted as `latency + bytes / bandwidth`.

use super::error::ProfilerError;
use super::timing::Timing;
use engine::host::{CoreSet, HostError, pin_current_thread};
use serde::Serialize;
use std::sync::mpsc;
use std::time::Instant;

/// Hand-off times of one buffer size.
#[derive(Clone, Debug, Serialize)]
pub struct LinkSample {
    pub bytes: u64,
    pub median_us: f64,
    pub p10_us: f64,
    pub p90_us: f64,
    pub reps: usize,
}

/// `latency + bytes / bandwidth`, fitted by least squares.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LinkFit {
    pub latency_us: f64,
    pub bandwidth_gbs: f64,
}

/// Buffer sizes from 4 KiB to 16 MiB, doubling: the feature maps CNNs hand
/// over (a 224x224 ResNet-50 hands over 0.4 to 3.2 MB; segmentation heads
/// more). Copies past the caches cost more per byte, which
/// [`fit_piecewise`] models and [`fit`]'s single line does not.
pub fn default_sizes() -> Vec<usize> {
    (12..=24).map(|p| 1usize << p).collect()
}

/// Where [`fit_piecewise`] breaks (Puzzle §4.1: 1 MiB).
pub const BREAK_BYTES: u64 = 1 << 20;

/// Two lines `latency + bytes / bandwidth`, one up to [`BREAK_BYTES`] and
/// one above (Puzzle §4.1), each fitted by least squares on its sizes
/// (the break size belongs to both).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PiecewiseFit {
    pub small: LinkFit,
    pub large: LinkFit,
    pub break_bytes: u64,
}

impl LinkFit {
    /// Predicted µs of a hand-off of `bytes`.
    pub fn us(&self, bytes: u64) -> f64 {
        self.latency_us + bytes as f64 / (self.bandwidth_gbs * 1e3)
    }
}

impl PiecewiseFit {
    /// Predicted µs of a hand-off of `bytes`.
    pub fn us(&self, bytes: u64) -> f64 {
        if bytes <= self.break_bytes {
            self.small.us(bytes)
        } else {
            self.large.us(bytes)
        }
    }
}

/// Ordinary least squares of `median_us` on bytes over `samples` (the
/// intercept of the line above the break may be negative: it is where
/// that line meets 0 bytes, not a latency).
fn ols(samples: &[&LinkSample]) -> LinkFit {
    let n = samples.len() as f64;
    let (sx, sy) = samples
        .iter()
        .fold((0.0, 0.0), |(a, b), s| (a + s.bytes as f64, b + s.median_us));
    let (mx, my) = (sx / n.max(1.0), sy / n.max(1.0));
    let (mut sxx, mut sxy) = (0.0, 0.0);
    for s in samples {
        let dx = s.bytes as f64 - mx;
        sxx += dx * dx;
        sxy += dx * (s.median_us - my);
    }
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let latency = my - slope * mx;
    LinkFit {
        latency_us: latency,
        bandwidth_gbs: 1.0 / (slope.max(1e-9) * 1e3),
    }
}

/// The piecewise fit of `samples` (sizes on each side of the break; with
/// fewer than two on a side, that side takes the single line of all).
pub fn fit_piecewise(samples: &[LinkSample]) -> PiecewiseFit {
    let all: Vec<&LinkSample> = samples.iter().collect();
    let small: Vec<&LinkSample> = samples.iter().filter(|s| s.bytes <= BREAK_BYTES).collect();
    let large: Vec<&LinkSample> = samples.iter().filter(|s| s.bytes >= BREAK_BYTES).collect();
    let side = |v: &[&LinkSample]| if v.len() >= 2 { ols(v) } else { ols(&all) };
    PiecewiseFit {
        small: side(&small),
        large: side(&large),
        break_bytes: BREAK_BYTES,
    }
}

/// Coefficient of determination of `predict` on the samples' medians.
pub fn r_squared(samples: &[LinkSample], predict: impl Fn(u64) -> f64) -> f64 {
    let n = samples.len() as f64;
    let mean = samples.iter().map(|s| s.median_us).sum::<f64>() / n.max(1.0);
    let tot: f64 = samples.iter().map(|s| (s.median_us - mean).powi(2)).sum();
    let res: f64 = samples.iter().map(|s| (s.median_us - predict(s.bytes)).powi(2)).sum();
    if tot > 0.0 { 1.0 - res / tot } else { 1.0 }
}

/// How the consumer of a hand-off waits for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Blocked on the channel: every hand-off pays the thread's wake-up.
    Block,
    /// Polling the channel on its own core: no wake-up.
    Poll,
}

/// Times `reps` hand-offs (after `warmup`) of each size in `sizes` from core
/// `from` to core `to`: from the producer's send to the end of the
/// consumer's copy, on one monotonic clock; the consumer blocks.
pub fn measure(
    from: usize,
    to: usize,
    sizes: &[usize],
    warmup: usize,
    reps: usize,
) -> Result<Vec<LinkSample>, ProfilerError> {
    measure_with(from, to, sizes, warmup, reps, Wait::Block)
}

/// [`measure`] with the consumer waiting as `wait` says.
pub fn measure_with(
    from: usize,
    to: usize,
    sizes: &[usize],
    warmup: usize,
    reps: usize,
    wait: Wait,
) -> Result<Vec<LinkSample>, ProfilerError> {
    let (from_set, to_set) = (single(from)?, single(to)?);
    let max = sizes.iter().copied().max().unwrap_or(0);
    let (tx, rx) = mpsc::sync_channel::<(Vec<f32>, Instant)>(1);
    let (back_tx, back_rx) = mpsc::sync_channel::<(Vec<f32>, f64)>(1);
    let consumer = std::thread::spawn(move || -> Result<(), ProfilerError> {
        pin_current_thread(&to_set)?;
        let mut own = vec![0f32; max / 4];
        let next = || match wait {
            Wait::Block => rx.recv().ok(),
            Wait::Poll => loop {
                match rx.try_recv() {
                    Ok(v) => break Some(v),
                    Err(mpsc::TryRecvError::Empty) => std::hint::spin_loop(),
                    Err(mpsc::TryRecvError::Disconnected) => break None,
                }
            },
        };
        while let Some((buf, sent)) = next() {
            own[..buf.len()].copy_from_slice(&buf);
            let us = sent.elapsed().as_secs_f64() * 1e6;
            std::hint::black_box(&own);
            if back_tx.send((buf, us)).is_err() {
                break;
            }
        }
        Ok(())
    });
    let run = || -> Result<Vec<LinkSample>, ProfilerError> {
        pin_current_thread(&from_set)?;
        let mut out = Vec::new();
        for &size in sizes {
            let mut buf = vec![0f32; size / 4];
            let mut times = Vec::with_capacity(reps);
            for i in 0..warmup + reps {
                buf.iter_mut().enumerate().for_each(|(j, v)| *v = (i + j) as f32);
                let lost = || ProfilerError::Setting {
                    name: "link",
                    reason: "the consumer thread stopped".into(),
                };
                tx.send((buf, Instant::now())).map_err(|_| lost())?;
                let (b, us) = back_rx.recv().map_err(|_| lost())?;
                buf = b;
                if i >= warmup {
                    times.push(us / 1e3);
                }
            }
            let t = Timing::of(times).unwrap_or(Timing {
                median_ms: 0.0,
                p10_ms: 0.0,
                p90_ms: 0.0,
                reps: 0,
            });
            out.push(LinkSample {
                bytes: size as u64,
                median_us: t.median_ms * 1e3,
                p10_us: t.p10_ms * 1e3,
                p90_us: t.p90_ms * 1e3,
                reps: t.reps,
            });
        }
        Ok(out)
    };
    let result = run();
    drop(tx);
    let joined = consumer.join().map_err(|_| ProfilerError::Setting {
        name: "link",
        reason: "the consumer thread panicked".into(),
    })?;
    let samples = result?;
    joined?;
    Ok(samples)
}

fn single(core: usize) -> Result<CoreSet, ProfilerError> {
    CoreSet::new(vec![core]).ok_or_else(|| {
        ProfilerError::Host(HostError::CoreSpec {
            spec: core.to_string(),
            reason: "empty core set".into(),
        })
    })
}

/// Fit of `median_us = latency + bytes / (bandwidth * 1e3)` minimising the
/// squared relative error, so small hand-offs weigh as much as large copies;
/// the latency is clamped at 0 and the bandwidth kept positive.
pub fn fit(samples: &[LinkSample]) -> LinkFit {
    let (mut s00, mut s01, mut s11, mut t0, mut t1) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for s in samples.iter().filter(|s| s.median_us > 0.0) {
        let w = 1.0 / (s.median_us * s.median_us);
        let x = s.bytes as f64;
        s00 += w;
        s01 += w * x;
        s11 += w * x * x;
        t0 += w * s.median_us;
        t1 += w * x * s.median_us;
    }
    let det = s00 * s11 - s01 * s01;
    let (mut latency, mut slope) = if det.abs() > 0.0 {
        ((t0 * s11 - s01 * t1) / det, (s00 * t1 - s01 * t0) / det)
    } else {
        (0.0, 0.0)
    };
    if latency < 0.0 {
        latency = 0.0;
        slope = if s11 > 0.0 { t1 / s11 } else { 0.0 };
    }
    LinkFit {
        latency_us: latency,
        bandwidth_gbs: 1.0 / (slope.max(1e-9) * 1e3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_polling_consumer_times_every_size() {
        let to = usize::from(std::thread::available_parallelism().map_or(1, |n| n.get()) > 1);
        let sizes = [4096, 1 << 16];
        let samples = measure_with(0, to, &sizes, 1, 5, Wait::Poll).unwrap();
        assert_eq!(samples.iter().map(|s| s.bytes).collect::<Vec<_>>(), [4096, 1 << 16]);
        assert!(
            samples
                .iter()
                .all(|s| s.reps == 5 && s.median_us > 0.0 && s.p10_us <= s.median_us),
            "{samples:?}"
        );
    }

    #[test]
    fn fit_recovers_a_line() {
        let samples: Vec<LinkSample> = [4096u64, 65536, 1 << 20, 16 << 20]
            .iter()
            .map(|&bytes| LinkSample {
                bytes,
                median_us: 12.0 + bytes as f64 / 8e3,
                p10_us: 0.0,
                p90_us: 0.0,
                reps: 1,
            })
            .collect();
        let f = fit(&samples);
        assert!(
            (f.latency_us - 12.0).abs() < 1e-6 && (f.bandwidth_gbs - 8.0).abs() < 1e-6,
            "{f:?}"
        );
    }

    #[test]
    fn the_piecewise_fit_follows_a_slope_change_at_one_mib_that_one_line_misses() {
        let samples: Vec<LinkSample> = default_sizes()
            .into_iter()
            .map(|b| {
                let b = b as u64;
                let us = if b <= BREAK_BYTES {
                    5.0 + b as f64 / 20e3
                } else {
                    5.0 + BREAK_BYTES as f64 / 20e3 + (b - BREAK_BYTES) as f64 / 4e3
                };
                LinkSample {
                    bytes: b,
                    median_us: us,
                    p10_us: 0.0,
                    p90_us: 0.0,
                    reps: 1,
                }
            })
            .collect();
        let p = fit_piecewise(&samples);
        assert!(
            (p.small.bandwidth_gbs - 20.0).abs() < 1e-6 && (p.small.latency_us - 5.0).abs() < 1e-6,
            "{p:?}"
        );
        assert!((p.large.bandwidth_gbs - 4.0).abs() < 1e-6, "{p:?}");
        let line = fit(&samples);
        let (r2p, r2l) = (r_squared(&samples, |b| p.us(b)), r_squared(&samples, |b| line.us(b)));
        assert!(r2p > 0.999_999 && r2l < r2p, "{r2p} {r2l}");
    }

    #[test]
    fn hand_off_between_two_threads_is_timed() {
        let s = measure(0, 0, &[4096, 4 << 20], 1, 9).unwrap();
        assert_eq!(s.len(), 2);
        assert!(s.iter().all(|x| x.reps == 9 && x.median_us > 0.0));
        assert!(s[1].median_us > s[0].median_us, "{s:?}");
    }
}
