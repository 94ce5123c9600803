//! A discrete-event simulator running the real [`Scheduler`] and policy
//! objects: only the clock (simulated) and the workers (latencies from a
//! table, optionally with noise and contention) differ from `serve`.

mod draw;
pub mod measured;

pub use draw::{correlated_uniform, lag1_correlation};
use draw::{normal, pick, pick_at};

use crate::core::arrivals::Arrivals;
use crate::core::hooks::ThermalOracle;
use crate::core::report::{RunLog, Span};
use crate::core::workload::Workload;
use crate::core::{Dispatch, JobSpec, SchedError, Scheduler};
use crate::splash::thermal::driver::{Change, ThermalDriver};
use graph_ir::rng::SplitMix64;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// The true latency of one candidate on one processor (ms; infinite where
/// the processor cannot run it), when it starts with every other processor
/// idle (`alone`) or some other processor busy (`shared`), each with its
/// spread: the measured distribution's shape (run / mean at evenly spaced
/// quantiles, sampled as is) where known, else a log-normal of the given
/// coefficient of variation (0 = exact).
#[derive(Clone, Debug, PartialEq)]
pub struct Latency {
    pub alone_ms: f64,
    pub alone_cv: f64,
    pub alone_shape: Vec<f64>,
    pub shared_ms: f64,
    pub shared_cv: f64,
    pub shared_shape: Vec<f64>,
}

impl Latency {
    /// The same figure alone and shared, no spread.
    pub fn exact(ms: f64) -> Latency {
        Latency {
            alone_ms: ms,
            alone_cv: 0.0,
            alone_shape: Vec::new(),
            shared_ms: ms,
            shared_cv: 0.0,
            shared_shape: Vec::new(),
        }
    }
}

/// What simulated processors take: `table[model][candidate][worker]`, and
/// the driver's cost around each subgraph (hand-off to the worker and back).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Truth {
    pub table: Vec<Vec<Vec<Latency>>>,
    pub overhead_ms: f64,
    /// When measured: that cost at evenly spaced quantiles, one drawn per
    /// subgraph instead of `overhead_ms`.
    pub overhead_quantiles: Vec<f64>,
    /// The measured machine's speed per window of `speed_window_ms` (run
    /// time / mean); each simulated window draws one of them at random and
    /// every subgraph starting in it is scaled by it (slow periods slow all
    /// processors at once). Empty: speed 1.
    pub speed: Vec<f64>,
    pub speed_window_ms: f64,
    /// When measured: how late the driver submits a job after its arrival
    /// time, at evenly spaced quantiles, one drawn per job (its latency
    /// still counts from the arrival).
    pub arrival_lag_quantiles: Vec<f64>,
    /// Per worker: the lag-1 correlation of its consecutive runs' spread
    /// draws (a Gaussian AR(1) mapped onto the measured shape, so each
    /// draw still follows the shape); missing or 0: independent draws.
    pub spread_correlation: Vec<f64>,
}

/// Noise and contention of simulated workers, on top of [`Truth`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimOptions {
    /// Relative spread of each run's latency (log-normal, mean kept),
    /// replacing the truth's own spread when > 0.
    pub noise: f64,
    /// Latency factor of a subgraph that starts while another processor is
    /// busy (shared memory and caches; Band Table 1 reports 1.4-2x for two
    /// models on one processor); 1 = none.
    pub contention: f64,
    pub seed: u64,
    /// Scale runs by the measured machine speed of a random window
    /// ([`Truth::speed`]); off: the truth's distributions alone.
    pub drift: bool,
    /// End the run at the first job that finishes past its SLO (a search
    /// that only needs to know whether every job meets it).
    pub stop_at_first_miss: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            noise: 0.0,
            contention: 1.0,
            seed: 0,
            drift: false,
            stop_at_first_miss: false,
        }
    }
}

#[derive(Clone, Debug)]
enum Event {
    Finish { worker: usize, seq: u64 },
    RenderDone { worker: usize, seq: u64, ms: f64 },
    Down(usize),
    Up(usize),
    Submit(Box<JobSpec>),
}

struct Timed(f64, u64, Event);

/// Pending events, earliest first, ties in the order they were pushed.
#[derive(Default)]
struct Events {
    heap: BinaryHeap<Timed>,
    order: u64,
}

impl Events {
    fn push(&mut self, at_ms: f64, event: Event) {
        self.heap.push(Timed(at_ms, self.order, event));
        self.order += 1;
    }
}

/// Submits the jobs that arrived at `now`, each after a measured arrival
/// lag when the truth has one (its latency still counts from `now`).
fn admit(
    due: Vec<JobSpec>,
    now: f64,
    truth: &Truth,
    rng: &mut SplitMix64,
    events: &mut Events,
    sched: &mut Scheduler,
    log: &mut RunLog,
) {
    for spec in due {
        log.submitted[spec.app] += 1;
        if truth.arrival_lag_quantiles.is_empty() {
            sched.submit(spec);
        } else {
            let lag = pick(rng, &truth.arrival_lag_quantiles);
            events.push(now + lag, Event::Submit(Box::new(spec)));
        }
    }
}

impl PartialEq for Timed {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Timed {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

/// Runs `workload` on `sched` with processors taking `truth` (a subgraph
/// that starts while another processor is busy takes the shared figure,
/// times `options.contention`). `slo_ms` per app; outages and the
/// rendering task (a frame takes the workload's `render_ms`, with the
/// noise of `options`) come from the workload; frames tick until the
/// arrival window ends (or, for a request count, until the last job).
pub fn simulate(
    sched: &mut Scheduler,
    workload: &Workload,
    slo_ms: Vec<Option<f64>>,
    truth: &Truth,
    options: SimOptions,
) -> Result<RunLog, SchedError> {
    simulate_thermal(sched, workload, slo_ms, truth, options, None)
}

/// [`simulate`] on a device that heats up: `thermal` (one node per worker)
/// is stepped with the workers' busy states; a processor that throttles
/// runs the subgraphs it starts from then on slower by its frequency
/// factor (one already running keeps its pace), and one that switches off
/// is an outage until it cools. Policies see the driver's online thermal
/// model and latency per temperature bin.
pub fn simulate_thermal(
    sched: &mut Scheduler,
    workload: &Workload,
    slo_ms: Vec<Option<f64>>,
    truth: &Truth,
    options: SimOptions,
    thermal: Option<&mut ThermalDriver>,
) -> Result<RunLog, SchedError> {
    let names: Vec<String> = sched.workers().iter().map(|w| w.name.clone()).collect();
    let mut events = Events::default();
    for o in &workload.outages {
        if let Some(w) = names.iter().position(|n| *n == o.processor) {
            events.push(o.at_s * 1e3, Event::Down(w));
            events.push((o.at_s + o.for_s) * 1e3, Event::Up(w));
        }
    }
    sched.set_drop_late(workload.drop_late);
    let render_ms = sched
        .set_render_from(workload)
        .and(workload.render.as_ref().map(|r| r.render_ms));
    let mut run = Run {
        arrivals: Arrivals::new(workload, slo_ms),
        events,
        log: RunLog {
            submitted: vec![0; workload.apps.len()],
            ..RunLog::default()
        },
        busy: vec![None; names.len()],
        draws: Draws {
            rng: SplitMix64::new(options.seed),
            speed: (None, 1.0),
            spread: Vec::new(),
        },
        sched,
        truth,
        options,
        thermal,
        render_ms,
    };
    let mut now = 0.0f64;
    let mut missed = false;
    while !missed {
        let next_event = run.events.heap.peek().map(|t: &Timed| t.0);
        let next_tick = run
            .sched
            .next_tick_ms()
            .filter(|t| run.arrivals.ticking_at(*t, run.sched.in_system()));
        let next = [run.arrivals.next_ms(), next_event, next_tick]
            .into_iter()
            .flatten()
            .min_by(f64::total_cmp);
        let next = match (next, run.thermal.as_deref()) {
            (None, Some(t)) if t.any_off() && run.sched.in_system() > 0 => Some(now + POLL_MS),
            (next, _) => next,
        };
        let Some(next) = next else { break };
        let next = run.heat_until(next)?;
        now = now.max(next);
        if next_tick.is_some_and(|t| t <= now) {
            run.log.dropped_frames.extend(run.sched.render_ticks(now));
        } else if next_tick.is_none() {
            run.sched.stop_render();
        }
        run.admit(now);
        while run.events.heap.peek().is_some_and(|t| t.0 <= now) {
            let Some(Timed(_, _, ev)) = run.events.heap.pop() else {
                break;
            };
            missed |= run.handle(ev, now);
        }
        run.admit(now);
        let dispatches = {
            let oracle = run.thermal.as_deref().map(|t| t.oracle());
            run.sched
                .schedule_with(now, oracle.as_ref().map(|o| o as &dyn ThermalOracle))?
        };
        for d in run.sched.take_dropped() {
            run.arrivals.completed(&d.as_finished(), now);
            run.log.dropped.push(d);
        }
        for d in dispatches {
            run.start(&d, now);
        }
    }
    let mut log = run.log;
    log.frames_done = run.arrivals.frames_done;
    log.decision_us = std::mem::take(&mut run.sched.decision_us);
    log.moves = run.sched.policy_moves();
    Ok(log)
}

/// The random state of a run's latency draws.
struct Draws {
    rng: SplitMix64,
    /// Per worker, the last uniform of its correlated spread.
    spread: Vec<Option<f64>>,
    /// The drift window drawn last and its speed factor.
    speed: (Option<u64>, f64),
}

impl Draws {
    /// How long dispatch `d`, started at `now`, runs in the engine:
    /// `truth`'s figure (shared when `others_busy`, times the contention)
    /// drawn with its spread or the options' noise, and the drift.
    fn subgraph_ms(&mut self, d: &Dispatch, others_busy: bool, now: f64, truth: &Truth, options: SimOptions) -> f64 {
        let t = &truth.table[d.model][d.candidate][d.worker];
        let (mut ms, cv, shape) = if others_busy {
            (t.shared_ms * options.contention, t.shared_cv, &t.shared_shape)
        } else {
            (t.alone_ms, t.alone_cv, &t.alone_shape)
        };
        if options.noise == 0.0 && !shape.is_empty() {
            let rho = truth.spread_correlation.get(d.worker).copied().unwrap_or(0.0);
            if rho > 0.0 {
                if self.spread.len() <= d.worker {
                    self.spread.resize(d.worker + 1, None);
                }
                ms *= pick_at(
                    correlated_uniform(&mut self.spread[d.worker], rho, &mut self.rng),
                    shape,
                );
            } else {
                ms *= pick(&mut self.rng, shape);
            }
        } else {
            let sigma = if options.noise > 0.0 {
                options.noise
            } else {
                (1.0 + cv * cv).ln().sqrt()
            };
            if sigma > 0.0 {
                let z = normal(&mut self.rng);
                ms *= (sigma * z - sigma * sigma / 2.0).exp();
            }
        }
        if options.drift && !truth.speed.is_empty() {
            let window = if truth.speed_window_ms > 0.0 {
                (now / truth.speed_window_ms) as u64
            } else {
                0
            };
            if self.speed.0 != Some(window) {
                self.speed = (Some(window), pick(&mut self.rng, &truth.speed));
            }
            ms *= self.speed.1;
        }
        ms
    }
}

/// A simulation in progress: what its event loop steps.
struct Run<'a> {
    sched: &'a mut Scheduler,
    truth: &'a Truth,
    options: SimOptions,
    thermal: Option<&'a mut ThermalDriver>,
    arrivals: Arrivals,
    events: Events,
    log: RunLog,
    /// Per worker, the subgraph it runs.
    busy: Vec<Option<Span>>,
    draws: Draws,
    /// The workload's frame time, where it has a rendering task.
    render_ms: Option<f64>,
}

impl Run<'_> {
    /// Steps the thermal driver (if any) towards `next`; returns when to
    /// look next: `next`, or earlier where a processor switched off or on.
    fn heat_until(&mut self, next: f64) -> Result<f64, SchedError> {
        let Some(t) = self.thermal.as_deref_mut() else {
            return Ok(next);
        };
        let busy_now: Vec<bool> = self.busy.iter().map(Option::is_some).collect();
        let (stop, changes) = t.advance_until(next, &busy_now)?;
        for c in changes {
            if let Change::Off { worker, off } = c {
                set_up(
                    worker,
                    !off,
                    stop,
                    &mut self.busy,
                    self.sched,
                    &mut self.log,
                    Some(&mut *t),
                );
            }
        }
        Ok(next.min(stop))
    }

    fn admit(&mut self, now: f64) {
        let due = self.arrivals.due(now);
        admit(
            due,
            now,
            self.truth,
            &mut self.draws.rng,
            &mut self.events,
            self.sched,
            &mut self.log,
        );
    }

    /// Handles `ev` at `now`; whether a job missed its SLO and the run
    /// stops at the first miss.
    fn handle(&mut self, ev: Event, now: f64) -> bool {
        match ev {
            Event::Finish { worker, seq } => return self.finish(worker, seq, now),
            Event::Down(w) => set_up(
                w,
                false,
                now,
                &mut self.busy,
                self.sched,
                &mut self.log,
                self.thermal.as_deref_mut(),
            ),
            Event::Up(w) => set_up(
                w,
                true,
                now,
                &mut self.busy,
                self.sched,
                &mut self.log,
                self.thermal.as_deref_mut(),
            ),
            Event::Submit(spec) => {
                self.sched.submit(*spec);
            }
            Event::RenderDone { worker, seq, ms } => {
                if let Some(f) = self.sched.finish_render(now, worker, seq, ms) {
                    self.log.frames.push(f);
                }
            }
        }
        false
    }

    /// Dispatch `seq` on `worker` finished at `now` (ignored when the
    /// worker runs another by now); whether its job missed its SLO and the
    /// run stops at the first miss.
    fn finish(&mut self, worker: usize, seq: u64, now: f64) -> bool {
        let Some(mut span) = self.busy[worker].take() else {
            return false;
        };
        let current = self.sched.workers()[worker]
            .running
            .as_ref()
            .is_some_and(|r| r.seq == seq);
        if !current {
            return false;
        }
        span.end_ms = now;
        let ms = span.end_ms - span.start_ms;
        if let (Some(t), Some(r)) = (
            self.thermal.as_deref_mut(),
            self.sched.workers()[worker].running.as_ref(),
        ) {
            let c = &self.sched.models()[r.model].candidates[r.candidate];
            t.finished(worker, (r.model, r.candidate), (c.in_bytes, c.out_bytes), ms);
        }
        self.log.spans.push(span);
        let mut missed = false;
        if let Some(c) = self.sched.finish(now, worker, seq, Some(ms)) {
            missed = self.options.stop_at_first_miss && !c.met_slo();
            self.arrivals.completed(&c, now);
            self.log.end_ms = self.log.end_ms.max(now);
            self.log.completed.push(c);
        }
        missed
    }

    /// Starts dispatch `d` at `now`: its finish (or its frame's) becomes
    /// an event after its drawn latency.
    fn start(&mut self, d: &Dispatch, now: f64) {
        if d.render.is_some() {
            let mut ms = self.render_ms.unwrap_or(d.expected_ms);
            if self.options.noise > 0.0 {
                let sigma = self.options.noise;
                ms *= (sigma * normal(&mut self.draws.rng) - sigma * sigma / 2.0).exp();
            }
            self.events.push(
                now + ms,
                Event::RenderDone {
                    worker: d.worker,
                    seq: d.seq,
                    ms,
                },
            );
            return;
        }
        let others_busy = self.busy.iter().enumerate().any(|(w, b)| w != d.worker && b.is_some());
        let mut ms = self.draws.subgraph_ms(d, others_busy, now, self.truth, self.options);
        if let Some(t) = self.thermal.as_deref_mut() {
            ms *= t.latency_factor(d.worker);
            t.started(d.worker);
        }
        ms += if self.truth.overhead_quantiles.is_empty() {
            self.truth.overhead_ms
        } else {
            pick(&mut self.draws.rng, &self.truth.overhead_quantiles)
        };
        self.busy[d.worker] = Some(Span {
            worker: d.worker,
            app: d.app,
            job: d.job,
            candidate: d.candidate,
            start_ms: now,
            end_ms: now + ms,
            counted: true,
        });
        self.events.push(
            now + ms,
            Event::Finish {
                worker: d.worker,
                seq: d.seq,
            },
        );
    }
}

/// Takes worker `w` away at `at` (its running subgraph is abandoned and
/// re-queued) or brings it back: a scheduled outage or a processor
/// switched off by its heat.
fn set_up(
    w: usize,
    up: bool,
    at: f64,
    busy: &mut [Option<Span>],
    sched: &mut Scheduler,
    log: &mut RunLog,
    thermal: Option<&mut ThermalDriver>,
) {
    if !up && let Some(mut s) = busy[w].take() {
        s.end_ms = at;
        s.counted = false;
        log.spans.push(s);
        if let Some(t) = thermal {
            t.abandoned(w);
        }
    }
    sched.set_available(w, up);
    log.outage(w, up, at);
}

/// How often a thermal run looks again while a switched-off processor
/// holds the only work left (ms).
const POLL_MS: f64 = 10.0;
