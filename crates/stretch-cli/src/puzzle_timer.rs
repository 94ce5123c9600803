//! The timing threads behind `puzzle_measure`: one per processor, pinned to
//! its cores, that compile pieces on the processor's engine and time them
//! (or run them as load for the contention measurement).

use anyhow::Result;
use graph_ir::{Graph, NodeId};
use scheduler_rt::multi::units::subgraph_of;
use scheduler_rt::{ProcessorConfig, Value, make_engine};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Instant;
use tract_onnx::prelude::*;

/// Bytes written before each timed run of a piece, so that it starts with
/// its weights and inputs out of the core's private caches, as in a
/// served run, where other models' pieces (or other guests of the
/// machine, while the core idles) run between two of its requests: twice
/// this VM's 2.5 MiB L2 would do; the largest private cache of current
/// server cores is about 2 MiB per core.
pub const POLLUTE_BYTES: usize = 4 << 20;

/// What a timing thread is asked to do.
pub enum Job {
    /// Time a piece (ONNX bytes, input shapes, timed runs): every run's
    /// ms, in the order run, or the engine's reason.
    Time(Vec<u8>, Vec<Vec<usize>>, usize, mpsc::Sender<Result<Vec<f64>, String>>),
    /// Run a piece over and over until the flag is set (load for the
    /// contention measurement); replies once running and again once stopped.
    Load(
        Vec<u8>,
        Vec<Vec<usize>>,
        Arc<AtomicBool>,
        mpsc::Sender<Result<(), String>>,
    ),
}

/// Starts the timing thread of processor `p`: pinned to its cores, it makes
/// the processor's engine and times the pieces it is sent.
pub fn timer(p: &ProcessorConfig) -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel::<Job>();
    let p = p.clone();
    std::thread::spawn(move || {
        let setup = || -> Result<Box<dyn scheduler_rt::Engine>, String> {
            if let Some(c) = &p.cores {
                scheduler_rt::affinity::pin_current_thread(c)?;
            }
            make_engine(&p).map_err(|e| e.to_string())
        };
        let engine = setup();
        while let Ok(job) = rx.recv() {
            match (job, &engine) {
                (Job::Time(bytes, shapes, runs, reply), Ok(e)) => {
                    let _ = reply.send(time_piece(e.as_ref(), &bytes, &shapes, runs));
                }
                (Job::Load(bytes, shapes, stop, reply), Ok(e)) => {
                    let run = || -> Result<(), String> {
                        let compiled = e.compile(&bytes)?;
                        let inputs = random_inputs(&shapes)?;
                        let _ = reply.send(Ok(()));
                        while !stop.load(Ordering::Relaxed) {
                            compiled.run(inputs.clone())?;
                        }
                        Ok(())
                    };
                    let _ = reply.send(run());
                }
                (Job::Time(_, _, _, reply), Err(reason)) => {
                    let _ = reply.send(Err(reason.clone()));
                }
                (Job::Load(_, _, _, reply), Err(reason)) => {
                    let _ = reply.send(Err(reason.clone()));
                }
            }
        }
    });
    tx
}

/// The subgraph of `nodes` as ONNX bytes, with its inputs' shapes.
pub fn onnx_of(g: &Graph, nodes: Vec<NodeId>) -> Result<(Vec<u8>, Vec<Vec<usize>>)> {
    let sub = subgraph_of(g, "piece".into(), nodes);
    let bytes = scheduler_rt::extract_onnx(g, &sub)?;
    let shapes = sub
        .inputs
        .iter()
        .map(|o| g.fact(*o).map(|f| f.shape.clone()).unwrap_or_default())
        .collect();
    Ok((bytes, shapes))
}

fn random_inputs(shapes: &[Vec<usize>]) -> Result<TVec<Value>, String> {
    let mut inputs: TVec<Value> = TVec::new();
    for (k, shape) in shapes.iter().enumerate() {
        let n = shape.iter().product();
        let t =
            Tensor::from_shape(shape, &scheduler_rt::npy::random_values(7 + k as u64, n)).map_err(|e| e.to_string())?;
        inputs.push(t.into_tvalue());
    }
    Ok(inputs)
}

/// Every run's ms, in the order run, of `runs` runs (after two warm-ups) of the
/// piece on random inputs, each timed run after [`POLLUTE_BYTES`] were written.
fn time_piece(
    engine: &dyn scheduler_rt::Engine,
    bytes: &[u8],
    shapes: &[Vec<usize>],
    runs: usize,
) -> Result<Vec<f64>, String> {
    thread_local! {
        static JUNK: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; POLLUTE_BYTES]);
    }
    let compiled = engine.compile(bytes)?;
    let inputs = random_inputs(shapes)?;
    let mut times = Vec::with_capacity(runs);
    for i in 0..runs + 2 {
        if i >= 2 {
            JUNK.with_borrow_mut(|junk| {
                for b in junk.iter_mut().step_by(64) {
                    *b = b.wrapping_add(i as u8);
                }
                std::hint::black_box(&junk[0]);
            });
        }
        let t = Instant::now();
        compiled.run(inputs.clone())?;
        if i >= 2 {
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    Ok(times)
}
