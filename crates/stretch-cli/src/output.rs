//! Standard output through a forwarding thread, so that a reader closing
//! it early (`stretch run M --output o.npy | head -1`) never stops a
//! command before it has done its work and written its files: what the
//! command prints after the reader left is dropped, and it finishes and
//! exits as it would have.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long [`Forwarder::finish`] waits for the last output to go out (a
/// child process still holding the pipe keeps it open).
const DRAIN: Duration = Duration::from_secs(2);

/// The thread that copies what the process prints to the real standard output.
pub struct Forwarder {
    /// The real standard output.
    saved: RawFd,
    thread: JoinHandle<()>,
}

/// Puts a pipe in front of file descriptor 1 and starts the thread that
/// empties it; `None` (output left as it is) where the pipe cannot be made.
pub fn start() -> Option<Forwarder> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe, dup and dup2 only make and move file descriptors this
    // function owns; fd 1 stays valid throughout (it is replaced atomically).
    unsafe {
        if libc::pipe(fds.as_mut_ptr()) != 0 {
            return None;
        }
        let (read, write) = (fds[0], fds[1]);
        let saved = libc::dup(1);
        let out = libc::dup(1);
        if saved < 0 || out < 0 || libc::dup2(write, 1) < 0 {
            for fd in [read, write, saved, out] {
                if fd >= 0 {
                    libc::close(fd);
                }
            }
            return None;
        }
        libc::close(write);
        let mut input = File::from_raw_fd(read);
        let mut output = File::from_raw_fd(out);
        let thread = std::thread::spawn(move || forward(&mut input, &mut output));
        Some(Forwarder { saved, thread })
    }
}

/// Copies `input` to `output` until `input` ends; once `output` fails (its
/// reader is gone), keeps reading and drops what comes.
fn forward(input: &mut impl Read, output: &mut impl Write) {
    let mut buf = [0u8; 8192];
    let mut open = true;
    loop {
        match input.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => open = open && output.write_all(&buf[..n]).and_then(|_| output.flush()).is_ok(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

impl Forwarder {
    /// Flushes what was printed, puts the real standard output back on
    /// file descriptor 1 (ending the pipe) and waits until the thread has
    /// passed everything on.
    pub fn finish(self) {
        let _ = std::io::stdout().flush();
        // SAFETY: `saved` is the descriptor `start` duplicated from fd 1.
        unsafe {
            libc::dup2(self.saved, 1);
            libc::close(self.saved);
        }
        let start = Instant::now();
        while !self.thread.is_finished() && start.elapsed() < DRAIN {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_output_is_drained_to_the_end() {
        let text = vec![b'x'; 100_000];
        let mut input = &text[..];
        forward(&mut input, &mut Closed);
        assert!(input.is_empty(), "{} bytes left unread", input.len());
        let mut input = &b"abc"[..];
        let mut copy = Vec::new();
        forward(&mut input, &mut copy);
        assert_eq!(copy, b"abc");
    }
}
