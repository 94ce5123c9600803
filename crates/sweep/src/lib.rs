//! Sweeps: many trainings (models × seeds × precisions) from one sweep
//! file, run by a local process pool or on a Ray cluster through its Job
//! Submission API, recorded in a sweep directory so that a rerun finishes
//! only the missing jobs.
//!
//! A job is a list of `stretch` command lines (the branching a model needs,
//! `stretch train`, the fine-tuning of precision `profile`); this crate
//! knows them as arguments only, so the same job runs the same way on
//! locally and on a node.

pub mod driver;
pub mod error;
pub mod executor;
pub mod expand;
pub mod local;
pub mod ray;
pub mod spec;
pub mod state;

pub use driver::{Counts, Observer, Outcome, run};
pub use error::SweepError;
pub use executor::{Executor, Status, Stopped};
pub use expand::{Job, Layout, expand};
pub use local::LocalPool;
pub use ray::{ClusterInfo, RayCluster, RayConfig};
pub use spec::{Precision, SweepFile};
pub use state::{Lock, Phase, State};
