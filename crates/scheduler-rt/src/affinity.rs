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
    affinity::check_within(cores, &allowed_cores()?).map_err(|e| e.to_string())
}

/// Restricts the calling thread to `cores` (threads it creates later inherit it).
pub fn pin_current_thread(cores: &CoreSet) -> Result<(), String> {
    affinity::pin_current_thread_within(cores, &allowed_cores()?).map_err(|e| e.to_string())
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
