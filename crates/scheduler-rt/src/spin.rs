//! Receiving with a short poll before blocking. On a virtual machine a
//! blocked thread takes tens of microseconds to wake (measured here: a
//! subgraph hand-off to a pool worker and back cost 43-51 µs when both
//! sides blocked at once), more than a hand-off between processors should.

use std::sync::mpsc::{Receiver, RecvError, TryRecvError};
use std::time::{Duration, Instant};

/// How long a worker waiting for a job, or the scheduler waiting for a
/// result, polls before it blocks. Polling yields the core between checks,
/// so a thread sharing the core still runs.
pub const POLL_BEFORE_BLOCKING: Duration = Duration::from_micros(100);

/// Like `rx.recv()`, polling for up to `poll` first.
pub(crate) fn recv<T>(rx: &Receiver<T>, poll: Duration) -> Result<T, RecvError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

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
