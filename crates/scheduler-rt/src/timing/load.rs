//! Outside load for benchmarks: a thread burning CPU on chosen cores while
//! switched on.

use super::TimingError;
use engine::host;
use engine::host::CoreSet;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// A CPU-burning thread pinned to some cores; it burns while on and sleeps
/// in 1 ms steps while off. Starts off.
pub struct Interference {
    on: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl Interference {
    /// Starts the thread on the cores `spec` names (`core0`, `0-1`).
    pub fn start(spec: &str) -> Result<Interference, TimingError> {
        let cores =
            CoreSet::from_str(spec.strip_prefix("core").unwrap_or(spec)).map_err(|e| TimingError::LoadSpec {
                spec: spec.to_string(),
                reason: e.to_string(),
            })?;
        host::check(&cores).map_err(|e| TimingError::Load { reason: e.to_string() })?;
        let on = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (on2, stop2) = (on.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            host::pin_current_thread(&cores).map_err(|e| e.to_string())?;
            let mut x = 0u64;
            while !stop2.load(Ordering::Relaxed) {
                if on2.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                    }
                } else {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            Ok(())
        });
        Ok(Interference {
            on,
            stop,
            thread: Some(thread),
        })
    }

    /// Switches the load on or off.
    pub fn set(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }

    /// Stops the thread, reporting why it could not pin itself, if so.
    pub fn finish(mut self) -> Result<(), TimingError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| TimingError::Load {
                    reason: "the interference thread panicked".into(),
                })?
                .map_err(|reason| TimingError::Load { reason }),
            None => Ok(()),
        }
    }
}

impl Drop for Interference {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
