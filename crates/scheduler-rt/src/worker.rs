//! Workers: the thread (or lack of one) that runs a processor's subgraphs.

use crate::config::{ProcessorConfig, Wait, WorkerKind};
use crate::error::RuntimeError;
use crate::factory::EngineFactory;
use crate::queue::{self, Cell, Input};
use engine::{Compiled, Engine, Value};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::time::Instant;
use tract_core::prelude::TVec;

/// What a subgraph run produced: its index, the worker that ran it, outputs
/// or error (`None`: the worker was disabled and did not run it), start and end.
pub struct Done {
    pub index: usize,
    pub worker: usize,
    pub result: Option<Result<TVec<Value>, String>>,
    pub start: Instant,
    pub end: Instant,
}

pub struct Job {
    pub index: usize,
    pub worker: usize,
    pub compiled: Arc<dyn Compiled>,
    pub inputs: Vec<Input>,
    /// Cells later jobs of a queue worker read this job's outputs from
    /// (empty for pool workers).
    pub publish: Vec<Cell>,
    pub reply: Sender<Done>,
}

impl Job {
    fn serve(self, enabled: &AtomicBool) {
        let done = if enabled.load(Ordering::Acquire) {
            match queue::resolve(self.inputs) {
                Ok(inputs) => {
                    let done = execute(self.index, self.worker, self.compiled.as_ref(), inputs);
                    if let Some(Ok(outs)) = &done.result {
                        queue::publish(&self.publish, outs);
                    }
                    done
                }
                Err(reason) => {
                    let now = Instant::now();
                    Done {
                        index: self.index,
                        worker: self.worker,
                        result: Some(Err(reason)),
                        start: now,
                        end: now,
                    }
                }
            }
        } else {
            let now = Instant::now();
            Done {
                index: self.index,
                worker: self.worker,
                result: None,
                start: now,
                end: now,
            }
        };
        let _ = self.reply.send(done);
    }
}

/// Runs `compiled` once, turning a panic into an error.
pub fn execute(index: usize, worker: usize, compiled: &dyn Compiled, inputs: TVec<Value>) -> Done {
    let start = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| compiled.run(inputs).map_err(|e| e.reason())))
        .unwrap_or_else(|p| Err(format!("engine panicked: {}", panic_text(&p))));
    Done {
        index,
        worker,
        result: Some(result),
        start,
        end: Instant::now(),
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-text payload".into())
}

/// A started worker and the engine subgraphs are compiled with.
pub struct Worker {
    pub config: ProcessorConfig,
    pub engine: Box<dyn Engine>,
    /// `Some` for pool and queue workers: the job channel of their thread.
    pub queue: Option<Sender<Job>>,
    /// Cleared while the processor is disabled; a pool worker then hands
    /// queued jobs back unrun.
    pub enabled: Arc<AtomicBool>,
}

fn pin(config: &ProcessorConfig) -> Result<(), RuntimeError> {
    match &config.cores {
        Some(c) => engine::host::pin_current_thread(c).map_err(|e| RuntimeError::Pin {
            processor: config.name.clone(),
            reason: e.to_string(),
        }),
        None => Ok(()),
    }
}

/// Starts the worker for `config`. A pool or queue worker's thread is pinned
/// before its engine is made, so the engine's own threads inherit the
/// pinning; it serves jobs in submission order, and a queue worker's jobs
/// may read values of jobs queued before them ([`crate::queue`]). Inline
/// workers check their cores here and pin the caller on each run.
///
/// A pool or queue worker with [`Wait::Poll`] polls for its next job while
/// `busy` (requests of its runtime in flight; `None` where nothing counts
/// them) is above zero and blocks otherwise.
pub fn start(
    config: &ProcessorConfig,
    factory: &Arc<EngineFactory>,
    busy: Option<&Arc<AtomicUsize>>,
) -> Result<Worker, RuntimeError> {
    match config.kind {
        WorkerKind::Inline => {
            if let Some(c) = &config.cores {
                engine::host::check(c).map_err(|e| RuntimeError::Pin {
                    processor: config.name.clone(),
                    reason: e.to_string(),
                })?;
            }
            Ok(Worker {
                config: config.clone(),
                engine: factory(config)?,
                queue: None,
                enabled: Arc::new(AtomicBool::new(true)),
            })
        }
        WorkerKind::Pool | WorkerKind::Queue => {
            let (jobs, rx) = channel::<Job>();
            let (ready_tx, ready_rx) = channel();
            let cfg = config.clone();
            let factory = factory.clone();
            let enabled = Arc::new(AtomicBool::new(true));
            let flag = enabled.clone();
            let busy = busy.filter(|_| config.wait == Wait::Poll).cloned();
            std::thread::Builder::new()
                .name(format!("stretch-{}", config.name))
                .spawn(move || {
                    let started = pin(&cfg).and_then(|_| factory(&cfg));
                    let failed = started.is_err();
                    let _ = ready_tx.send(started);
                    if failed {
                        return;
                    }
                    let poll = crate::spin::POLL_BEFORE_BLOCKING;
                    while let Ok(job) = match &busy {
                        Some(b) => crate::spin::recv_while(&rx, b, poll),
                        None => crate::spin::recv(&rx, poll),
                    } {
                        job.serve(&flag);
                    }
                })
                .map_err(|e| RuntimeError::Pin {
                    processor: config.name.clone(),
                    reason: format!("cannot start its thread: {e}"),
                })?;
            let engine = ready_rx.recv().map_err(|_| RuntimeError::WorkerGone {
                processor: config.name.clone(),
            })??;
            Ok(Worker {
                config: config.clone(),
                engine,
                queue: Some(jobs),
                enabled,
            })
        }
    }
}

/// Pins the calling thread to an inline worker's cores, if it has any.
pub fn pin_inline(config: &ProcessorConfig) -> Result<(), RuntimeError> {
    pin(config)
}
