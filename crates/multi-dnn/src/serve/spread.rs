//! Serving with the scheduling spread over the worker threads: each worker
//! runs on its own pinned cores, and whichever worker finishes a piece
//! takes the run's lock, records the result, asks the policy, starts its
//! own next piece at once and hands the other workers theirs. An idle
//! worker polls its inbox (its core has nothing else to do), so a hand-off
//! to it costs no wake-up either. The calling thread serves the render
//! worker (or the first worker, without a render task) and calls `progress`.

use crate::core::Scheduler;
use crate::core::report::RunLog;
use crate::core::workload::Workload;
use crate::serve::Server;
use crate::serve::state::{RunState, Work};
use scheduler_rt::error::RuntimeError;
use scheduler_rt::priority;
use scheduler_rt::worker::{self, Done};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

/// True when every worker is pinned and no two share a core: the
/// condition for [`run`].
pub(super) fn applies(cores: &[Option<engine::host::CoreSet>]) -> bool {
    let mut seen = std::collections::HashSet::new();
    cores
        .iter()
        .all(|c| c.as_ref().is_some_and(|c| c.ids().iter().all(|id| seen.insert(*id))))
}

/// What a worker does after its turn at scheduling.
enum Step {
    Run(Work),
    Wait(Duration),
    Stop,
}

/// `None` in an inbox: the run is over.
type Inbox = Option<Work>;

/// The caller's progress callback, on the thread that has it.
type Progress<'p> = Option<&'p mut dyn FnMut(f64, &RunLog, usize)>;

struct Shared<'a> {
    st: RunState<'a>,
    error: Option<RuntimeError>,
    stop: bool,
}

impl Shared<'_> {
    /// Takes `done`, advances the run and hands out work: this worker's own
    /// comes back as [`Step::Run`]; at the end, or on an error, every
    /// other worker is told to stop.
    fn step(&mut self, me: usize, done: Option<Done>, outboxes: &[Sender<Inbox>], progress: &mut Progress) -> Step {
        if self.stop {
            return Step::Stop;
        }
        match self.advance(me, done, outboxes, progress) {
            Ok(step) => step,
            Err(e) => self.fail(e, outboxes),
        }
    }

    /// Records the run's first error and tells every worker to stop.
    fn fail(&mut self, e: RuntimeError, outboxes: &[Sender<Inbox>]) -> Step {
        self.error.get_or_insert(e);
        self.stop_all(outboxes)
    }

    fn advance(
        &mut self,
        me: usize,
        done: Option<Done>,
        outboxes: &[Sender<Inbox>],
        progress: &mut Progress,
    ) -> Result<Step, RuntimeError> {
        if let Some(d) = done {
            self.st.on_done(d)?;
        }
        let now = self.st.now();
        let mut mine = None;
        for w in self.st.advance(now)? {
            if w.worker == me {
                mine = Some(w);
            } else {
                let to = w.worker;
                outboxes[to].send(Some(w)).map_err(|_| RuntimeError::WorkerGone {
                    processor: self.st.processor(to).to_string(),
                })?;
            }
        }
        if let Some(p) = progress
            && self.st.progress_due(now)
        {
            p(now / 1e3, &self.st.log, self.st.in_system());
        }
        if let Some(w) = mine {
            return Ok(Step::Run(w));
        }
        if self.st.finished() {
            return Ok(self.stop_all(outboxes));
        }
        let wait = (self.st.wake_ms(now) - self.st.now()).max(0.0);
        Ok(Step::Wait(Duration::from_secs_f64(wait / 1e3)))
    }

    fn stop_all(&mut self, outboxes: &[Sender<Inbox>]) -> Step {
        self.stop = true;
        for o in outboxes {
            let _ = o.send(None);
        }
        Step::Stop
    }
}

/// One worker's thread: its turns at scheduling, its pieces, its waits.
fn serve_worker(
    me: usize,
    shared: &Mutex<Shared>,
    inbox: &Receiver<Inbox>,
    outboxes: &[Sender<Inbox>],
    mut progress: Progress,
) {
    let mut done = None;
    loop {
        let step = match shared.lock() {
            Ok(mut g) => g.step(me, done.take(), outboxes, &mut progress),
            Err(_) => return,
        };
        let work = match step {
            Step::Run(w) => w,
            Step::Stop => return,
            Step::Wait(t) => match scheduler_rt::spin::recv_polling(inbox, t) {
                Ok(Some(w)) => w,
                Ok(None) | Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => continue,
            },
        };
        done = Some(worker::execute(
            work.seq as usize,
            work.worker,
            work.compiled.as_ref(),
            work.inputs,
        ));
    }
}

/// Runs `workload` with the scheduling spread over the worker threads
/// (see the module doc); `render_worker` (any worker, without a render
/// task) is served by the calling thread.
pub(super) fn run(
    server: &Server,
    sched: &mut Scheduler,
    workload: &Workload,
    slo_ms: Vec<Option<f64>>,
    render_worker: usize,
    progress: &mut dyn FnMut(f64, &RunLog, usize),
) -> Result<RunLog, RuntimeError> {
    let n = server.names.len();
    let (outboxes, mut inboxes): (Vec<Sender<Inbox>>, Vec<Option<Receiver<Inbox>>>) =
        (0..n).map(|_| channel()).map(|(tx, rx)| (tx, Some(rx))).unzip();
    let own_inbox = inboxes[render_worker].take();
    let _pinned = crate::serve::setup::PinGuard::new(server.cores[render_worker].as_ref());
    let raised = priority::raise_current_thread(priority::SCHEDULER_NICE);
    let priority_error = server.priority_error.clone().or(raised.as_ref().err().cloned());
    let mut st = RunState::new(server, sched, workload, slo_ms, priority_error, None);
    st.self_scheduled();
    let shared = Mutex::new(Shared {
        st,
        error: None,
        stop: false,
    });
    std::thread::scope(|s| {
        for (w, inbox) in inboxes.into_iter().enumerate() {
            let Some(inbox) = inbox else { continue };
            let (shared, outboxes) = (&shared, &outboxes);
            s.spawn(move || {
                if let Some(cores) = &server.cores[w]
                    && let Err(reason) = engine::host::pin_current_thread(cores)
                {
                    if let Ok(mut g) = shared.lock() {
                        let e = RuntimeError::Pin {
                            processor: server.names[w].clone(),
                            reason: reason.to_string(),
                        };
                        g.fail(e, outboxes);
                    }
                    return;
                }
                let _ = priority::raise_current_thread(priority::SCHEDULER_NICE);
                serve_worker(w, shared, &inbox, outboxes, None);
            });
        }
        if let Some(inbox) = &own_inbox {
            serve_worker(render_worker, &shared, inbox, &outboxes, Some(progress));
        }
    });
    let shared = shared.into_inner().map_err(|_| RuntimeError::WorkerGone {
        processor: "(scheduler)".into(),
    })?;
    if let Some(e) = shared.error {
        return Err(e);
    }
    Ok(shared.st.into_log())
}

#[cfg(test)]
mod tests {
    use super::applies;
    use engine::host::CoreSet;

    #[test]
    fn workers_schedule_themselves_only_on_cores_of_their_own() {
        let on = |ids: &[usize]| CoreSet::new(ids.to_vec());
        assert!(applies(&[on(&[0]), on(&[1])]));
        assert!(applies(&[on(&[0, 2]), on(&[1])]));
        assert!(!applies(&[on(&[0]), on(&[0, 1])]), "a shared core");
        assert!(!applies(&[on(&[0]), None]), "an unpinned worker");
    }
}
