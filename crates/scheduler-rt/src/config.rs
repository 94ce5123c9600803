//! Which worker backs which named processor, on which cores.
//!
//! Spec syntax (CLI `--processor`):
//! `NAME=KIND[:CORES][,threads=N][,alone_threads=N][,engine=ENGINE][,wait=WAIT][,spin=SPIN]` where `KIND` is `inline`
//! (runs on the calling thread, paper's CPU worker), `pool` (a thread created
//! at start-up and pinned to `CORES`, paper's DSP-style worker) or `queue`
//! (an asynchronous in-order queue served by its own thread, paper's
//! GPU-style worker), `CORES` a Linux cpulist with optional `core` prefix
//! (`core1`, `0-1`, `0,2`), `N` the engine's intra-op threads (default 1)
//! and `ENGINE` a registered engine's name ([`engine::EngineRegistry`]:
//! `tract`, the default, or `ort`, onnxruntime with feature `ort`);
//! `SPIN` `off` (default), `run` or `on`: see [`Spin`].
//! Example: `cpu0=inline:core0 cpu1=pool:core1,engine=ort`.
//! A cloud worker offloads to a `stretch worker` server instead:
//! `cloud=pool,remote=127.0.0.1:7000[,mbps=249][,rtt_ms=4][,timeout_ms=2000]`
//! (the link shaped to `mbps` and `rtt_ms`; a request unanswered after
//! `timeout_ms` fails).

use crate::error::RuntimeError;
use engine::host::CoreSet;
use engine::{EngineConfig, EngineRegistry, Remote, Spin};
use std::str::FromStr;

/// How a processor's subgraphs are executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerKind {
    /// On the thread that called [`crate::Runtime::run`].
    Inline,
    /// On a dedicated thread created once at start-up.
    Pool,
    /// Submitted to an asynchronous in-order queue served by its own thread;
    /// submission never blocks and completion is signalled back.
    Queue,
}

impl WorkerKind {
    /// The spelling used in specs and config files.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerKind::Inline => "inline",
            WorkerKind::Pool => "pool",
            WorkerKind::Queue => "queue",
        }
    }
}

impl FromStr for WorkerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "inline" => Ok(WorkerKind::Inline),
            "pool" => Ok(WorkerKind::Pool),
            "queue" => Ok(WorkerKind::Queue),
            other => Err(format!("unknown worker kind '{other}' (inline, pool, queue)")),
        }
    }
}

/// How a processor's thread waits for its next piece of work while a
/// request of the runtime ([`crate::Runtime`]: `stretch run`, `bench`) is
/// in flight; between requests, and in the multi-DNN server, every thread
/// blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Wait {
    /// Polls [`crate::spin::POLL_BEFORE_BLOCKING`], then blocks: a blocked
    /// thread pays a wake-up (tens of µs on a VM) at each hand-off.
    #[default]
    Block,
    /// Polls (yielding its core between checks) until the work arrives or
    /// the request ends: no wake-up between the subgraphs of a request.
    /// For a pool or queue worker, the wait for its next job; for an
    /// inline processor, the scheduler's wait for other workers' results.
    Poll,
}

impl Wait {
    pub fn as_str(self) -> &'static str {
        match self {
            Wait::Block => "block",
            Wait::Poll => "poll",
        }
    }
}

impl FromStr for Wait {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "block" => Ok(Wait::Block),
            "poll" => Ok(Wait::Poll),
            other => Err(format!("unknown wait '{other}' (block, poll)")),
        }
    }
}

/// One named processor of the runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessorConfig {
    pub name: String,
    pub kind: WorkerKind,
    /// Cores the worker is pinned to; `None` leaves affinity alone.
    pub cores: Option<CoreSet>,
    /// Intra-op threads of the processor's engine.
    pub threads: usize,
    /// Intra-op threads for subgraphs that nothing else of a request runs
    /// beside ([`crate::Partition::alone`]: stem, head, stages kept whole,
    /// merges), so the other processors' idle cores help with them; their
    /// extra threads may run on any core the processors use. `None`:
    /// `threads`.
    pub alone_threads: Option<usize>,
    /// The engine's registered name (`tract`, `ort`), checked against the
    /// registry when parsed.
    pub engine: String,
    /// How its thread waits while a request is in flight.
    pub wait: Wait,
    /// Whether the engine's intra-op threads spin while they wait for work.
    pub spin: Spin,
    /// A cloud worker's server and link; `None` for a local processor.
    pub remote: Option<Remote>,
    /// The precision this processor computes in: a model whose
    /// `stretch.precisions` metadata (absent: fp32 everywhere) gives it
    /// another one is refused. `None`: any.
    pub precision: Option<predictor::Precision>,
}

impl ProcessorConfig {
    pub fn new(name: &str, kind: WorkerKind) -> ProcessorConfig {
        ProcessorConfig {
            name: name.to_string(),
            kind,
            cores: None,
            threads: 1,
            alone_threads: None,
            engine: "tract".to_string(),
            wait: Wait::Block,
            spin: Spin::Off,
            remote: None,
            precision: None,
        }
    }

    /// This configuration as a spec that [`FromStr`] parses back.
    pub fn spec(&self) -> String {
        let cores = self.cores.as_ref().map(|c| format!(":{c}")).unwrap_or_default();
        format!(
            "{}={}{cores},threads={}{},engine={}{}{}{}{}",
            self.name,
            self.kind.as_str(),
            self.threads,
            self.alone_threads
                .map_or(String::new(), |t| format!(",alone_threads={t}")),
            self.engine,
            if self.wait == Wait::Block {
                String::new()
            } else {
                format!(",wait={}", self.wait.as_str())
            },
            if self.spin == Spin::Off {
                String::new()
            } else {
                format!(",spin={}", self.spin.as_str())
            },
            self.remote.as_ref().map_or(String::new(), Remote::spec),
            self.precision.map_or(String::new(), |p| format!(",precision={p}"))
        )
    }

    /// What its engine is made from ([`EngineRegistry::make`]).
    pub fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            processor: self.name.clone(),
            engine: self.engine.clone(),
            threads: self.threads,
            spin: self.spin,
            remote: self.remote.clone(),
        }
    }

    /// `cpu0` inline plus `cpu1..cpu{n-1}` as pool workers, unpinned.
    pub fn default_set(n: usize) -> Vec<ProcessorConfig> {
        (0..n.max(1))
            .map(|i| {
                let kind = if i == 0 { WorkerKind::Inline } else { WorkerKind::Pool };
                ProcessorConfig::new(&format!("cpu{i}"), kind)
            })
            .collect()
    }
}

/// Parses a spec with the built-in engines ([`EngineRegistry::builtin`]).
impl FromStr for ProcessorConfig {
    type Err = RuntimeError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        ProcessorConfig::parse(spec, &EngineRegistry::builtin())
    }
}

impl ProcessorConfig {
    /// Parses a spec (module docs); `engine=` must name an engine of `engines`.
    pub fn parse(spec: &str, engines: &EngineRegistry) -> Result<ProcessorConfig, RuntimeError> {
        let bad = |reason: &str| RuntimeError::BadSpec {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let (name, rest) = spec.split_once('=').ok_or_else(|| bad("expected NAME=KIND[:CORES]"))?;
        if name.is_empty() {
            return Err(bad("the processor name is empty"));
        }
        let mut parts = rest.split(',');
        let head = parts.next().unwrap_or_default();
        let (kind, cores) = match head.split_once(':') {
            Some((k, c)) => (k, Some(c)),
            None => (head, None),
        };
        let kind = WorkerKind::from_str(kind).map_err(|e| bad(&e))?;
        let cores = cores
            .map(|c| CoreSet::from_str(c.strip_prefix("core").unwrap_or(c)).map_err(|e| bad(&e.to_string())))
            .transpose()?;
        let mut threads = 1;
        let mut alone_threads = None;
        let mut engine = "tract";
        let mut wait = Wait::Block;
        let mut spin = Spin::Off;
        let mut remote: Option<Remote> = None;
        let mut precision = None;
        let mut link = Vec::new();
        for p in parts {
            if let Some(n) = p.strip_prefix("threads=") {
                threads = n
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad(&format!("threads must be a positive integer, got '{n}'")))?;
            } else if let Some(n) = p.strip_prefix("alone_threads=") {
                alone_threads = Some(
                    n.parse::<usize>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| bad(&format!("alone_threads must be a positive integer, got '{n}'")))?,
                );
            } else if let Some(e) = p.strip_prefix("engine=") {
                engine = engines.canonical(e).map_err(|e| bad(&e.to_string()))?;
            } else if let Some(w) = p.strip_prefix("wait=") {
                wait = Wait::from_str(w).map_err(|e| bad(&e))?;
            } else if let Some(v) = p.strip_prefix("spin=") {
                spin = Spin::from_str(v).map_err(|e| bad(&e))?;
            } else if let Some(v) = p.strip_prefix("precision=") {
                precision = Some(predictor::Precision::from_str(v).map_err(|e| bad(&e.to_string()))?);
            } else if let Some(a) = p.strip_prefix("remote=") {
                remote = Some(Remote::new(a));
            } else if Remote::OPTIONS.iter().any(|o| p.starts_with(o)) {
                link.push(p);
            } else {
                return Err(bad(&format!(
                    "unknown option '{p}' (threads=N, alone_threads=N, engine=tract|ort, wait=block|poll, spin=off|run|on, precision=fp32|fp16|int8, remote=ADDR, mbps=, rtt_ms=, timeout_ms=)"
                )));
            }
        }
        if let Some(r) = remote.as_mut() {
            for p in link {
                r.set(p).map_err(|e| bad(&e))?;
            }
        } else if let Some(p) = link.first() {
            return Err(bad(&format!("'{p}' applies to a cloud worker only (give remote=ADDR)")));
        }
        Ok(ProcessorConfig {
            name: name.to_string(),
            kind,
            cores,
            threads,
            alone_threads,
            engine: engine.to_string(),
            wait,
            spin,
            remote,
            precision,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        let c: ProcessorConfig = "cpu1=pool:core1,threads=2".parse().unwrap();
        assert_eq!(c.name, "cpu1");
        assert_eq!(c.kind, WorkerKind::Pool);
        assert_eq!(c.cores.unwrap().ids(), [1]);
        assert_eq!(c.threads, 2);
        let c: ProcessorConfig = "cpu0=inline".parse().unwrap();
        assert_eq!((c.kind, c.cores, c.threads), (WorkerKind::Inline, None, 1));
        assert_eq!(c.engine, "tract");
        let c: ProcessorConfig = "cpu0=inline:0,engine=ort,alone_threads=2".parse().unwrap();
        assert_eq!((c.threads, c.alone_threads, c.wait), (1, Some(2), Wait::Block));
        let c: ProcessorConfig = "cpu1=pool:1,wait=poll".parse().unwrap();
        assert_eq!((c.wait, c.spin), (Wait::Poll, Spin::Off));
        assert_eq!(c.spec().parse::<ProcessorConfig>().unwrap(), c);
        for (v, spin) in [("on", Spin::On), ("run", Spin::Run)] {
            let c: ProcessorConfig = format!("ref=inline:0-1,threads=2,engine=ort,spin={v}").parse().unwrap();
            assert_eq!(c.spin, spin);
            assert_eq!(c.spec().parse::<ProcessorConfig>().unwrap(), c);
        }
        let c: ProcessorConfig = "gpu=queue:0-1,engine=ort,threads=2".parse().unwrap();
        assert_eq!((c.kind, c.engine.as_str(), c.threads), (WorkerKind::Queue, "ort", 2));
        assert_eq!(c.spec().parse::<ProcessorConfig>().unwrap(), c);
        let c: ProcessorConfig = "cloud=pool,remote=127.0.0.1:7000,mbps=12.5,rtt_ms=4".parse().unwrap();
        let r = c.remote.clone().unwrap();
        assert_eq!(
            (r.address.as_str(), r.kbps, r.rtt_us),
            ("127.0.0.1:7000", Some(12_500), 4000)
        );
        assert_eq!(c.spec().parse::<ProcessorConfig>().unwrap(), c);
        let c: ProcessorConfig = "dsp=pool:1,precision=int8".parse().unwrap();
        assert_eq!(c.precision, Some(predictor::Precision::Int8));
        assert_eq!(c.spec().parse::<ProcessorConfig>().unwrap(), c);
    }

    #[test]
    fn rejects_bad_specs_naming_the_part() {
        for (spec, part) in [
            ("cpu0", "NAME=KIND"),
            ("cpu0=gpu", "'gpu'"),
            ("cpu0=pool:corex", "x"),
            ("cpu0=pool,threads=0", "'0'"),
            ("cpu0=pool,alone_threads=x", "alone_threads"),
            ("cpu0=pool,wait=spin", "unknown wait 'spin'"),
            ("cpu0=pool,spin=yes", "unknown spin 'yes' (off, run, on)"),
            ("cpu0=pool,fast", "'fast'"),
            ("cpu0=pool,engine=trt", "'trt'"),
            ("cpu0=pool,precision=int4", "unknown precision `int4`"),
            ("cpu0=pool,mbps=10", "cloud worker only"),
            ("c=pool,remote=h:1,mbps=0", "mbps must be positive"),
        ] {
            let e = spec.parse::<ProcessorConfig>().unwrap_err().to_string();
            assert!(e.contains(part), "{spec}: {e}");
        }
    }
}
