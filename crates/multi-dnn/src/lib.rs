//! Multi-DNN serving (Band, MobiSys '22 §4): several models' requests share
//! the processors. A model is cut into [`units`] by operator support and
//! into subgraph candidates; a request is a [`Job`] in one global queue; a
//! [`Policy`] decides which job's next subgraph runs on which worker. The
//! same [`Scheduler`] and policy objects run under real workers
//! ([`serve`]) and under a discrete-event simulator ([`sim`]): only the
//! clock and the workers differ.

pub mod core;
pub mod experiment;
pub mod heimdall;
pub mod policy;
pub mod predicted;
pub mod puzzle;
pub mod registry;
pub mod run_report;
pub mod serve;
pub mod sim;
pub mod splash;
pub mod thermal_run;

pub use self::core::estimator::{Estimator, EstimatorParams};
pub use self::core::units::{Candidate, ModelUnits, Region, Unit, UnitsError, analyze};
pub use self::core::{
    Assignment, Completed, Dispatch, Job, JobId, JobMap, JobSpec, Requeue, Scheduler, Task, View, WorkerState,
};
pub use policy::{Policy, PolicyEntry, PolicyOptions};
pub use registry::{Registry, policy_by_name};
pub use scheduler_rt::support::{OpSupport, op_key};

/// A set of processors (indices below 64) as a bit mask.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcSet(pub u64);

impl ProcSet {
    pub const ALL: ProcSet = ProcSet(u64::MAX);
    pub const EMPTY: ProcSet = ProcSet(0);

    pub fn single(p: usize) -> ProcSet {
        ProcSet(1 << p)
    }

    pub fn contains(self, p: usize) -> bool {
        p < 64 && self.0 & (1 << p) != 0
    }

    pub fn and(self, o: ProcSet) -> ProcSet {
        ProcSet(self.0 & o.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Members in increasing order.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        (0..64).filter(move |p| self.contains(*p))
    }
}

impl FromIterator<usize> for ProcSet {
    fn from_iter<I: IntoIterator<Item = usize>>(it: I) -> ProcSet {
        ProcSet(it.into_iter().fold(0, |m, p| m | (1 << p)))
    }
}
