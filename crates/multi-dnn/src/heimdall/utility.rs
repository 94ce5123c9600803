//! Heimdall's coordinator policies (MobiCom '20 §6.2-6.4): `maxmin-utility`
//! and `maxtotal-utility`, each with an optional CPU offloading step.

use crate::core::workload::Utility;
use crate::core::{Assignment, Completed, Job, Requeue, Task, View};
use crate::heimdall::offload::{Latencies, Offloader};
use crate::heimdall::{Placement, chunk_from, chunks_on, options, remaining_ms};
use crate::policy::{Needs, Policy, PolicyEntry, PolicyOptions};

/// Weight of the content variation in the utility (Heimdall: 0.01).
pub const CONTENT_ALPHA: f64 = 0.01;

/// Slack in deciding that a frame finished on time (ms).
pub const ON_TIME_MS: f64 = 1.0;

/// Which utility the coordinator maximises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Objective {
    /// Run the DNN whose utility is lowest now (Eq. 5).
    MaxMin,
    /// Run the chunk that maximises the sum of utilities one step ahead (Eq. 6).
    MaxTotal,
}

/// At every scheduling event each idle worker takes one chunk of a job
/// placed on it. On the render worker a chunk must end before the next
/// tick, `margin_ms` allowed, except right after a frame that left the
/// whole budget to the next tick (within [`ON_TIME_MS`]), when any chunk
/// goes: chunks were cut to fit there, and one whose estimate has grown
/// past the budget must still run some time. Elsewhere any chunk goes. Among those,
/// a job that can still meet its deadline if it runs now but not if it
/// waits one more step (a frame on the render worker; elsewhere the longest
/// chunk on offer) runs first, earliest deadline first; otherwise the
/// objective picks. A job's remaining time on the render worker counts the
/// frames it interleaves with (× period / budget). Utility of a
/// job at time t: `U = L(t − arrival) + 0.01 · C`, L from its app's
/// [`Utility`], C its content variation in percent. With an
/// [`Offloader`], once per cycle one model may move between the render
/// worker and the CPU (Eq. 7). The rest of a job goes to the queue's tail.
///
/// A model with a chunk that cannot fit between two frames on the render
/// worker (one operator longer than `period − render_ms + margin_ms`, so
/// every run of it costs frames) starts on the `spill` worker instead,
/// when one is given (the workload's `offload_to`): Heimdall's partitioning
/// assumes every operator fits a rendering interval (§5.3), and its
/// frame rate comes first.
pub struct UtilityPolicy {
    objective: Objective,
    utility: Vec<Utility>,
    placement: Placement,
    margin_ms: f64,
    offload: Option<Offloader>,
    /// Per model: moving average of measured latency on its current home.
    measured: Vec<Option<f64>>,
    /// Per model: its measured latency on the render worker when it was
    /// last moved off it (Eq. 7's "last accelerator latency").
    last_accelerator: Vec<Option<f64>>,
    /// Per model: inferences completed since the last move of any model.
    since_move: Vec<u32>,
    /// Where a model that cannot fit between two frames starts.
    spill: Option<usize>,
    /// Whether the models that cannot fit have been moved to `spill`
    /// (at the first scheduling event, when the render slot is known).
    spill_checked: bool,
}

/// Inferences every model completes after any move before the offloading
/// rule may decide on it again: a move changes the load on both processors,
/// so every measured latency must reflect the new placement, not the old
/// one or the transition (with a moving average of one or two samples, two
/// models offloaded to one CPU swapped places in 12 of 20 cycles in
/// `serve`; with per-model resets only, a model measured under the old,
/// heavier load followed the first one to the CPU and came back).
pub const DWELL_INFERENCES: u32 = 3;

impl UtilityPolicy {
    /// `utility[app]`, `home[model]` (initial workers), `margin_ms` the
    /// chunk overrun allowed before a frame tick, `spill` where a model
    /// that cannot fit between two frames starts.
    pub fn new(
        objective: Objective,
        utility: Vec<Utility>,
        home: Vec<usize>,
        margin_ms: f64,
        offload: Option<Offloader>,
        spill: Option<usize>,
    ) -> UtilityPolicy {
        let n = home.len();
        UtilityPolicy {
            objective,
            utility,
            placement: Placement::new(home),
            margin_ms,
            offload,
            measured: vec![None; n],
            last_accelerator: vec![None; n],
            since_move: vec![DWELL_INFERENCES; n],
            spill,
            spill_checked: false,
        }
    }

    fn spill_oversized(&mut self, view: &View) {
        self.spill_checked = true;
        let render = view.workers.iter().position(|w| w.render.is_some());
        if let (Some(spill), Some(r)) = (self.spill, render)
            && let Some(slot) = view.workers[r].render.as_ref()
        {
            let limit = slot.period_ms - slot.render_ms + self.margin_ms;
            for (model, home) in self.placement.home.iter_mut().enumerate() {
                if *home != r || model >= view.models.len() {
                    continue;
                }
                let too_long = chunks_on(&view.models[model], 0, r)
                    .is_some_and(|cs| cs.iter().any(|c| view.estimator.estimate(model, *c, r) > limit));
                if too_long && chunks_on(&view.models[model], 0, spill).is_some() {
                    *home = spill;
                }
            }
        }
    }

    fn value(&self, job: &Job, at_ms: f64) -> f64 {
        let u = self.utility.get(job.spec.app).copied().unwrap_or_default();
        u.latency(at_ms - job.spec.arrival_ms) + CONTENT_ALPHA * job.spec.content
    }

    /// The offloading rule's inputs. On the render worker: the measured
    /// latency there and, for the CPU, its estimate there plus the
    /// estimates of every model already living on the CPU (each takes its
    /// turn there between two of this model's inferences, so this is the
    /// latency it would measure after the move, not a snapshot of the
    /// CPU's queue that a lull makes look empty). Offloaded: the measured
    /// CPU latency and the accelerator latency measured when it left.
    fn latencies(&self, view: &View, o: &Offloader) -> Vec<Option<Latencies>> {
        let cpu_load: f64 = (0..self.placement.home.len())
            .filter(|m| self.placement.home[*m] == o.cpu)
            .filter_map(|m| whole_ms(view, m, o.cpu))
            .sum();
        (0..self.placement.home.len())
            .map(|model| {
                if self.since_move[model] < DWELL_INFERENCES {
                    return None;
                }
                let measured = self.measured[model]?;
                if self.placement.home[model] == o.accelerator {
                    Some(Latencies {
                        accelerator_ms: measured,
                        cpu_ms: whole_ms(view, model, o.cpu)? + cpu_load,
                    })
                } else {
                    Some(Latencies {
                        accelerator_ms: self.last_accelerator[model]?,
                        cpu_ms: measured,
                    })
                }
            })
            .collect()
    }
}

/// Estimated ms of the whole of `model` (one region: chunked units) chunk
/// by chunk on `worker`.
fn whole_ms(view: &View, model: usize, worker: usize) -> Option<f64> {
    let chunks = chunks_on(&view.models[model], 0, worker)?;
    Some(chunks.iter().map(|c| view.estimator.estimate(model, *c, worker)).sum())
}

fn make(o: &PolicyOptions, objective: Objective, offload: bool) -> Result<Box<dyn Policy>, String> {
    let h = options::render(o)?;
    let offloader = if offload {
        let (acc, cpu, m, cycle) = h
            .offload
            .ok_or("needs a CPU to offload to beside the render processor")?;
        Some(Offloader::new(acc, cpu, m, cycle))
    } else {
        None
    };
    Ok(Box::new(UtilityPolicy::new(
        objective,
        h.utility.clone(),
        h.home.clone(),
        h.margin_ms,
        offloader,
        h.offload.map(|(_, cpu, _, _)| cpu),
    )))
}

/// The registry's entries: both objectives, with and without offloading.
pub const ENTRIES: [PolicyEntry; 4] = [
    PolicyEntry {
        name: "maxmin-utility",
        aliases: &[],
        summary: "Heimdall: chunks that maximise the lowest app utility",
        needs: Needs::RENDER,
        make: |o| make(o, Objective::MaxMin, false),
    },
    PolicyEntry {
        name: "maxtotal-utility",
        aliases: &[],
        summary: "Heimdall: chunks that maximise the total utility",
        needs: Needs::RENDER,
        make: |o| make(o, Objective::MaxTotal, false),
    },
    PolicyEntry {
        name: "maxmin-utility-offload",
        aliases: &[],
        summary: "maxmin-utility with opportunistic CPU offloading",
        needs: Needs::RENDER,
        make: |o| make(o, Objective::MaxMin, true),
    },
    PolicyEntry {
        name: "maxtotal-utility-offload",
        aliases: &[],
        summary: "maxtotal-utility with opportunistic CPU offloading",
        needs: Needs::RENDER,
        make: |o| make(o, Objective::MaxTotal, true),
    },
];

impl Policy for UtilityPolicy {
    fn name(&self) -> &'static str {
        match (self.objective, self.offload.is_some()) {
            (Objective::MaxMin, false) => "maxmin-utility",
            (Objective::MaxMin, true) => "maxmin-utility-offload",
            (Objective::MaxTotal, false) => "maxtotal-utility",
            (Objective::MaxTotal, true) => "maxtotal-utility-offload",
        }
    }

    fn schedule(&mut self, view: &View) -> Vec<Assignment> {
        let now = view.now_ms;
        if !self.spill_checked {
            self.spill_oversized(view);
        }
        if let Some(mut o) = self.offload.take() {
            let lat = self.latencies(view, &o);
            if let Some((model, to)) = o.step(now, &mut self.placement.home, &lat) {
                if to != o.accelerator {
                    self.last_accelerator[model] = self.measured[model];
                }
                self.measured.iter_mut().for_each(|m| *m = None);
                self.since_move.iter_mut().for_each(|n| *n = 0);
            }
            self.offload = Some(o);
        }
        let mut out = Vec::new();
        for w in view.idle() {
            let render = view.workers[w].render.as_ref();
            let window = render
                .filter(|r| !(r.fresh && r.until_tick_ms(now) + ON_TIME_MS >= r.period_ms - r.render_ms))
                .map_or(f64::INFINITY, |r| r.until_tick_ms(now) + self.margin_ms);
            let stretch = render.map_or(1.0, |r| r.period_ms / (r.period_ms - r.render_ms).max(1e-9));
            let options: Vec<(Task, usize, f64)> = view
                .queue
                .iter()
                .filter_map(|t| {
                    let job = view.job(t.job);
                    if self.placement.of(job) != w {
                        return None;
                    }
                    let c = chunk_from(view, job, t.region, w)?;
                    let est = view.estimate(job.spec.model, c, w);
                    (est <= window).then_some((*t, c, est))
                })
                .collect();
            if options.is_empty() {
                continue;
            }
            let step_ms = render.map_or_else(|| options.iter().map(|o| o.2).fold(0.0, f64::max), |r| r.period_ms);
            let urgent = options
                .iter()
                .filter_map(|o| {
                    let job = view.job(o.0.job);
                    let deadline = job.deadline_ms()?;
                    let finish_now = now + remaining_ms(view, job, w) * stretch;
                    (finish_now <= deadline && finish_now + step_ms > deadline).then_some((o, deadline))
                })
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(o, _)| *o);
            let pick = urgent.or_else(|| match self.objective {
                Objective::MaxMin => options
                    .iter()
                    .min_by(|a, b| {
                        self.value(view.job(a.0.job), now)
                            .total_cmp(&self.value(view.job(b.0.job), now))
                    })
                    .copied(),
                Objective::MaxTotal => options
                    .iter()
                    .map(|o| {
                        let total: f64 = options
                            .iter()
                            .map(|x| {
                                let at = if x.0.job == o.0.job { now } else { now + o.2 };
                                self.value(view.job(x.0.job), at)
                            })
                            .sum();
                        (o, total)
                    })
                    .max_by(|a, b| a.1.total_cmp(&b.1))
                    .map(|(o, _)| *o),
            });
            if let Some((task, candidate, _)) = pick {
                self.placement.place(task.job, w);
                out.push(Assignment {
                    task,
                    candidate,
                    worker: w,
                });
            }
        }
        out
    }

    fn requeue(&self) -> Requeue {
        Requeue::Tail
    }

    fn moves(&self) -> &[(f64, usize, usize)] {
        self.offload.as_ref().map_or(&[], |o| &o.moves)
    }

    fn completed(&mut self, done: &Completed, worker: usize) {
        self.placement.forget(done.job);
        let model = done.spec.model;
        if self.placement.home.get(model) == Some(&worker)
            && let Some(slot) = self.measured.get_mut(model)
        {
            let l = done.latency_ms();
            *slot = Some(slot.map_or(l, |m| 0.5 * m + 0.5 * l));
            if let Some(n) = self.since_move.get_mut(model) {
                *n = n.saturating_add(1);
            }
        }
    }
}
