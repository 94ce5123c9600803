//! One request through a [`Runtime`] (Algorithm 1): every ready subgraph of
//! a pool or queue worker is dispatched first, then a ready inline subgraph
//! runs on the calling thread, then the request waits for the next result;
//! a meeting point runs once all its inputs arrived. A subgraph on a queue
//! worker is ready as soon as the values it lacks are queued on that same
//! worker before it.

use super::Runtime;
use crate::config::WorkerKind;
use crate::error::RuntimeError;
use crate::policy::Observation;
use crate::queue::{Cell, Input};
use crate::trace::{Span, Trace};
use crate::worker::{self, Done, Job};
use engine::Value;
use graph_ir::Outlet;
use std::collections::HashMap;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Instant;
use tract_core::prelude::TVec;

/// A request in progress: the values computed so far, the subgraphs
/// started and left, the values promised by queue workers, and what the
/// trace and the placement policy are given at the end.
pub(super) struct Request<'r> {
    rt: &'r Runtime,
    t0: Instant,
    values: HashMap<Outlet, Value>,
    started: Vec<bool>,
    remaining: usize,
    in_flight: usize,
    spans: Vec<Span>,
    reply: Sender<Done>,
    results: Receiver<Done>,
    /// Values a queue worker will fill, by the worker that fills them.
    queued: HashMap<Outlet, (usize, Cell)>,
    observed: Vec<Observation>,
    /// This thread is pinned for inline subgraphs.
    pinned: bool,
}

impl<'r> Request<'r> {
    /// A request of `inputs` (already checked), timed from now.
    pub(super) fn new(rt: &'r Runtime, inputs: Vec<Value>) -> Request<'r> {
        let t0 = Instant::now();
        let n = rt.partition.subgraphs.len();
        let mut values: HashMap<Outlet, Value> = HashMap::new();
        for ((_, _, o), v) in rt.inputs.iter().zip(inputs) {
            values.insert(*o, v);
        }
        let (reply, results) = channel::<Done>();
        Request {
            rt,
            t0,
            values,
            started: vec![false; n],
            remaining: n,
            in_flight: 0,
            spans: Vec::with_capacity(n),
            reply,
            results,
            queued: HashMap::new(),
            observed: Vec::with_capacity(n),
            pinned: false,
        }
    }

    /// Runs every subgraph; the graph's outputs and when each subgraph ran.
    pub(super) fn run(mut self) -> Result<(Vec<Value>, Trace), RuntimeError> {
        while self.remaining > 0 {
            let done = match self.dispatch()? {
                Some((i, wi)) => self.run_inline(i, wi)?,
                None if self.in_flight > 0 => self.wait()?,
                None => break,
            };
            self.finish(done)?;
        }
        self.outputs()
    }

    /// Submits every ready subgraph of a pool or queue worker; the first
    /// ready inline one, with its worker, is left to run here.
    fn dispatch(&mut self) -> Result<Option<(usize, usize)>, RuntimeError> {
        let rt = self.rt;
        let mut inline_ready = None;
        for (i, s) in rt.partition.subgraphs.iter().enumerate() {
            if self.started[i] {
                continue;
            }
            let wi = rt.placement(i)?;
            let w = &rt.workers[wi];
            let chains = w.config.kind == WorkerKind::Queue;
            let ready = s
                .inputs
                .iter()
                .all(|o| self.values.contains_key(o) || (chains && self.queued.get(o).is_some_and(|(q, _)| *q == wi)));
            if !ready {
                continue;
            }
            match &w.queue {
                Some(q) => {
                    let job = self.job(i, wi, chains)?;
                    q.send(job).map_err(|_| RuntimeError::WorkerGone {
                        processor: w.config.name.clone(),
                    })?;
                }
                None if inline_ready.is_none() => inline_ready = Some((i, wi)),
                None => {}
            }
        }
        Ok(inline_ready)
    }

    /// Subgraph `i` started as a job of worker `wi`; on a queue worker
    /// (`chains`) its outputs are promised to the jobs queued after it.
    fn job(&mut self, i: usize, wi: usize, chains: bool) -> Result<Job, RuntimeError> {
        let s = &self.rt.partition.subgraphs[i];
        self.started[i] = true;
        self.in_flight += 1;
        let inputs = s
            .inputs
            .iter()
            .map(|o| match self.values.get(o) {
                Some(v) => Input::Ready(v.clone()),
                None => Input::Queued(self.queued[o].1.clone()),
            })
            .collect();
        let publish: Vec<Cell> = if chains {
            s.outputs.iter().map(|_| Cell::default()).collect()
        } else {
            Vec::new()
        };
        for (o, c) in s.outputs.iter().zip(&publish) {
            self.queued.insert(*o, (wi, c.clone()));
        }
        Ok(Job {
            index: i,
            worker: wi,
            compiled: self.rt.compiled_on(i, wi)?.clone(),
            inputs,
            publish,
            reply: self.reply.clone(),
        })
    }

    /// Runs subgraph `i` of inline worker `wi` on this thread.
    fn run_inline(&mut self, i: usize, wi: usize) -> Result<Done, RuntimeError> {
        let rt = self.rt;
        if !self.pinned {
            worker::pin_inline(&rt.workers[wi].config)?;
            self.pinned = true;
        }
        self.started[i] = true;
        let ins: TVec<Value> = rt.partition.subgraphs[i]
            .inputs
            .iter()
            .map(|o| self.values[o].clone())
            .collect();
        Ok(worker::execute(i, wi, rt.compiled_on(i, wi)?.as_ref(), ins))
    }

    /// The next result of a worker.
    fn wait(&mut self) -> Result<Done, RuntimeError> {
        self.in_flight -= 1;
        let got = if self.rt.poll_results {
            crate::spin::recv_while(&self.results, &self.rt.busy, crate::spin::POLL_BEFORE_BLOCKING)
        } else {
            crate::spin::recv(&self.results, crate::spin::POLL_BEFORE_BLOCKING)
        };
        got.map_err(|_| RuntimeError::WorkerGone { processor: "?".into() })
    }

    /// Takes a finished subgraph's outputs and records its time; a job
    /// handed back unrun is started again.
    fn finish(&mut self, done: Done) -> Result<(), RuntimeError> {
        let rt = self.rt;
        let s = &rt.partition.subgraphs[done.index];
        for o in &s.outputs {
            self.queued.remove(o);
        }
        let processor = &rt.workers[done.worker].config.name;
        let Some(result) = done.result else {
            self.started[done.index] = false;
            return Ok(());
        };
        let outs = result.map_err(|reason| RuntimeError::Run {
            subgraph: s.name.clone(),
            processor: processor.clone(),
            reason,
        })?;
        let ms = done.end.duration_since(done.start).as_secs_f64() * 1e3;
        rt.record(done.index, done.worker, ms);
        self.observed.push(Observation {
            subgraph: done.index,
            processor: done.worker,
            ms,
        });
        for (o, v) in s.outputs.iter().zip(outs) {
            self.values.insert(*o, v);
        }
        self.spans.push(Span {
            subgraph: s.name.clone(),
            processor: processor.clone(),
            start_s: done.start.duration_since(self.t0).as_secs_f64(),
            end_s: done.end.duration_since(self.t0).as_secs_f64(),
            meeting_point: s.meeting_point,
        });
        self.remaining -= 1;
        Ok(())
    }

    /// The graph's outputs; every other value goes back to the tensor pool
    /// and the policy sees the request's times.
    fn outputs(self) -> Result<(Vec<Value>, Trace), RuntimeError> {
        let rt = self.rt;
        let outputs = rt
            .outputs
            .iter()
            .map(|o| self.values.get(o).cloned())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| RuntimeError::Run {
                subgraph: "graph".into(),
                processor: "-".into(),
                reason: "an output was not produced".into(),
            })?;
        let pool = engine::pool::pool();
        for (o, v) in self.values {
            if !rt.outputs.contains(&o) {
                pool.give_value(v);
            }
        }
        let moves = rt.adapt(&self.observed, self.t0);
        Ok((
            outputs,
            Trace {
                spans: self.spans,
                moves,
            },
        ))
    }
}
