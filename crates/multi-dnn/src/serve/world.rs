//! Real workers as an experiment's [`World`]: every policy runs on the
//! server's units and registered estimates, on the wall clock, with the
//! device's heat modelled beside them when a thermal setup is given.

use crate::core::Scheduler;
use crate::core::estimator::Estimator;
use crate::core::report::RunLog;
use crate::core::units::ModelUnits;
use crate::core::workload::Workload;
use crate::experiment::{Choose, Config, ExperimentError, World};
use crate::policy::Policy;
use crate::serve::Server;
use crate::splash::thermal::ThermalParams;
use crate::splash::thermal::driver::ThermalDriver;
use crate::splash::thermal::sensor::SysfsSensor;

/// The device's heat beside a served run: the emulator's parameters, a
/// real sensor for some workers, and each cloud worker's link (Mbit/s).
#[derive(Clone)]
pub struct ThermalSetup {
    pub params: ThermalParams,
    /// The sensor and, per worker, which of its readings is that worker's.
    pub sensor: Option<(SysfsSensor, Vec<Option<usize>>)>,
    /// (worker, link Mbit/s) of every cloud worker.
    pub cloud: Vec<(usize, f64)>,
}

/// `progress(label, seconds run, log so far, jobs in the system)`.
pub type Progress<'a> = dyn FnMut(&str, f64, &RunLog, usize) + 'a;

/// A server with the units and estimates a group of policies runs on.
pub struct ServeSetup<'a> {
    pub server: &'a Server,
    pub units: Vec<ModelUnits>,
    pub estimator: Estimator,
}

/// A served sweep.
pub struct ServeWorld<'a> {
    /// At least one; every server has the same processors.
    pub setups: Vec<ServeSetup<'a>>,
    /// Which of `setups` each policy runs on (index); `None`: the first.
    pub choose: Option<Choose>,
    pub thermal: Option<ThermalSetup>,
    pub progress: Box<Progress<'a>>,
    /// Each thermal run's label and its driver after the run.
    pub heat: Vec<(String, ThermalDriver)>,
}

impl<'a> ServeWorld<'a> {
    fn setup(&self, policy: &str) -> Result<&ServeSetup<'a>, ExperimentError> {
        crate::experiment::chosen(&self.setups, self.choose.as_ref(), policy, "server")
    }
}

impl World for ServeWorld<'_> {
    fn names(&self) -> &[String] {
        self.setups.first().map_or(&[], |s| &s.server.names)
    }

    fn scheduler(&self, name: &str, policy: Box<dyn Policy>) -> Result<Scheduler, ExperimentError> {
        let s = self.setup(name)?;
        Ok(Scheduler::new(
            s.units.clone(),
            &s.server.names,
            policy,
            s.estimator.clone(),
        ))
    }

    fn run(
        &mut self,
        config: &Config,
        sched: &mut Scheduler,
        workload: &Workload,
        slo_ms: Vec<Option<f64>>,
    ) -> Result<RunLog, ExperimentError> {
        let label = config.label();
        let mut driver = match &self.thermal {
            Some(t) => {
                let mut d = ThermalDriver::new(t.params.clone()).map_err(|e| ExperimentError::World(e.to_string()))?;
                if let Some((s, index)) = &t.sensor {
                    d.set_sensor(Box::new(s.clone()), index.clone())
                        .map_err(|e| ExperimentError::World(format!("temperature sensor: {e}")))?;
                }
                for (w, mbps) in &t.cloud {
                    d.set_cloud(*w, *mbps);
                }
                Some(d)
            }
            None => None,
        };
        let server = self.setup(config.policy)?.server;
        let progress = &mut self.progress;
        let log = server.run_thermal(
            sched,
            workload,
            slo_ms,
            &mut |t, log, in_system| progress(&label, t, log, in_system),
            driver.as_mut(),
        )?;
        if let Some(d) = driver {
            self.heat.push((label, d));
        }
        Ok(log)
    }
}
