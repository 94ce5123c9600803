//! When requests arrive: the workload's patterns turned into job specs, the
//! same sequence under the runtime and the simulator (seeded).

use crate::core::content::FrameSource;
use crate::core::workload::{Arrival, Workload};
use crate::core::{Completed, JobSpec};
use graph_ir::rng::SplitMix64;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

struct OpenFrame {
    left: HashMap<usize, usize>,
}

#[derive(PartialEq)]
struct At(f64, usize, u64);

impl Eq for At {}

impl PartialOrd for At {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for At {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1)).then(o.2.cmp(&self.2))
    }
}

/// The arrival process of a workload. App `i` sends jobs of model `i`.
pub struct Arrivals {
    patterns: Vec<Arrival>,
    slo_ms: Vec<Option<f64>>,
    pending: BinaryHeap<At>,
    end_ms: f64,
    limit: usize,
    issued: usize,
    rng: SplitMix64,
    frame_apps: Vec<usize>,
    frame: u64,
    /// Frames in flight: the requests each still waits for, per app (those
    /// not yet sent included).
    open: HashMap<u64, OpenFrame>,
    /// With a camera: its period, each request's SLO and when it takes the next frame.
    camera: Option<(f64, f64, f64)>,
    /// Frames whose requests have all finished.
    pub frames_done: u64,
    sources: Vec<FrameSource>,
    /// Per app: the period of its group (ms), if it belongs to a resolved one.
    group_period: Vec<Option<f64>>,
}

impl Arrivals {
    /// Arrivals of `w` with the given SLO per app (ms).
    pub fn new(w: &Workload, slo_ms: Vec<Option<f64>>) -> Arrivals {
        let mut rng = SplitMix64::new(w.seed);
        let mut pending = BinaryHeap::new();
        let patterns: Vec<Arrival> = w.apps.iter().map(|a| a.arrival.clone()).collect();
        let mut frame_apps = Vec::new();
        let phases: Vec<f64> = phase_fractions(&mut rng, w.groups.len())
            .into_iter()
            .zip(&w.groups)
            .map(|(u, g)| u * g.period_ms.unwrap_or(0.0))
            .collect();
        let group_period: Vec<Option<f64>> = (0..w.apps.len()).map(|a| w.group_deadline_ms(a)).collect();
        for (i, p) in patterns.iter().enumerate() {
            match p {
                Arrival::Periodic { fps } => pending.push(At(rng.next_f64() * 1e3 / fps, i, 0)),
                Arrival::Poisson { rate } => pending.push(At(exp_gap(&mut rng, *rate), i, 0)),
                Arrival::Closed | Arrival::Paced { .. } => pending.push(At(0.0, i, 0)),
                Arrival::Frame { .. } => frame_apps.push(i),
                Arrival::Group { group } => {
                    if group_period[i].is_some() {
                        pending.push(At(phases[*group], i, 0));
                    }
                }
            }
        }
        let mut a = Arrivals {
            patterns,
            slo_ms,
            pending,
            end_ms: w.duration_s.map_or(f64::INFINITY, |d| d * 1e3),
            limit: w.requests.unwrap_or(usize::MAX),
            issued: 0,
            rng,
            frame_apps,
            frame: 0,
            open: HashMap::new(),
            camera: w.camera.map(|c| (1e3 / c.fps, c.slo_ms, 0.0)),
            frames_done: 0,
            sources: w
                .apps
                .iter()
                .enumerate()
                .map(|(i, a)| FrameSource::open(&a.frames, w.seed ^ (0x9e37 + i as u64)).unwrap_or(FrameSource::None))
                .collect(),
            group_period,
        };
        if a.camera.is_none() {
            a.start_frame(0.0);
        }
        a
    }

    /// Takes frame `self.frame + 1` at `now`: the requests of the apps that
    /// follow no other arrive now.
    fn start_frame(&mut self, now: f64) {
        if self.frame_apps.is_empty() || now >= self.end_ms {
            return;
        }
        self.frame += 1;
        let mut left = HashMap::new();
        for &i in &self.frame_apps {
            if let Arrival::Frame { per_frame, after } = self.patterns[i] {
                left.insert(i, per_frame);
                if after.is_none() {
                    for _ in 0..per_frame {
                        self.pending.push(At(now, i, self.frame));
                    }
                }
            }
        }
        self.open.insert(self.frame, OpenFrame { left });
    }

    /// When the next arrival is due, if one is known.
    pub fn next_ms(&self) -> Option<f64> {
        if self.issued >= self.limit {
            return None;
        }
        let camera = self.camera.map(|c| c.2).filter(|_| !self.frame_apps.is_empty());
        [self.pending.peek().map(|a| a.0), camera]
            .into_iter()
            .flatten()
            .min_by(f64::total_cmp)
            .filter(|t| *t < self.end_ms)
    }

    /// The jobs due at or before `now`, in arrival order; periodic and
    /// Poisson apps schedule their next request.
    pub fn due(&mut self, now: f64) -> Vec<JobSpec> {
        let mut out = Vec::new();
        while let Some(t) = self.next_ms() {
            if t > now {
                break;
            }
            if let Some((period, deadline, at)) = self.camera
                && at <= t
            {
                self.camera = Some((period, deadline, at + period));
                self.start_frame(at);
                continue;
            }
            let Some(At(t, app, frame)) = self.pending.pop() else {
                break;
            };
            self.issued += 1;
            let slo_ms = match self.camera {
                Some((_, slo, _)) if frame > 0 => Some(slo),
                _ => self.slo_ms[app],
            };
            out.push(JobSpec {
                app,
                model: app,
                arrival_ms: t,
                slo_ms,
                frame: (frame > 0).then_some(frame),
                content: 100.0 * self.sources[app].next_variation(),
            });
            match self.patterns[app] {
                Arrival::Periodic { fps } => self.pending.push(At(t + 1e3 / fps, app, 0)),
                Arrival::Poisson { rate } => {
                    let gap = exp_gap(&mut self.rng, rate);
                    self.pending.push(At(t + gap, app, 0));
                }
                Arrival::Group { .. } => {
                    if let Some(p) = self.group_period[app] {
                        self.pending.push(At(t + p, app, 0));
                    }
                }
                Arrival::Closed | Arrival::Paced { .. } | Arrival::Frame { .. } => {}
            }
        }
        out
    }

    /// A job finished at `now`: a closed-loop app sends its next request,
    /// and the last request of a frame starts the next frame.
    pub fn completed(&mut self, c: &Completed, now: f64) {
        match self.patterns[c.spec.app] {
            Arrival::Closed => self.pending.push(At(now, c.spec.app, 0)),
            Arrival::Paced { fps } => self
                .pending
                .push(At(now.max(c.spec.arrival_ms + 1e3 / fps), c.spec.app, 0)),
            Arrival::Frame { .. } => self.frame_request_done(c, now),
            _ => {}
        }
    }

    /// A request of a frame finished: the apps that follow its app get
    /// their requests of that frame once it has none left, and a frame with
    /// nothing left is done (without a camera, the next one starts).
    fn frame_request_done(&mut self, c: &Completed, now: f64) {
        let Some(frame) = c.spec.frame else { return };
        let Some(open) = self.open.get_mut(&frame) else {
            return;
        };
        let app = c.spec.app;
        if let Some(n) = open.left.get_mut(&app) {
            *n = n.saturating_sub(1);
        }
        if open.left.get(&app) == Some(&0) {
            for &i in &self.frame_apps {
                if let Arrival::Frame { per_frame, after } = self.patterns[i]
                    && after == Some(app)
                {
                    for _ in 0..per_frame {
                        self.pending.push(At(now, i, frame));
                    }
                }
            }
        }
        if open.left.values().all(|n| *n == 0) {
            self.open.remove(&frame);
            self.frames_done += 1;
            if self.camera.is_none() {
                self.start_frame(now);
            }
        }
    }

    /// Jobs issued so far.
    pub fn issued(&self) -> usize {
        self.issued
    }

    /// Whether a rendering task still ticks at `t`: within the arrival
    /// window, or, for a request count, while requests remain to arrive or run.
    pub fn ticking_at(&self, t: f64, in_system: usize) -> bool {
        if self.end_ms.is_finite() {
            t < self.end_ms
        } else {
            self.next_ms().is_some() || in_system > 0
        }
    }

    /// The end of the arrival window in ms (infinite for a request count).
    pub fn end_ms(&self) -> f64 {
        self.end_ms
    }
}

/// Each group's first tick as a fraction of its period, in group order:
/// the first draws of the workload's seed, as [`Arrivals::new`] makes them.
pub fn group_phase_fractions(w: &Workload) -> Vec<f64> {
    phase_fractions(&mut SplitMix64::new(w.seed), w.groups.len())
}

fn phase_fractions(rng: &mut SplitMix64, groups: usize) -> Vec<f64> {
    (0..groups).map(|_| rng.next_f64()).collect()
}

fn exp_gap(rng: &mut SplitMix64, rate: f64) -> f64 {
    -(1.0 - rng.next_f64()).ln() / rate * 1e3
}
