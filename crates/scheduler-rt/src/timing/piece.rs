//! Timing threads: one per processor, pinned to its cores, that compile
//! pieces on the processor's engine and time them (or run them as load for
//! a contention measurement).

use crate::partition::subgraph_of;
use crate::{EngineFactory, ProcessorConfig, RuntimeError};
use engine::{Compiled, Engine, Value};
use graph_ir::{Graph, NodeId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Instant;
use tract_core::prelude::*;

/// Bytes written before each timed run of a piece, so that it starts with
/// its weights and inputs out of the core's private caches, as in a
/// served run, where other models' pieces (or other guests of the
/// machine, while the core idles) run between two of its requests: twice
/// the largest private cache per core of current server cores (about
/// 2 MiB).
pub const POLLUTE_BYTES: usize = 4 << 20;

/// How many earlier runs' outputs a timed run of a piece keeps alive, so
/// that it writes its outputs to memory other than what the run before it
/// freed, as in a served run, where the consumer of a piece's output (a
/// piece on another processor, or later in the request) still holds it when
/// the next request runs the piece (`scheduler-rt`'s `idle_gap` example
/// times both).
pub const KEPT_OUTPUTS: usize = 2;

/// What a timing thread is asked to do.
pub enum Job {
    /// Time a piece (ONNX bytes, input shapes, timed runs): every run's
    /// ms, in the order run, or the engine's reason.
    Time(Vec<u8>, Vec<Vec<usize>>, usize, mpsc::Sender<Result<Vec<f64>, String>>),
    /// Time pieces at a serving cadence (pieces as ONNX bytes and input
    /// shapes, timed runs, round in ms): per piece, every run's ms in the
    /// order run, or the engine's reason ([`time_cadence`]).
    Cadence(Vec<(Vec<u8>, Vec<Vec<usize>>)>, usize, f64, mpsc::Sender<CadenceTimes>),
    /// Run a piece over and over until the flag is set (load for the
    /// contention measurement); replies once running and again once stopped.
    Load(
        Vec<u8>,
        Vec<Vec<usize>>,
        Arc<AtomicBool>,
        mpsc::Sender<Result<(), String>>,
    ),
}

/// Per piece, every timed run's ms in the order run, or the engine's reason.
pub type CadenceTimes = Result<Vec<Vec<f64>>, String>;

/// Starts the timing thread of processor `p`: pinned to its cores, it makes
/// the processor's engine with `engines` and times the pieces it is sent.
pub fn timer(p: &ProcessorConfig, engines: Arc<EngineFactory>) -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel::<Job>();
    let p = p.clone();
    std::thread::spawn(move || {
        let setup = || -> Result<Box<dyn Engine>, String> {
            if let Some(c) = &p.cores {
                engine::host::pin_current_thread(c).map_err(|e| e.to_string())?;
            }
            engines(&p).map_err(|e| e.to_string())
        };
        let engine = setup();
        while let Ok(job) = rx.recv() {
            match (job, &engine) {
                (Job::Time(bytes, shapes, runs, reply), Ok(e)) => {
                    let _ = reply.send(time_piece(e.as_ref(), &bytes, &shapes, runs));
                }
                (Job::Cadence(pieces, runs, round_ms, reply), Ok(e)) => {
                    let _ = reply.send(time_cadence(e.as_ref(), &pieces, runs, round_ms));
                }
                (Job::Load(bytes, shapes, stop, reply), Ok(e)) => {
                    let run = || -> Result<(), String> {
                        let compiled = e.compile(&bytes).map_err(|e| e.reason())?;
                        let inputs = random_inputs(&shapes)?;
                        let _ = reply.send(Ok(()));
                        while !stop.load(Ordering::Relaxed) {
                            compiled.run(inputs.clone()).map_err(|e| e.reason())?;
                        }
                        Ok(())
                    };
                    let _ = reply.send(run());
                }
                (Job::Time(_, _, _, reply), Err(reason)) => {
                    let _ = reply.send(Err(reason.clone()));
                }
                (Job::Cadence(_, _, _, reply), Err(reason)) => {
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
pub fn onnx_of(g: &Graph, nodes: Vec<NodeId>) -> Result<(Vec<u8>, Vec<Vec<usize>>), RuntimeError> {
    let sub = subgraph_of(g, "piece".into(), nodes);
    let bytes = crate::extract_onnx(g, &sub)?;
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
        let t = Tensor::from_shape(shape, &crate::npy::random_values(7 + k as u64, n)).map_err(|e| e.to_string())?;
        inputs.push(t.into_tvalue());
    }
    Ok(inputs)
}

/// Untimed runs before the timed ones (a round each in [`time_cadence`]).
const WARM_UPS: usize = 2;

/// Runs `compiled` once on `inputs` and returns its ms; its outputs stay in
/// `kept` until [`KEPT_OUTPUTS`] later runs have been made.
fn run_keeping(
    compiled: &dyn Compiled,
    inputs: &TVec<Value>,
    kept: &mut std::collections::VecDeque<TVec<Value>>,
) -> Result<f64, String> {
    let t = Instant::now();
    let outputs = compiled.run(inputs.clone()).map_err(|e| e.reason())?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    kept.push_back(outputs);
    if kept.len() > KEPT_OUTPUTS {
        kept.pop_front();
    }
    Ok(ms)
}

/// Every run's ms, in the order run, of `runs` runs (after two warm-ups) of the
/// piece on random inputs, each timed run after [`POLLUTE_BYTES`] were written
/// and with the outputs of the [`KEPT_OUTPUTS`] runs before it alive.
fn time_piece(engine: &dyn Engine, bytes: &[u8], shapes: &[Vec<usize>], runs: usize) -> Result<Vec<f64>, String> {
    thread_local! {
        static JUNK: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; POLLUTE_BYTES]);
    }
    let compiled = engine.compile(bytes).map_err(|e| e.reason())?;
    let inputs = random_inputs(shapes)?;
    let mut times = Vec::with_capacity(runs);
    let mut kept = std::collections::VecDeque::with_capacity(KEPT_OUTPUTS + 1);
    for i in 0..runs + WARM_UPS {
        if i >= WARM_UPS {
            JUNK.with_borrow_mut(|junk| {
                for b in junk.iter_mut().step_by(64) {
                    *b = b.wrapping_add(i as u8);
                }
                std::hint::black_box(&junk[0]);
            });
        }
        let ms = run_keeping(compiled.as_ref(), &inputs, &mut kept)?;
        if i >= WARM_UPS {
            times.push(ms);
        }
    }
    Ok(times)
}

/// Per piece, every run's ms, in the order run, of `runs` rounds (after two
/// warm-up rounds) that run each piece once, in the order given, and last
/// at least `round_ms` (the thread polls out the rest, as `serve`'s idle
/// self-scheduling workers do), with the outputs
/// of the [`KEPT_OUTPUTS`] runs before each alive. This is how a processor
/// serves a static plan's pieces: each once per period of its group, the
/// others in between. A run that starts some time after the previous one
/// can take longer than back to back, whether the core slept, polled or
/// computed in between (`scheduler-rt`'s `idle_gap` example times it).
fn time_cadence(
    engine: &dyn Engine,
    pieces: &[(Vec<u8>, Vec<Vec<usize>>)],
    runs: usize,
    round_ms: f64,
) -> CadenceTimes {
    let compiled = pieces
        .iter()
        .map(|(bytes, _)| engine.compile(bytes).map_err(|e| e.reason()))
        .collect::<Result<Vec<_>, _>>()?;
    let inputs = pieces
        .iter()
        .map(|(_, shapes)| random_inputs(shapes))
        .collect::<Result<Vec<_>, _>>()?;
    let round = std::time::Duration::from_secs_f64(round_ms.max(0.0) / 1e3);
    let mut times = vec![Vec::with_capacity(runs); pieces.len()];
    let mut kept: Vec<std::collections::VecDeque<TVec<Value>>> = vec![Default::default(); pieces.len()];
    for r in 0..runs + WARM_UPS {
        let start = Instant::now();
        for (k, c) in compiled.iter().enumerate() {
            let ms = run_keeping(c.as_ref(), &inputs[k], &mut kept[k])?;
            if r >= WARM_UPS {
                times[k].push(ms);
            }
        }
        while start.elapsed() < round {
            std::hint::spin_loop();
        }
    }
    Ok(times)
}

/// Per piece, the median over timings of each timing's median run:
/// `timings[t][i]` holds piece `i`'s runs in timing `t` (every timing
/// times the same pieces in the same order).
pub fn combine_timings(timings: Vec<Vec<Vec<f64>>>) -> Vec<f64> {
    let n = timings.first().map_or(0, Vec::len);
    let mut per_piece: Vec<Vec<f64>> = vec![Vec::with_capacity(timings.len()); n];
    for timing in timings {
        for (acc, runs) in per_piece.iter_mut().zip(timing) {
            acc.push(graph_ir::stats::median_nan(&runs));
        }
    }
    per_piece
        .into_iter()
        .map(|runs| graph_ir::stats::median_nan(&runs))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::EngineError;
    use std::sync::{Mutex, Weak};

    /// What the fake engine's pieces did: per run, the piece (the first
    /// byte of its ONNX), when it started and how many earlier outputs of
    /// any piece were still alive then; and every output made.
    #[derive(Default)]
    struct Log {
        runs: Mutex<Vec<(u8, Instant, usize)>>,
        outputs: Mutex<Vec<Weak<Tensor>>>,
    }

    impl Log {
        fn alive(&self) -> usize {
            self.outputs
                .lock()
                .unwrap()
                .iter()
                .filter(|w| w.strong_count() > 0)
                .count()
        }
    }

    struct Piece(u8, Arc<Log>);

    impl Compiled for Piece {
        fn run(&self, _inputs: TVec<Value>) -> Result<TVec<Value>, EngineError> {
            let alive = self.1.alive();
            self.1.runs.lock().unwrap().push((self.0, Instant::now(), alive));
            let t = Arc::new(Tensor::zero::<f32>(&[1, 4]).map_err(|e| EngineError::Run {
                engine: "fake",
                reason: e.to_string(),
            })?);
            self.1.outputs.lock().unwrap().push(Arc::downgrade(&t));
            Ok(tvec![TValue::from_const(t)])
        }
    }

    struct Fake(Arc<Log>);

    impl Engine for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn version(&self) -> &'static str {
            "0"
        }
        fn threads(&self) -> usize {
            1
        }
        fn compile(&self, onnx: &[u8]) -> Result<Box<dyn Compiled>, EngineError> {
            Ok(Box::new(Piece(onnx[0], self.0.clone())))
        }
    }

    #[test]
    fn each_timed_run_starts_with_the_kept_outputs_alive() {
        let log = Arc::new(Log::default());
        let times = time_piece(&Fake(log.clone()), &[0], &[vec![1, 4]], 6).unwrap();
        assert_eq!(times.len(), 6);
        let alive: Vec<usize> = log.runs.lock().unwrap().iter().map(|r| r.2).collect();
        assert_eq!(alive.len(), 8, "two warm-ups and six timed runs");
        assert_eq!(&alive[2..], &[KEPT_OUTPUTS; 6], "{alive:?}");
        assert_eq!(log.alive(), 0, "every output is dropped once the piece is timed");
    }

    #[test]
    fn cadence_runs_every_piece_once_per_round_of_at_least_the_period() {
        let log = Arc::new(Log::default());
        let pieces = vec![(vec![0u8], vec![vec![1]]), (vec![1u8], vec![vec![1]])];
        let times = time_cadence(&Fake(log.clone()), &pieces, 3, 5.0).unwrap();
        assert_eq!(times.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3]);
        let runs = log.runs.lock().unwrap();
        let order: Vec<u8> = runs.iter().map(|r| r.0).collect();
        assert_eq!(order, [0, 1, 0, 1, 0, 1, 0, 1, 0, 1], "two warm-up rounds, then three");
        let starts: Vec<Instant> = runs.iter().filter(|r| r.0 == 0).map(|r| r.1).collect();
        let span = (starts[4] - starts[0]).as_secs_f64() * 1e3;
        assert!(
            span >= 19.0,
            "piece 0's five runs spanned {span:.2} ms, not four rounds of at least 5 ms (1 ms allowed for the runs' own start)"
        );
    }

    #[test]
    fn one_stalled_timing_does_not_become_the_figure() {
        let timing = |scale: f64| vec![vec![1.0 * scale, 1.1 * scale, 0.9 * scale], vec![2.0 * scale; 3]];
        let got = combine_timings(vec![timing(1.0), timing(3.0), timing(1.02)]);
        assert_eq!(got.len(), 2);
        assert!((got[0] - 1.02).abs() < 1e-9 && (got[1] - 2.04).abs() < 1e-9, "{got:?}");
        assert!(combine_timings(Vec::new()).is_empty());
    }
}
