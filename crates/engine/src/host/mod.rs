//! The host the engines run on: sets of cores and pinning threads to them
//! ([`cores`]), and the CPU time the hypervisor steals ([`steal`]).

pub mod cores;
pub mod steal;

pub use cores::{
    CoreSet, HostError, allowed_cores, available, check, check_within, pin_current_thread, pin_current_thread_within,
};
pub use steal::{Meter, Steal};
