//! Sets of CPU cores and pinning the calling thread to them.

use super::error::ProfilerError;
use std::fmt;
use std::str::FromStr;

/// A non-empty set of CPU core ids, kept sorted and without duplicates.
///
/// Parsed from and displayed as a Linux cpulist: `0`, `0,2`, `0-3`, `0-1,4`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CoreSet(Vec<usize>);

/// Core ids above this are rejected when parsing (Linux `CPU_SETSIZE`).
const MAX_CORE: usize = 1023;

impl CoreSet {
    /// The set of the given ids; `None` when `ids` is empty.
    pub fn new(mut ids: Vec<usize>) -> Option<CoreSet> {
        ids.sort_unstable();
        ids.dedup();
        (!ids.is_empty()).then_some(CoreSet(ids))
    }

    pub fn ids(&self) -> &[usize] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a core set has at least one core.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromStr for CoreSet {
    type Err = ProfilerError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let bad = |reason: String| ProfilerError::CoreSpec {
            spec: spec.to_string(),
            reason,
        };
        let id = |s: &str| -> Result<usize, ProfilerError> {
            let v: usize = s
                .trim()
                .parse()
                .map_err(|_| bad(format!("`{}` is not a core number", s.trim())))?;
            if v > MAX_CORE {
                return Err(bad(format!("core {v} is above {MAX_CORE}")));
            }
            Ok(v)
        };
        let mut ids = Vec::new();
        for part in spec.split(',') {
            match part.split_once('-') {
                Some((lo, hi)) => {
                    let (lo, hi) = (id(lo)?, id(hi)?);
                    if lo > hi {
                        return Err(bad(format!("range {lo}-{hi} is empty")));
                    }
                    ids.extend(lo..=hi);
                }
                None => ids.push(id(part)?),
            }
        }
        CoreSet::new(ids).ok_or_else(|| bad("no cores given".into()))
    }
}

impl fmt::Display for CoreSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if end == start {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

/// The cores this process may run on.
#[cfg(target_os = "linux")]
pub fn available() -> Result<CoreSet, ProfilerError> {
    // SAFETY: `set` is a plain bit set that sched_getaffinity fills; the size
    // passed is its own.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(ProfilerError::Affinity {
                cores: "(query)".into(),
                error: std::io::Error::last_os_error(),
            });
        }
        set
    };
    // SAFETY: CPU_ISSET reads a bit of an initialised set; ids stay below CPU_SETSIZE.
    let ids = (0..=MAX_CORE)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect();
    CoreSet::new(ids).ok_or(ProfilerError::AffinityUnsupported)
}

/// The cores this process may run on.
#[cfg(not(target_os = "linux"))]
pub fn available() -> Result<CoreSet, ProfilerError> {
    Err(ProfilerError::AffinityUnsupported)
}

/// Checks that every core of `cores` is in `allowed` and below Linux's
/// `CPU_SETSIZE`.
///
/// Fails with [`ProfilerError::CoreUnavailable`] naming the first core that
/// is not.
pub fn check_within(cores: &CoreSet, allowed: &CoreSet) -> Result<(), ProfilerError> {
    match cores
        .ids()
        .iter()
        .find(|&&c| c > MAX_CORE || !allowed.ids().contains(&c))
    {
        Some(&core) => Err(ProfilerError::CoreUnavailable {
            core,
            available: allowed.to_string(),
        }),
        None => Ok(()),
    }
}

/// Restricts the calling thread to `cores`. Threads it creates afterwards
/// (an engine's thread pool) inherit the restriction.
///
/// Fails with [`ProfilerError::CoreUnavailable`] naming the first core that
/// this process may not run on (missing or excluded by its affinity mask).
pub fn pin_current_thread(cores: &CoreSet) -> Result<(), ProfilerError> {
    pin_current_thread_within(cores, &available()?)
}

/// Restricts the calling thread to `cores` after checking them against
/// `allowed` (a set read earlier, e.g. before the caller pinned itself).
#[cfg(target_os = "linux")]
pub fn pin_current_thread_within(cores: &CoreSet, allowed: &CoreSet) -> Result<(), ProfilerError> {
    check_within(cores, allowed)?;
    // SAFETY: the set is zero-initialised and only bits below CPU_SETSIZE
    // (checked by `check_within`) are set.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &c in cores.ids() {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(ProfilerError::Affinity {
            cores: cores.to_string(),
            error: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Restricts the calling thread to `cores`.
#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread_within(_cores: &CoreSet, _allowed: &CoreSet) -> Result<(), ProfilerError> {
    Err(ProfilerError::AffinityUnsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_cpulists() {
        let s: CoreSet = "3,0-1, 2,7".parse().unwrap();
        assert_eq!(s.ids(), [0, 1, 2, 3, 7]);
        assert_eq!(s.to_string(), "0-3,7");
        assert_eq!("5".parse::<CoreSet>().unwrap().to_string(), "5");
    }

    #[test]
    fn rejects_bad_specs_with_the_offending_part() {
        for (spec, want) in [("", "not a core"), ("a", "`a`"), ("3-1", "3-1"), ("4096", "above")] {
            let e = spec.parse::<CoreSet>().unwrap_err().to_string();
            assert!(e.contains(want), "{spec}: {e}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn pins_to_an_available_core_and_rejects_a_missing_one() {
        let allowed = available().unwrap();
        let first = CoreSet::new(vec![allowed.ids()[0]]).unwrap();
        std::thread::spawn(move || pin_current_thread(&first))
            .join()
            .unwrap()
            .unwrap();
        let missing = CoreSet::new(vec![MAX_CORE]).unwrap();
        if !allowed.ids().contains(&MAX_CORE) {
            let e = pin_current_thread(&missing).unwrap_err().to_string();
            assert!(e.contains("core 1023 is not available"), "{e}");
        }
    }
}
