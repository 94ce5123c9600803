//! Receiving with a short poll before blocking. On a virtual machine a
//! blocked thread takes tens of microseconds to wake, more than a hand-off
//! between processors should.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvError, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

/// How long a worker waiting for a job, or the scheduler waiting for a
/// result, polls before it blocks. Polling yields the core between checks,
/// so a thread sharing the core still runs.
pub const POLL_BEFORE_BLOCKING: Duration = Duration::from_micros(100);

/// Like `rx.recv()`, polling for up to `poll` first.
pub fn recv<T>(rx: &Receiver<T>, poll: Duration) -> Result<T, RecvError> {
    let start = Instant::now();
    loop {
        match rx.try_recv() {
            Ok(v) => return Ok(v),
            Err(TryRecvError::Disconnected) => return Err(RecvError),
            Err(TryRecvError::Empty) if start.elapsed() >= poll => return rx.recv(),
            Err(TryRecvError::Empty) => std::thread::yield_now(),
        }
    }
}

/// Like `rx.recv()`, polling (yielding the core between checks) for as long
/// as `busy` is above zero, then for up to `poll`, then blocking.
pub fn recv_while<T>(rx: &Receiver<T>, busy: &AtomicUsize, poll: Duration) -> Result<T, RecvError> {
    loop {
        match rx.try_recv() {
            Ok(v) => return Ok(v),
            Err(TryRecvError::Disconnected) => return Err(RecvError),
            Err(TryRecvError::Empty) if busy.load(Ordering::Acquire) > 0 => std::thread::yield_now(),
            Err(TryRecvError::Empty) => return recv(rx, poll),
        }
    }
}

/// Like `rx.recv_timeout(timeout)`, polling the whole time instead of
/// blocking: for a thread alone on an otherwise idle core, whose wake-up
/// from a blocked wait costs tens of microseconds on a VM.
pub fn recv_polling<T>(rx: &Receiver<T>, timeout: Duration) -> Result<T, RecvTimeoutError> {
    let until = Instant::now() + timeout;
    loop {
        match rx.try_recv() {
            Ok(v) => return Ok(v),
            Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) if Instant::now() >= until => return Err(RecvTimeoutError::Timeout),
            Err(TryRecvError::Empty) => std::hint::spin_loop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    #[test]
    fn polling_receives_times_out_and_sees_a_hang_up() {
        let (tx, rx) = channel::<u8>();
        assert_eq!(
            recv_polling(&rx, Duration::from_millis(2)),
            Err(RecvTimeoutError::Timeout)
        );
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            tx.send(3).unwrap();
        });
        assert_eq!(recv_polling(&rx, Duration::from_secs(5)), Ok(3));
        late.join().unwrap();
        assert_eq!(
            recv_polling(&rx, Duration::from_millis(1)),
            Err(RecvTimeoutError::Disconnected)
        );
    }

    #[test]
    fn polls_while_busy_and_blocks_once_the_flag_clears() {
        let (tx, rx) = channel();
        let busy = std::sync::Arc::new(AtomicUsize::new(1));
        let flag = busy.clone();
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.send(1).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            flag.store(0, Ordering::Release);
            std::thread::sleep(Duration::from_millis(20));
            tx.send(2).unwrap();
        });
        assert_eq!(recv_while(&rx, &busy, Duration::ZERO), Ok(1));
        assert_eq!(recv_while(&rx, &busy, Duration::ZERO), Ok(2));
        late.join().unwrap();
        assert_eq!(recv_while(&rx, &busy, Duration::ZERO), Err(RecvError));
    }

    #[test]
    fn receives_while_polling_after_blocking_and_sees_a_hang_up() {
        let (tx, rx) = channel();
        tx.send(1).unwrap();
        assert_eq!(recv(&rx, POLL_BEFORE_BLOCKING), Ok(1));
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.send(2).unwrap();
        });
        assert_eq!(recv(&rx, Duration::from_micros(10)), Ok(2));
        late.join().unwrap();
        assert_eq!(recv(&rx, POLL_BEFORE_BLOCKING), Err(RecvError));
    }
}
