//! A workload simulated on a device that heats (Splash §6): the device
//! profile's thermal emulator drives the simulated processors, and each
//! policy is judged by time to throttling, SLO satisfaction and
//! performance per temperature, with or without the profile's cloud
//! server as one more worker. What `simulate --thermal` runs.

use crate::core::estimator::{Estimator, EstimatorParams};
use crate::core::workload::Workload;
use crate::core::{SchedError, Scheduler};
use crate::predicted::CostError;
use crate::predicted::{self, LatencyTable};
use crate::registry::{PolicyError, Registry};
use crate::sim::{Latency, SimOptions, Truth, simulate_thermal};
use crate::splash::max_weighted_ppt::Eta;
use crate::splash::thermal::ThermalParams;
use crate::splash::thermal::driver::{ThermalDriver, WorkerHeat};
use crate::splash::thermal::emulator::ThermalError;
use crate::splash::thermal::profile::{CLOUD, CloudSpec, ThermalProfileError, thermal_params};
use crate::{Candidate, ModelUnits, OpSupport};
use graph_ir::Graph;
use predictor::DeviceModel;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ThermalRunError {
    #[error(transparent)]
    Predicted(#[from] CostError),
    #[error(transparent)]
    Profile(#[from] ThermalProfileError),
    #[error(transparent)]
    Thermal(#[from] ThermalError),
    #[error(transparent)]
    Sched(#[from] SchedError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("unknown policy '{spec}' for a thermal run (known: {known}; add +cloud to offer the cloud worker)")]
    UnknownPolicy { spec: String, known: String },
    #[error(transparent)]
    Workload(#[from] crate::core::workload::WorkloadError),
    #[error("{file}: policy '{spec}' needs the cloud worker, and the profile has no [cloud] section")]
    NoCloud { file: String, spec: String },
    #[error("no platform built for policy '{spec}'")]
    NoPlatform { spec: String },
}

/// Every processor of the device, and the cloud worker when asked for:
/// what each run on it starts from.
pub struct Platform {
    pub names: Vec<String>,
    units: Vec<ModelUnits>,
    truth: Truth,
    pub params: ThermalParams,
    /// The estimator with each model's largest subgraph registered.
    base: Estimator,
    /// Per model, its simulated isolated latency on its fastest processor.
    fastest: Vec<f64>,
    /// The cloud worker's index and link (Mbit/s), when it is offered.
    cloud: Option<(usize, f64)>,
}

impl Platform {
    /// The profile's processors (from `file`) with their predicted
    /// latencies, plus the cloud worker of `cloud` at its link rate (the
    /// profile's where `None`) when given.
    pub fn new(
        model: &DeviceModel,
        file: &str,
        graphs: &[Graph],
        workload: &Workload,
        cloud: Option<(&CloudSpec, Option<f64>)>,
    ) -> Result<Platform, ThermalRunError> {
        let (mut names, mut support, mut accel) = predicted::processors(model);
        if cloud.is_some() {
            names.push(CLOUD.into());
            support.push(OpSupport::All);
            accel.push(true);
        }
        let cloud_column = |c: &Candidate| match cloud {
            Some((spec, mbps)) => vec![Latency::exact(spec.latency_ms(c.io_bytes, c.flops, mbps))],
            None => Vec::new(),
        };
        let (units, table): (Vec<ModelUnits>, LatencyTable) =
            predicted::table(model, graphs, workload, &names, &support, &cloud_column)?;
        let params = thermal_params(file, model.profile().thermal.as_ref(), &names)?;
        let n = names.len();
        let truth = Truth {
            table,
            ..Truth::default()
        };
        let mut base = Estimator::new(EstimatorParams::default(), &accel, &units);
        predicted::register(&mut base, &units, &truth, n);
        let fastest = predicted::fastest_isolated_ms(&units, &truth, n);
        Ok(Platform {
            cloud: cloud.map(|(spec, mbps)| (n - 1, mbps.unwrap_or(spec.bandwidth_mbps.value))),
            names,
            units,
            truth,
            params,
            base,
            fastest,
        })
    }
}

/// One run's outcome.
#[derive(serde::Serialize)]
pub struct Row {
    pub policy: String,
    pub cloud: bool,
    pub camera_fps: f64,
    pub duration_s: f64,
    /// Seconds until a processor first throttled (slowed or switched
    /// off); `None`: not within the run.
    pub throttle_s: Option<f64>,
    pub slo_met: f64,
    pub completed: usize,
    pub submitted: usize,
    pub frames_done: u64,
    pub workers: Vec<WorkerHeat>,
    /// Per worker: subgraphs per second over its peak rise (FPS/°C).
    pub ppt: Vec<Option<f64>>,
    pub policy_notes: Vec<String>,
}

impl Row {
    /// `NAME` or `NAME+cloud`.
    pub fn label(&self) -> String {
        format!("{}{}", self.policy, if self.cloud { "+cloud" } else { "" })
    }
}

/// The policies a thermal run compares when none is named (Splash §6.2:
/// Band, Band+Cloud and Splash's two).
pub const DEFAULT_POLICIES: &str = "heft,heft+cloud,min-heat+cloud,max-weighted-ppt+cloud";

/// A policy spec `NAME` or `NAME+cloud`: the name and whether the cloud
/// worker is offered; fails naming the policies of `registry` a thermal
/// run knows.
pub fn split(registry: &Registry, spec: &str) -> Result<(String, bool), ThermalRunError> {
    let (name, cloud) = match spec.strip_suffix("+cloud") {
        Some(n) => (n, true),
        None => (spec, false),
    };
    if registry.get(name).is_none_or(|e| e.needs.render) {
        return Err(ThermalRunError::UnknownPolicy {
            spec: spec.into(),
            known: registry.names_where(|e| !e.needs.render).join(", "),
        });
    }
    Ok((name.to_string(), cloud))
}

/// Checks each policy spec of `policies` against `registry` (a `+cloud`
/// one needs a cloud: `has_cloud`, else fails naming the profile `file`);
/// whether any runs without and any with the cloud.
pub fn uses(
    registry: &Registry,
    policies: &[String],
    has_cloud: bool,
    file: &str,
) -> Result<[bool; 2], ThermalRunError> {
    let mut uses = [false; 2];
    for p in policies {
        let with_cloud = split(registry, p)?.1;
        if with_cloud && !has_cloud {
            return Err(ThermalRunError::NoCloud {
                file: file.into(),
                spec: p.clone(),
            });
        }
        uses[usize::from(with_cloud)] = true;
    }
    Ok(uses)
}

/// The platforms the runs use, each built once: without and with the cloud.
pub struct Platforms {
    pub local: Option<Platform>,
    pub cloud: Option<Platform>,
    /// Simulator options of every run.
    pub options: SimOptions,
    /// The ETA policies' factor (`None`: theirs).
    pub eta: Option<f64>,
    /// Where the runs' policies come from.
    pub registry: Registry,
}

impl Platforms {
    /// A run of policy `spec` (`NAME` or `NAME+cloud`) on `w`.
    pub fn run(&self, w: &Workload, spec: &str) -> Result<Row, ThermalRunError> {
        let (name, with_cloud) = split(&self.registry, spec)?;
        let p = if with_cloud { &self.cloud } else { &self.local };
        let p = p
            .as_ref()
            .ok_or_else(|| ThermalRunError::NoPlatform { spec: spec.into() })?;
        let slo = w.slos(&p.fastest);
        let mut options = self.registry.options_for(w, &p.names);
        if let Some(eta) = self.eta {
            options.set(Eta(eta));
        }
        let policy = self.registry.make(&name, &options)?;
        let mut sched = Scheduler::new(p.units.clone(), &p.names, policy, p.base.clone());
        let mut driver = ThermalDriver::new(p.params.clone())?;
        if let Some((w, mbps)) = p.cloud {
            driver.set_cloud(w, mbps);
        }
        let log = simulate_thermal(&mut sched, w, slo, &p.truth, self.options, Some(&mut driver))?;
        let met = log.completed.iter().filter(|c| c.met_slo()).count();
        let run_ms = log.end_ms.max(w.duration_s.unwrap_or(0.0) * 1e3);
        Ok(Row {
            ppt: driver.heat.iter().map(|h| h.ppt(run_ms, driver.ambient_c())).collect(),
            policy: name,
            cloud: with_cloud,
            camera_fps: w.camera.map_or(0.0, |c| c.fps),
            duration_s: w.duration_s.unwrap_or(log.end_ms / 1e3),
            throttle_s: driver.first_throttle_ms().map(|t| t / 1e3),
            slo_met: met as f64 / log.completed.len().max(1) as f64,
            completed: log.completed.len(),
            submitted: log.submitted.iter().sum(),
            frames_done: log.frames_done,
            workers: driver.heat.clone(),
            policy_notes: sched.policy_notes(),
        })
    }

    /// A run of each policy spec of `policies` on `w`, in order; `after`
    /// hears each as it ends.
    pub fn run_all(
        &self,
        w: &Workload,
        policies: &[String],
        after: &mut dyn FnMut(&Row),
    ) -> Result<Vec<Row>, ThermalRunError> {
        let mut rows = Vec::with_capacity(policies.len());
        for p in policies {
            let r = self.run(w, p)?;
            after(&r);
            rows.push(r);
        }
        Ok(rows)
    }

    /// Per policy of `policies`, the highest camera rate of `fps` at which it
    /// never throttled, with its SLO satisfaction there; `w`'s camera SLO
    /// scales with the period. `None` where `w` has no camera.
    #[allow(clippy::type_complexity)]
    pub fn fps_sweep(
        &self,
        w: &Workload,
        policies: &[String],
        fps: &[f64],
    ) -> Result<Option<Vec<Option<(f64, f64)>>>, ThermalRunError> {
        if w.camera.is_none() {
            return Ok(None);
        }
        let mut bests = Vec::with_capacity(policies.len());
        for p in policies {
            let mut best = None;
            for &f in fps {
                let mut wf = w.clone();
                wf.set_camera_fps(f, "fps")?;
                let r = self.run(&wf, p)?;
                if r.throttle_s.is_none() {
                    best = Some((f, r.slo_met));
                }
            }
            bests.push(best);
        }
        Ok(Some(bests))
    }
}
