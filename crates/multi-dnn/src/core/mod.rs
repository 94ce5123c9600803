//! What every multi-DNN system shares: jobs, Band's units and subgraph
//! candidates ([`units`]), the one job queue and its [`Scheduler`], the
//! latency [`estimator`], request [`arrivals`], workloads and their file
//! format ([`workload`]), model groups ([`groups`]), input frames
//! ([`content`]) and the run's [`report`].

pub mod arrivals;
pub mod content;
pub mod estimator;
pub mod groups;
pub mod hooks;
mod jobs;
pub mod link;
pub mod policy;
pub mod report;
mod scheduler;
pub mod sections;
pub mod trace;
pub mod units;
pub mod workload;
pub mod workload_file;

pub use jobs::*;
pub use scheduler::*;
