//! [`Wakeup`]: what `perf_output_wakeup()` and `perf_poll()` give the
//! consumer, in user space.
//!
//! The kernel sets `rb->poll = EPOLLIN` and queues an irq_work that wakes
//! the fd's waiters. Here a wakeup bumps a futex word (waited on with
//! [`Wakeup::wait`]), sets the poll state ([`Wakeup::poll`] reads and
//! clears it, as `perf_poll()`'s `atomic_xchg(&rb->poll, 0)` does), and,
//! if the ring has one, writes 1 to an eventfd so a consumer in another
//! process can `poll()` it. All three are async-signal-safe: atomics and
//! the `futex`/`write` system calls, and the futex call is skipped when
//! nobody waits. Hand-written because the waking side runs in signal
//! handlers: the usual notification crates allocate or take locks there.

use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::error::RingError;

/// `EPOLLIN`, the poll state a wakeup leaves.
pub const POLLIN: u32 = 0x1;

/// The wakeup state of one perf buffer.
#[derive(Debug, Default)]
pub struct Wakeup {
    /// Bumped by every wakeup: the futex word.
    count: AtomicU32,
    /// `rb->poll`.
    poll: AtomicU32,
    /// Threads in [`Wakeup::wait`]; the producer skips the futex call at 0.
    waiters: AtomicU32,
    eventfd: Option<OwnedFd>,
}

impl Wakeup {
    /// A wakeup without an eventfd.
    pub fn new() -> Self {
        Self::default()
    }

    /// A wakeup that also signals a new non-blocking eventfd.
    pub fn with_eventfd() -> Result<Self, RingError> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new
        // fd this function owns from here on.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(RingError::os("eventfd", std::io::Error::last_os_error()));
        }
        // SAFETY: fd is a fresh, open descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Wakeup {
            eventfd: Some(fd),
            ..Self::default()
        })
    }

    /// The eventfd, to poll from another process (readable after a wakeup).
    pub fn eventfd(&self) -> Option<BorrowedFd<'_>> {
        self.eventfd.as_ref().map(AsFd::as_fd)
    }

    /// `perf_output_wakeup()`: async-signal-safe.
    pub fn wake(&self) {
        self.poll.store(POLLIN, Ordering::Release);
        self.count.fetch_add(1, Ordering::Release);
        if self.waiters.load(Ordering::SeqCst) != 0 {
            // A failed wake only means nobody was woken; the count moved,
            // so a waiter that has not slept yet will not sleep.
            let _ = rustix::thread::futex::wake(
                &self.count,
                rustix::thread::futex::Flags::PRIVATE,
                u32::MAX,
            );
        }
        if let Some(fd) = &self.eventfd {
            // EAGAIN (counter saturated) still leaves the fd readable.
            let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
        }
    }

    /// Wakeups so far (wrapping): pass it to [`Wakeup::wait`].
    pub fn count(&self) -> u32 {
        self.count.load(Ordering::Acquire)
    }

    /// `perf_poll()`: `POLLIN` if a wakeup happened since the last poll,
    /// and clears it.
    pub fn poll(&self) -> u32 {
        self.poll.swap(0, Ordering::AcqRel)
    }

    /// Waits until the count differs from `seen` or `timeout` passes;
    /// returns the count then.
    pub fn wait(&self, seen: u32, timeout: Option<Duration>) -> u32 {
        let ts = timeout.map(|t| rustix::thread::futex::Timespec {
            tv_sec: t.as_secs() as _,
            tv_nsec: t.subsec_nanos() as _,
        });
        self.waiters.fetch_add(1, Ordering::SeqCst);
        if self.count.load(Ordering::SeqCst) == seen {
            // EAGAIN (count moved), EINTR and ETIMEDOUT all end the wait.
            let _ = rustix::thread::futex::wait(
                &self.count,
                rustix::thread::futex::Flags::PRIVATE,
                seen,
                ts.as_ref(),
            );
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        self.count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wakeup_sets_pollin_once_and_wakes_a_waiter() {
        let w = std::sync::Arc::new(Wakeup::with_eventfd().unwrap());
        assert_eq!(w.poll(), 0);
        let seen = w.count();
        let waiter = {
            let w = w.clone();
            std::thread::spawn(move || w.wait(seen, Some(Duration::from_secs(10))))
        };
        std::thread::sleep(Duration::from_millis(20));
        w.wake();
        assert_eq!(waiter.join().unwrap(), seen.wrapping_add(1));
        // perf_poll: POLLIN once, then cleared.
        assert_eq!(w.poll(), POLLIN);
        assert_eq!(w.poll(), 0);
        let mut buf = [0u8; 8];
        assert_eq!(rustix::io::read(w.eventfd().unwrap(), &mut buf).unwrap(), 8);
        assert_eq!(u64::from_ne_bytes(buf), 1);
    }
}
