//! Sets of CPU cores and pinning the calling thread to them, checked
//! against the cores the process had when it first looked (pinning the
//! calling thread later does not shrink that set).

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;
use thiserror::Error;

/// An error about cores: a cpulist that does not parse, a core the process
/// may not use, or pinning that fails.
#[derive(Debug, Error)]
pub enum HostError {
    #[error("cores `{spec}`: {reason} (write cores as `0`, `0,2` or `0-3`)")]
    CoreSpec { spec: String, reason: String },
    #[error("core {core} is not available to this process (it may run on cores {available})")]
    CoreUnavailable { core: usize, available: String },
    #[error("cannot pin a thread to cores {cores}: {error}")]
    Affinity { cores: String, error: std::io::Error },
    #[error("pinning threads to cores is only supported on Linux")]
    AffinityUnsupported,
    /// Reading the process's cores failed when [`allowed_cores`] first
    /// looked; the message is that first failure's.
    #[error("{0}")]
    Allowed(String),
}

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
    type Err = HostError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let bad = |reason: String| HostError::CoreSpec {
            spec: spec.to_string(),
            reason,
        };
        let id = |s: &str| -> Result<usize, HostError> {
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
pub fn available() -> Result<CoreSet, HostError> {
    // SAFETY: `set` is a plain bit set that sched_getaffinity fills; the size
    // passed is its own.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(HostError::Affinity {
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
    CoreSet::new(ids).ok_or(HostError::AffinityUnsupported)
}

/// The cores this process may run on.
#[cfg(not(target_os = "linux"))]
pub fn available() -> Result<CoreSet, HostError> {
    Err(HostError::AffinityUnsupported)
}

/// Checks that every core of `cores` is in `allowed` and below Linux's
/// `CPU_SETSIZE`.
///
/// Fails with [`HostError::CoreUnavailable`] naming the first core that
/// is not.
pub fn check_within(cores: &CoreSet, allowed: &CoreSet) -> Result<(), HostError> {
    match cores
        .ids()
        .iter()
        .find(|&&c| c > MAX_CORE || !allowed.ids().contains(&c))
    {
        Some(&core) => Err(HostError::CoreUnavailable {
            core,
            available: allowed.to_string(),
        }),
        None => Ok(()),
    }
}

static ALLOWED: OnceLock<Result<CoreSet, String>> = OnceLock::new();

/// The cores the process may run on, read once on first use.
pub fn allowed_cores() -> Result<CoreSet, HostError> {
    ALLOWED
        .get_or_init(|| available().map_err(|e| e.to_string()))
        .clone()
        .map_err(HostError::Allowed)
}

/// Checks that every core of `cores` is in [`allowed_cores`].
pub fn check(cores: &CoreSet) -> Result<(), HostError> {
    check_within(cores, &allowed_cores()?)
}

/// Restricts the calling thread to `cores`. Threads it creates afterwards
/// (an engine's thread pool) inherit the restriction.
///
/// Fails with [`HostError::CoreUnavailable`] naming the first core that
/// is not in [`allowed_cores`] (missing or excluded by the process's
/// affinity mask).
pub fn pin_current_thread(cores: &CoreSet) -> Result<(), HostError> {
    pin_current_thread_within(cores, &allowed_cores()?)
}

/// Restricts the calling thread to `cores` after checking them against
/// `allowed` (a set read earlier, e.g. before the caller pinned itself).
#[cfg(target_os = "linux")]
pub fn pin_current_thread_within(cores: &CoreSet, allowed: &CoreSet) -> Result<(), HostError> {
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
        return Err(HostError::Affinity {
            cores: cores.to_string(),
            error: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Restricts the calling thread to `cores`.
#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread_within(_cores: &CoreSet, _allowed: &CoreSet) -> Result<(), HostError> {
    Err(HostError::AffinityUnsupported)
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

    #[test]
    fn pins_narrow_then_wide_again() {
        let all = allowed_cores().unwrap();
        let first = CoreSet::new(vec![all.ids()[0]]).unwrap();
        pin_current_thread(&first).unwrap();
        pin_current_thread(&all).unwrap();
        assert_eq!(available().unwrap(), all);
        let e = pin_current_thread(&CoreSet::new(vec![1000]).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("core 1000"), "{e}");
    }
}
