//! Which worker backs which named processor, on which cores.
//!
//! Spec syntax (CLI `--processor`): `NAME=KIND[:CORES][,threads=N]` where
//! `KIND` is `inline` (runs on the calling thread, paper's CPU worker) or
//! `pool` (a thread created at start-up and pinned to `CORES`, paper's
//! DSP-style worker), `CORES` a Linux cpulist with optional `core` prefix
//! (`core1`, `0-1`, `0,2`) and `N` the engine's intra-op threads (default 1).
//! Example: `cpu0=inline:core0 cpu1=pool:core1`.

use crate::error::RuntimeError;
use predictor::profiler::CoreSet;
use std::str::FromStr;

/// How a processor's subgraphs are executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerKind {
    /// On the thread that called [`crate::Runtime::run`].
    Inline,
    /// On a dedicated thread created once at start-up.
    Pool,
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
}

impl ProcessorConfig {
    pub fn new(name: &str, kind: WorkerKind) -> ProcessorConfig {
        ProcessorConfig {
            name: name.to_string(),
            kind,
            cores: None,
            threads: 1,
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

impl FromStr for ProcessorConfig {
    type Err = RuntimeError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
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
        let kind = match kind {
            "inline" => WorkerKind::Inline,
            "pool" => WorkerKind::Pool,
            other => return Err(bad(&format!("unknown worker kind '{other}' (inline, pool)"))),
        };
        let cores = cores
            .map(|c| CoreSet::from_str(c.strip_prefix("core").unwrap_or(c)).map_err(|e| bad(&e.to_string())))
            .transpose()?;
        let mut threads = 1;
        for p in parts {
            let n = p
                .strip_prefix("threads=")
                .ok_or_else(|| bad(&format!("unknown option '{p}'")))?;
            threads = n
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| bad(&format!("threads must be a positive integer, got '{n}'")))?;
        }
        Ok(ProcessorConfig {
            name: name.to_string(),
            kind,
            cores,
            threads,
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
    }

    #[test]
    fn rejects_bad_specs_naming_the_part() {
        for (spec, part) in [
            ("cpu0", "NAME=KIND"),
            ("cpu0=gpu", "'gpu'"),
            ("cpu0=pool:corex", "x"),
            ("cpu0=pool,threads=0", "'0'"),
            ("cpu0=pool,fast", "'fast'"),
        ] {
            let e = spec.parse::<ProcessorConfig>().unwrap_err().to_string();
            assert!(e.contains(part), "{spec}: {e}");
        }
    }
}
