//! What a run on real workers records about the host beside its jobs: the
//! engine boundary's tensor buffers and copies, and the CPU time the
//! hypervisor stole; recorded in the log ([`HostLog`]) and reported as the
//! `tensor_pool` and `steal` sections.

use crate::core::report::{Report, RunLog};
use crate::core::sections::{LogSection, Place, Section};
use engine::host::Steal;
use engine::pool::PoolCounters;
use serde::Serialize;

/// The host's record of a real run.
#[derive(Clone, Debug, Default)]
pub struct HostLog {
    /// Whether the tensor pool was on, and the engine-boundary counters
    /// of the run.
    pub pool: Option<(bool, PoolCounters)>,
    /// CPU time the hypervisor gave other guests during the run
    /// (/proc/stat; `None` when unreadable).
    pub steal: Option<Steal>,
}

impl LogSection for HostLog {
    fn append(&mut self, mut other: HostLog, _offset_ms: f64) {
        self.pool = match (self.pool, other.pool) {
            (Some((on, mut a)), Some((_, b))) => {
                a += b;
                Some((on, a))
            }
            (a, b) => a.or(b),
        };
        match (&mut self.steal, other.steal.take()) {
            (Some(a), Some(b)) => a.merge(&b),
            (a, b) => *a = a.take().or(b),
        }
    }
}

/// Engine-boundary tensor buffers and copies of a run, in all and per
/// completed request.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PoolReport {
    pub enabled: bool,
    pub allocations: u64,
    pub reused: u64,
    pub bytes_copied: u64,
    pub allocations_per_request: f64,
    pub bytes_copied_per_request: f64,
    /// Minor page faults of the whole process during the run.
    pub page_faults: u64,
    pub page_faults_per_request: f64,
}

impl PoolReport {
    /// The counters of a run that completed `completed` requests.
    pub fn new(enabled: bool, c: PoolCounters, completed: usize) -> PoolReport {
        let n = completed.max(1) as f64;
        PoolReport {
            enabled,
            allocations: c.allocations,
            reused: c.reused,
            bytes_copied: c.bytes_copied,
            allocations_per_request: c.allocations as f64 / n,
            bytes_copied_per_request: c.bytes_copied as f64 / n,
            page_faults: c.page_faults,
            page_faults_per_request: c.page_faults as f64 / n,
        }
    }

    /// One line: per request, then in all.
    pub fn line(&self) -> String {
        format!(
            "engine boundary (tensor pool {}): {:.2} buffer allocations and {:.1} KB copied per request ({} allocated, {} reused in all); {:.1} minor page faults per request (whole process)",
            if self.enabled { "on" } else { "off" },
            self.allocations_per_request,
            self.bytes_copied_per_request / 1e3,
            self.allocations,
            self.reused,
            self.page_faults_per_request
        )
    }
}

/// The report's `tensor_pool` section: engine-boundary buffers and copies
/// (real runs only; `null` otherwise).
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct TensorPool(pub Option<PoolReport>);

impl Section for TensorPool {
    fn key(&self) -> &'static str {
        "tensor_pool"
    }

    fn place(&self) -> Place {
        Place::Checks
    }

    fn text(&self, _report: &Report) -> String {
        self.0.as_ref().map_or(String::new(), |p| format!("{}\n", p.line()))
    }
}

/// The report's `steal` section: CPU time the hypervisor stole during the
/// run, per CPU (real runs; `null` when simulated or unreadable).
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct StealSection(pub Option<Steal>);

impl Section for StealSection {
    fn key(&self) -> &'static str {
        "steal"
    }

    fn place(&self) -> Place {
        Place::Host
    }

    fn text(&self, _report: &Report) -> String {
        self.0.as_ref().map_or(String::new(), |st| format!("{}\n", st.line()))
    }
}

/// Adds the host's sections to `report` of `log`.
pub fn add_sections(report: &mut Report, log: &RunLog) {
    let host = log.section::<HostLog>();
    let completed = log.completed.len();
    report.add(TensorPool(
        host.and_then(|h| h.pool)
            .map(|(enabled, c)| PoolReport::new(enabled, c, completed)),
    ));
    report.add(StealSection(host.and_then(|h| h.steal.clone())));
}
