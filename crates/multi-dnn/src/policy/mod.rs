//! Scheduling policies (Band §4.3.1), one per file. A policy sees a
//! [`View`](crate::core::View) (time, queue, jobs, workers' states, estimates) and returns
//! assignments; it never reads a clock or touches a thread, so the
//! simulator runs the very same objects as the runtime.

pub mod blocking;
pub mod fixed;
pub mod heft;
pub mod lst;
pub mod plan;
pub mod round_robin;
pub mod sel;

pub use crate::core::policy::{Needs, Policy, PolicyEntry, PolicyOptions};
pub use fixed::Fixed;
pub use heft::Heft;
pub use lst::Lst;
pub use round_robin::RoundRobin;
pub use sel::Sel;
