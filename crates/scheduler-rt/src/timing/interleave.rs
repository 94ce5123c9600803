//! `stretch bench`'s timing loop: every configuration warmed up, then
//! timed interleaved in blocks, and the adaptive runtime run until its
//! moved subgraphs are home again.

use super::TimingError;
use super::load::Interference;
use crate::{Runtime, Trace};
use engine::host;
use engine::host::CoreSet;
use std::time::{Duration, Instant};
use tract_core::prelude::{IntoTValue, Tensor};

/// How long the benchmark pauses after every block of a configuration whose
/// engine threads spin after a run ([`Spin::On`]): onnxruntime's intra-op
/// threads keep spinning for a while after a run ends (their CPU time in
/// `/proc/self/task/*/schedstat` keeps growing), and must stop before the
/// next configuration is timed: the pause outlasts that spin.
pub const SETTLE_AFTER_SPINNING: Duration = Duration::from_millis(100);

/// A timed run's trace with its start in seconds since the first timed run.
pub type TimedTrace = (f64, Trace);

/// Per runtime: its latencies (ms) and its kept traces.
pub type Timings = (Vec<Vec<f64>>, Vec<Vec<TimedTrace>>);

/// What the timing loop reports as it goes.
pub trait Progress {
    /// The number of runs (timed or not) the loop will make.
    fn begin(&self, runs: u64);
    /// What the loop is doing now.
    fn phase(&self, what: String);
    /// One more run made.
    fn advance(&self);
}

/// Reports nothing.
impl Progress for () {
    fn begin(&self, _: u64) {}
    fn phase(&self, _: String) {}
    fn advance(&self) {}
}

/// How many runs each configuration gets, and in what blocks.
#[derive(Clone, Copy, Debug)]
pub struct Rounds {
    /// Timed runs per configuration.
    pub runs: usize,
    /// Untimed runs per configuration before the first round.
    pub warmup: usize,
    /// Timed runs per configuration and round.
    pub block: usize,
}

/// Warms every runtime up (unloaded), then times `rounds.runs` runs of each
/// under `load`, interleaved: each round runs every runtime for a block of
/// `rounds.block` timed runs (after one untimed run), starting one runtime
/// further along each round, so that a change in the machine's speed during
/// the benchmark (other tenants, clock frequency) falls on every
/// configuration alike. `runtimes` are (name, runtime, whether its engine
/// threads spin after a run); [`SETTLE_AFTER_SPINNING`] follows the warm-up
/// and every block of one that spins. Returns one latency list per runtime
/// and, for the runtimes in `keep`, every timed run's trace with its start
/// in seconds since the first timed run (empty for the others).
pub fn time_interleaved(
    runtimes: &[(&str, Runtime, bool)],
    x: &Tensor,
    args: Rounds,
    cores: &CoreSet,
    load: Option<&Interference>,
    keep: &[usize],
    progress: &dyn Progress,
) -> Result<Timings, TimingError> {
    let block = args.block.clamp(1, args.runs);
    let rounds = args.runs.div_ceil(block);
    let total = (runtimes.len() * (args.runs + args.warmup + rounds)) as u64;
    progress.begin(total);
    let run = |rt: &Runtime| -> Result<Trace, TimingError> { Ok(rt.run_traced(vec![x.clone().into_tvalue()])?.1) };
    let unpin = || host::pin_current_thread(cores).map_err(|e| TimingError::Pin { reason: e.to_string() });
    let settle = |spins: bool| {
        if spins {
            std::thread::sleep(SETTLE_AFTER_SPINNING);
        }
    };
    for (name, rt, spins) in runtimes {
        progress.phase(format!("warm-up: {name}"));
        unpin()?;
        for _ in 0..args.warmup {
            run(rt)?;
            progress.advance();
        }
        settle(*spins);
    }
    progress.phase(format!("{rounds} rounds of {block} runs of each configuration"));
    if let Some(l) = load {
        l.set(true);
    }
    let mut ms = vec![Vec::with_capacity(args.runs); runtimes.len()];
    let mut traces = vec![Vec::new(); runtimes.len()];
    let start = Instant::now();
    for round in 0..rounds {
        for k in 0..runtimes.len() {
            let i = (round + k) % runtimes.len();
            let (_, rt, spins) = &runtimes[i];
            unpin()?;
            run(rt)?;
            progress.advance();
            for _ in 0..block.min(args.runs - ms[i].len()) {
                let t = Instant::now();
                let trace = run(rt)?;
                ms[i].push(t.elapsed().as_secs_f64() * 1e3);
                if keep.contains(&i) {
                    traces[i].push((t.duration_since(start).as_secs_f64(), trace));
                }
                progress.advance();
            }
            settle(*spins);
        }
    }
    if let Some(l) = load {
        l.set(false);
    }
    Ok((ms, traces))
}

/// Runs `rt` unloaded, after `offset_s`, until every subgraph is back on
/// its home processor or `limit_s` passed; returns the traces.
pub fn recover(rt: &Runtime, x: &Tensor, offset_s: f64, limit_s: f64) -> Result<Vec<TimedTrace>, TimingError> {
    let start = Instant::now();
    let home = |rt: &Runtime| {
        (0..rt.partition().subgraphs.len())
            .all(|i| rt.placed_on(i) == Some(rt.partition().subgraphs[i].processor.as_str()))
    };
    let mut traces = Vec::new();
    while !home(rt) && start.elapsed().as_secs_f64() < limit_s {
        let t = start.elapsed().as_secs_f64();
        traces.push((offset_s + t, rt.run_traced(vec![x.clone().into_tvalue()])?.1));
    }
    Ok(traces)
}
