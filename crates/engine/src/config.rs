//! What an engine is made from: the engine-relevant part of a processor's
//! configuration.

use std::str::FromStr;

/// The settings a registry entry ([`crate::EngineEntry`]) decides on and
/// makes an engine from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// The processor the engine serves, for messages.
    pub processor: String,
    /// The engine's registered name (`tract`, `ort`).
    pub engine: String,
    /// Intra-op threads.
    pub threads: usize,
    /// Whether intra-op threads spin while they wait for work.
    pub spin: Spin,
    /// A cloud worker's server and link; `None` for a local processor.
    pub remote: Option<Remote>,
}

impl EngineConfig {
    /// Engine `engine` with `threads` threads, local, not spinning, for a
    /// processor named `processor`.
    pub fn new(processor: &str, engine: &str, threads: usize) -> EngineConfig {
        EngineConfig {
            processor: processor.to_string(),
            engine: engine.to_string(),
            threads,
            spin: Spin::Off,
            remote: None,
        }
    }
}

/// Whether an engine's intra-op threads spin while they wait for work
/// (onnxruntime's `session.intra_op.allow_spinning` and
/// `session.force_spinning_stop`; tract starts no such threads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Spin {
    /// They block between parallel sections: each section pays a wake-up.
    #[default]
    Off,
    /// They spin while a run is in progress and stop when it returns, so
    /// that they leave the cores to the other processors' workers between
    /// runs of this session.
    Run,
    /// onnxruntime's default: they also spin for tens of ms after a run
    /// returns, taking time slices from whatever else runs on their cores.
    On,
}

impl Spin {
    pub fn as_str(self) -> &'static str {
        match self {
            Spin::Off => "off",
            Spin::Run => "run",
            Spin::On => "on",
        }
    }
}

impl FromStr for Spin {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(Spin::Off),
            "run" => Ok(Spin::Run),
            "on" => Ok(Spin::On),
            other => Err(format!("unknown spin '{other}' (off, run, on)")),
        }
    }
}

/// Where a cloud worker offloads to, and the link it emulates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remote {
    pub address: String,
    /// Link bandwidth in kbit/s; `None`: unshaped.
    pub kbps: Option<u64>,
    /// Round-trip time added to every request, µs.
    pub rtt_us: u64,
    /// A request unanswered after this long fails, ms.
    pub timeout_ms: u64,
}

impl Remote {
    pub const DEFAULT_TIMEOUT_MS: u64 = 2000;
    /// The link options [`Remote::set`] takes.
    pub const OPTIONS: [&'static str; 3] = ["mbps=", "rtt_ms=", "timeout_ms="];

    pub fn new(address: &str) -> Remote {
        Remote {
            address: address.to_string(),
            kbps: None,
            rtt_us: 0,
            timeout_ms: Self::DEFAULT_TIMEOUT_MS,
        }
    }

    /// Applies one of [`Remote::OPTIONS`] (`mbps=249`, ...).
    pub fn set(&mut self, option: &str) -> Result<(), String> {
        let num = |v: &str, what: &str| {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("{what} must be a non-negative number, got '{v}'"))
        };
        if let Some(v) = option.strip_prefix("mbps=") {
            let m = num(v, "mbps")?;
            if m == 0.0 {
                return Err("mbps must be positive".into());
            }
            self.kbps = Some((m * 1e3).round().max(1.0) as u64);
        } else if let Some(v) = option.strip_prefix("rtt_ms=") {
            self.rtt_us = (num(v, "rtt_ms")? * 1e3).round() as u64;
        } else if let Some(v) = option.strip_prefix("timeout_ms=") {
            self.timeout_ms = (num(v, "timeout_ms")?.round() as u64).max(1);
        } else {
            return Err(format!("unknown link option '{option}' (mbps=, rtt_ms=, timeout_ms=)"));
        }
        Ok(())
    }

    /// The link as the tail of a processor spec (`,remote=ADDR,rtt_ms=..`).
    pub fn spec(&self) -> String {
        let mut s = format!(
            ",remote={},rtt_ms={},timeout_ms={}",
            self.address,
            self.rtt_us as f64 / 1e3,
            self.timeout_ms
        );
        if let Some(k) = self.kbps {
            s += &format!(",mbps={}", k as f64 / 1e3);
        }
        s
    }
}
