//! Raising the calling thread's scheduling priority for the time a
//! scheduler runs, so that its wake-ups (an arrival, a finished subgraph)
//! are not queued behind engine threads on a shared core.

/// The nice value a scheduling thread asks for.
pub const SCHEDULER_NICE: i32 = -15;

/// The calling thread's nice value, raised until dropped.
#[derive(Debug)]
pub struct Raised {
    before: i32,
    /// The nice value now in force.
    pub nice: i32,
}

fn thread_id() -> libc::id_t {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::id_t }
}

fn get_nice(tid: libc::id_t) -> Result<i32, String> {
    // getpriority returns -1 both as a value and as an error, so errno is
    // cleared first and read after.
    // SAFETY: errno is thread-local; getpriority only reads its arguments.
    unsafe {
        *libc::__errno_location() = 0;
        let v = libc::getpriority(libc::PRIO_PROCESS, tid);
        let err = *libc::__errno_location();
        if v == -1 && err != 0 {
            return Err(std::io::Error::from_raw_os_error(err).to_string());
        }
        Ok(v)
    }
}

fn set_nice(tid: libc::id_t, nice: i32) -> Result<(), String> {
    // SAFETY: setpriority only reads its arguments; on Linux PRIO_PROCESS
    // with a thread id changes that thread alone.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(())
}

/// Sets the calling thread's nice value to `nice` if that is a raise
/// (lower value) and restores the old value when the guard drops. Fails,
/// changing nothing, where the process may not raise priorities (no
/// `CAP_SYS_NICE`, or an `RLIMIT_NICE` below the request).
pub fn raise_current_thread(nice: i32) -> Result<Raised, String> {
    let tid = thread_id();
    let before = get_nice(tid)?;
    if before <= nice {
        return Ok(Raised { before, nice: before });
    }
    set_nice(tid, nice).map_err(|e| format!("cannot set the scheduler thread's nice value to {nice}: {e}"))?;
    Ok(Raised { before, nice })
}

impl Drop for Raised {
    fn drop(&mut self) {
        if self.nice != self.before {
            let _ = set_nice(thread_id(), self.before);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raise_is_undone_when_the_guard_drops() {
        let tid = thread_id();
        let before = get_nice(tid).unwrap();
        match raise_current_thread(before - 1) {
            Ok(r) => {
                assert_eq!(get_nice(tid).unwrap(), before - 1);
                assert_eq!(r.nice, before - 1);
                drop(r);
            }
            Err(e) => assert!(e.contains("nice value"), "{e}"),
        }
        assert_eq!(get_nice(tid).unwrap(), before);
    }

    #[test]
    fn a_request_at_or_below_the_current_priority_changes_nothing() {
        let tid = thread_id();
        let before = get_nice(tid).unwrap();
        let r = raise_current_thread(before + 1).unwrap();
        assert_eq!(r.nice, before);
        assert_eq!(get_nice(tid).unwrap(), before);
    }
}
