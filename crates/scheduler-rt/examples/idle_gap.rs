//! How a subgraph's time depends on how long ago it last ran: a model (or
//! piece) compiled on one engine, pinned to one core, timed back to back
//! (dropping each run's outputs at once, or keeping the last two alive as a
//! consumer would) and with a gap before each run (sleeping, polling with
//! `spin_loop`, or busy with register-only arithmetic), in interleaved
//! rounds; prints each mode's median and its ratio to back to back.
//!
//! With READER_CORE, two more modes hand each run's outputs to a thread
//! pinned there that reads every value (as a consumer on another
//! processor does) before the next run: dropping them at once, or keeping
//! the last two alive.
//!
//! cargo run --release -p scheduler-rt --features ort --example idle_gap -- ENGINE MODEL.onnx CORE [ROUNDS [READER_CORE]]
//! (ENGINE: tract or ort; the model's input is random, its shape read from the file)

use engine::{EngineRegistry, Value};
use scheduler_rt::{ProcessorConfig, WorkerKind};
use std::time::{Duration, Instant};
use tract_core::prelude::*;

const RUNS: usize = 60;

#[derive(Clone, Copy)]
enum Gap {
    None,
    KeepTwo,
    Sleep(u64),
    Spin(u64),
    Busy(u64),
    /// Read by the reader thread, which keeps the last `kept` outputs.
    ReadBy(usize),
}

impl Gap {
    fn name(self) -> String {
        match self {
            Gap::None => "back-to-back".into(),
            Gap::KeepTwo => "back-to-back, 2 outputs kept".into(),
            Gap::Sleep(us) => format!("sleep {:.1} ms", us as f64 / 1e3),
            Gap::Spin(us) => format!("poll {:.1} ms", us as f64 / 1e3),
            Gap::Busy(us) => format!("busy {:.1} ms", us as f64 / 1e3),
            Gap::ReadBy(kept) => format!("read on the reader's core, {kept} kept"),
        }
    }

    fn wait(self) {
        match self {
            Gap::None | Gap::KeepTwo | Gap::ReadBy(_) => {}
            Gap::Sleep(us) => std::thread::sleep(Duration::from_micros(us)),
            Gap::Spin(us) | Gap::Busy(us) => {
                let t = Instant::now();
                let mut a = 1u64;
                while t.elapsed() < Duration::from_micros(us) {
                    if matches!(self, Gap::Spin(_)) {
                        std::hint::spin_loop();
                    } else {
                        for _ in 0..100 {
                            a = std::hint::black_box(a.wrapping_mul(6364136223846793005).wrapping_add(1));
                        }
                    }
                }
            }
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: idle_gap ENGINE(tract|ort) MODEL.onnx CORE [ROUNDS]".into());
    }
    let engine = EngineRegistry::builtin().canonical(&args[1])?;
    let core: usize = args[3].parse().map_err(|_| format!("bad core '{}'", args[3]))?;
    let rounds: usize = args
        .get(4)
        .map_or(Ok(4), |r| r.parse().map_err(|_| format!("bad rounds '{r}'")))?;
    let mut cfg = ProcessorConfig::new("p", WorkerKind::Inline);
    cfg.engine = engine.to_string();
    cfg.cores = Some(engine::host::CoreSet::new(vec![core]).ok_or("empty core set")?);
    engine::host::pin_current_thread(cfg.cores.as_ref().ok_or("no core")?)?;
    let e = EngineRegistry::builtin()
        .make(&cfg.engine_config())
        .map_err(|e| e.to_string())?;
    let bytes = std::fs::read(&args[2]).map_err(|e| format!("{}: {e}", args[2]))?;
    let graph = graph_ir::onnx::import_file(&args[2], &Default::default()).map_err(|e| format!("{}: {e}", args[2]))?;
    let input = graph.inputs()[0].out(0);
    let shape = graph
        .fact(input)
        .map(|f| f.shape.clone())
        .ok_or("input without a shape")?;
    let n = shape.iter().product();
    let x: Value = Tensor::from_shape(&shape, &scheduler_rt::npy::random_values(3, n))
        .map_err(|e| e.to_string())?
        .into_tvalue();
    let c = e.compile(&bytes)?;
    let mut gaps = vec![
        Gap::None,
        Gap::KeepTwo,
        Gap::Sleep(500),
        Gap::Sleep(2000),
        Gap::Sleep(5000),
        Gap::Spin(2000),
        Gap::Busy(2000),
    ];
    let reader = match args.get(5) {
        Some(r) => {
            let rc: usize = r.parse().map_err(|_| format!("bad reader core '{r}'"))?;
            gaps.extend([Gap::ReadBy(0), Gap::ReadBy(2)]);
            Some(reader_thread(rc)?)
        }
        None => None,
    };
    println!(
        "{} on core {core}, {} ({RUNS} runs per mode and round, median ms)",
        args[2],
        e.name()
    );
    for round in 0..rounds {
        let mut medians = Vec::new();
        for &g in &gaps {
            let mut ts = Vec::with_capacity(RUNS);
            let mut kept = std::collections::VecDeque::new();
            for _ in 0..RUNS {
                g.wait();
                let t = Instant::now();
                let out = c.run(tvec![x.clone()])?;
                ts.push(t.elapsed().as_secs_f64() * 1e3);
                if let (Gap::ReadBy(k), Some((tx, done))) = (g, &reader) {
                    tx.send((out, k)).map_err(|_| "the reader stopped")?;
                    done.recv().map_err(|_| "the reader stopped")?;
                    continue;
                }
                if matches!(g, Gap::KeepTwo) {
                    kept.push_back(out);
                    if kept.len() > 2 {
                        kept.pop_front();
                    }
                }
            }
            ts.sort_by(f64::total_cmp);
            medians.push(ts[RUNS / 2]);
        }
        let line: Vec<String> = gaps
            .iter()
            .zip(&medians)
            .map(|(g, m)| format!("{} {m:.3} (x{:.2})", g.name(), m / medians[0]))
            .collect();
        println!("round {round}: {}", line.join(", "));
    }
    Ok(())
}

type Reader = (
    std::sync::mpsc::Sender<(TVec<Value>, usize)>,
    std::sync::mpsc::Receiver<()>,
);

/// A thread pinned to `core` that reads every f32 of each run's outputs it is
/// sent, keeps the last `kept` of them alive and answers when done.
fn reader_thread(core: usize) -> Result<Reader, String> {
    let cores = engine::host::CoreSet::new(vec![core]).ok_or("empty core set")?;
    let (tx, rx) = std::sync::mpsc::channel::<(TVec<Value>, usize)>();
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if engine::host::pin_current_thread(&cores).is_err() {
            return;
        }
        let mut kept = std::collections::VecDeque::new();
        for (outs, k) in rx {
            let mut sum = 0.0f32;
            for v in &outs {
                if let Ok(xs) = v.try_as_plain_ram().and_then(|p| p.as_slice::<f32>()) {
                    sum += xs.iter().sum::<f32>();
                }
            }
            std::hint::black_box(sum);
            kept.push_back(outs);
            while kept.len() > k {
                kept.pop_front();
            }
            if done_tx.send(()).is_err() {
                return;
            }
        }
    });
    Ok((tx, done))
}
