//! A run's whole report: the core's figures ([`Report::new`]) and the
//! sections of every extension, in the order the JSON report lists them
//! (`render`, `moves`, `worker_failures`, `cloud_links`, `tensor_pool`,
//! `steal`).

use crate::core::report::{Report, RunLog};
use crate::core::workload::{Arrival, Workload};
use crate::{heimdall, serve, splash};

/// The report of one run of `w` under policy `p` on processors `names`
/// with SLOs `slo` (per app): over the arrival window, or until the last
/// job finished when the workload counts requests. `kind` is `measured` or
/// `simulated`.
pub fn report(
    kind: &'static str,
    p: &str,
    w: &Workload,
    slo: &[Option<f64>],
    names: &[String],
    log: &RunLog,
) -> Report {
    let duration = w.duration_s.map_or(log.end_ms, |d| d * 1e3);
    let apps: Vec<(String, Option<f64>)> = w.apps.iter().map(|x| x.name.clone()).zip(slo.iter().copied()).collect();
    let frames = w.apps.iter().any(|x| matches!(x.arrival, Arrival::Frame { .. }));
    let mut report = Report::new(kind, p, &apps, names, log, duration, frames);
    heimdall::report::add_sections(&mut report, log, w, names, duration);
    splash::cloud::report::add_sections(&mut report, log, names);
    serve::host::add_sections(&mut report, log);
    report
}
