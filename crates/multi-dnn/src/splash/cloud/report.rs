//! What the cloud worker adds to a run: the workers that failed and were
//! taken out of it, and what each cloud worker's latency model learnt,
//! recorded in the log ([`CloudLog`]) and reported as the `worker_failures`
//! and `cloud_links` sections.

use crate::core::report::{Report, RunLog};
use crate::core::sections::{LogSection, Place, Section};
use crate::splash::cloud::{LinkFit, PredictionErrors};
use serde::Serialize;
use std::fmt::Write as _;

/// The cloud workers' record of a run.
#[derive(Clone, Debug, Default)]
pub struct CloudLog {
    /// Cloud workers that failed during the run and were taken out of it:
    /// (ms, worker, reason).
    pub worker_failures: Vec<(f64, usize, String)>,
    /// Per cloud worker, its fitted link and the latency model's one-step
    /// errors: (worker, fit, errors).
    pub links: Vec<(usize, Option<LinkFit>, PredictionErrors)>,
}

impl LogSection for CloudLog {
    fn append(&mut self, mut other: CloudLog, offset_ms: f64) {
        for f in &mut other.worker_failures {
            f.0 += offset_ms;
        }
        self.worker_failures.append(&mut other.worker_failures);
        self.links.append(&mut other.links);
    }
}

/// A cloud worker's fitted communication model and how well compute +
/// communication predicted each call, beside an EMA of the total.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CloudLinkReport {
    pub processor: String,
    pub fit: Option<LinkFit>,
    pub errors: PredictionErrors,
}

impl CloudLinkReport {
    /// One line: the fitted link and the prediction errors.
    pub fn line(&self) -> String {
        let Some(f) = self.fit else {
            return format!("cloud link ({}): too few calls to fit", self.processor);
        };
        let up = match f.uplink_mbps() {
            Some(m) => format!(" (uplink about {m:.0} Mbit/s)"),
            None if !f.sizes_vary => {
                " (every call sent inputs of one size: the per-MB cost is not identifiable)".into()
            }
            None => String::new(),
        };
        let errors = if self.errors.calls > 0 {
            format!(
                "; one-step error over {} calls: compute + communication {:.1}%, EMA of the total {:.1}%",
                self.errors.calls,
                100.0 * self.errors.model_mape,
                100.0 * self.errors.ema_mape
            )
        } else {
            String::new()
        };
        format!(
            "cloud link ({}): communication fitted as {:.2} ms + {:.2} ms/MB in + {:.2} ms/MB out{up} on {} calls{errors}",
            self.processor, f.fixed_ms, f.ms_per_mb_in, f.ms_per_mb_out, f.calls
        )
    }
}

/// The report's `worker_failures` section: cloud workers taken out of the
/// run when they failed, (s, processor, reason).
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct WorkerFailures(pub Vec<(f64, String, String)>);

impl Section for WorkerFailures {
    fn key(&self) -> &'static str {
        "worker_failures"
    }

    fn place(&self) -> Place {
        Place::Checks
    }

    fn text(&self, _report: &Report) -> String {
        let mut s = String::new();
        for (t, w, reason) in &self.0 {
            let _ = writeln!(
                s,
                "{w} failed at {t:.1} s and was taken out of the run (probed from 0.5 s on, back when it answers; see its outages); its subgraph ran again elsewhere: {reason}"
            );
        }
        s
    }
}

/// The report's `cloud_links` section: what each cloud worker's latency
/// model learnt.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct CloudLinks(pub Vec<CloudLinkReport>);

impl Section for CloudLinks {
    fn key(&self) -> &'static str {
        "cloud_links"
    }

    fn place(&self) -> Place {
        Place::Checks
    }

    fn text(&self, _report: &Report) -> String {
        self.0.iter().map(|c| format!("{}\n", c.line())).collect()
    }
}

/// Adds the cloud's sections to `report` of `log`, a run on `workers`.
pub fn add_sections(report: &mut Report, log: &RunLog, workers: &[String]) {
    let name = |w: usize| workers.get(w).cloned().unwrap_or_default();
    let empty = CloudLog::default();
    let cloud = log.section::<CloudLog>().unwrap_or(&empty);
    report.add(WorkerFailures(
        cloud
            .worker_failures
            .iter()
            .map(|(t, w, r)| (t / 1e3, name(*w), r.clone()))
            .collect(),
    ));
    report.add(CloudLinks(
        cloud
            .links
            .iter()
            .map(|(w, fit, errors)| CloudLinkReport {
                processor: name(*w),
                fit: *fit,
                errors: *errors,
            })
            .collect(),
    ));
}
