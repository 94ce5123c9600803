//! Pinning threads to cores, checked against the cores the process had when
//! the runtime first looked (later pinning of the calling thread by the
//! runtime itself does not shrink that set).

use predictor::profiler::{CoreSet, affinity};
use std::sync::OnceLock;

static ALLOWED: OnceLock<Result<CoreSet, String>> = OnceLock::new();

/// The cores the process may run on, read once on first use.
pub fn allowed_cores() -> Result<CoreSet, String> {
    ALLOWED
        .get_or_init(|| affinity::available().map_err(|e| e.to_string()))
        .clone()
}

/// Checks that every core of `cores` is in [`allowed_cores`].
pub fn check(cores: &CoreSet) -> Result<(), String> {
    let allowed = allowed_cores()?;
    match cores.ids().iter().find(|c| !allowed.ids().contains(c)) {
        Some(core) => Err(format!(
            "core {core} does not exist or is not available (available: {allowed})"
        )),
        None => Ok(()),
    }
}

/// Restricts the calling thread to `cores` (threads it creates later inherit it).
#[cfg(target_os = "linux")]
pub fn pin_current_thread(cores: &CoreSet) -> Result<(), String> {
    check(cores)?;
    // SAFETY: the set is zero-initialised and only the ids of `cores`, which
    // `check` found among the process's cores (below CPU_SETSIZE), are set.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &c in cores.ids() {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(format!(
            "sched_setaffinity({cores}): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Restricts the calling thread to `cores`.
#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread(_cores: &CoreSet) -> Result<(), String> {
    Err("pinning threads to cores is only supported on Linux".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_narrow_then_wide_again() {
        let all = allowed_cores().unwrap();
        let first = CoreSet::new(vec![all.ids()[0]]).unwrap();
        pin_current_thread(&first).unwrap();
        pin_current_thread(&all).unwrap();
        assert_eq!(affinity::available().unwrap(), all);
        let e = pin_current_thread(&CoreSet::new(vec![1000]).unwrap()).unwrap_err();
        assert!(e.contains("core 1000"), "{e}");
    }
}
