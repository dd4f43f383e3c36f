//! Waiting for the rings as perf polls its fds: each ring's producer bumps
//! its futex word at its watermarks (`perf_output_wakeup`); one small
//! thread per ring waits on that word and passes the wakeup on to the
//! drain loop, which sleeps until any ring wakes it or its timeout ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use perfaux_ring::Wakeup;

#[derive(Default)]
struct Shared {
    generation: Mutex<u64>,
    cv: Condvar,
    stop: AtomicBool,
}

/// The drain loop's side of the rings' wakeups.
#[derive(Default)]
pub(crate) struct Wakeups {
    shared: Arc<Shared>,
    seen: Mutex<u64>,
    watchers: Vec<JoinHandle<()>>,
}

impl Wakeups {
    /// Forwards `w`'s wakeups from now on.
    pub(crate) fn watch(&mut self, w: Arc<Wakeup>) {
        let shared = Arc::clone(&self.shared);
        let h = std::thread::Builder::new()
            .name("perfaux-wakeup".into())
            .spawn(move || {
                let mut seen = w.count();
                // Until the recording stops, or the ring lets go of its wakeup (a retired ring:
                // this watcher holds the last reference).
                while !shared.stop.load(Ordering::Acquire) && Arc::strong_count(&w) > 1 {
                    // The timeout only bounds how long stop() waits.
                    let now = w.wait(seen, Some(Duration::from_millis(50)));
                    if now != seen {
                        seen = now;
                        let mut g = shared.generation.lock().unwrap_or_else(|e| e.into_inner());
                        *g += 1;
                        shared.cv.notify_all();
                    }
                }
            });
        // Without the thread the timeout still drains the ring.
        if let Ok(h) = h {
            self.watchers.push(h);
        }
    }

    /// Sleeps until a ring woke since the last call, or `timeout`.
    pub(crate) fn wait(&self, timeout: Duration) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        wait_past(&self.shared, &mut seen, timeout);
    }

    /// A [`Waiter`] that sees the wakeups from now on.
    pub(crate) fn waiter(&self) -> Waiter {
        let seen = *self
            .shared
            .generation
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        Waiter {
            shared: Arc::clone(&self.shared),
            seen,
        }
    }

    /// Ends the watcher threads.
    pub(crate) fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for h in self.watchers.drain(..) {
            let _ = h.join();
        }
    }
}

/// Sleeps until the generation passes `seen` or `timeout`, then takes the generation.
fn wait_past(shared: &Shared, seen: &mut u64, timeout: Duration) {
    let g = shared.generation.lock().unwrap_or_else(|e| e.into_inner());
    let g = if *g == *seen {
        shared
            .cv
            .wait_timeout_while(g, timeout, |g| *g == *seen)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0)
    } else {
        g
    };
    *seen = *g;
}

/// Waits for the rings' wakeups without holding the recorder
/// ([`crate::Recorder::waiter`]): a drain loop that shares the recorder with
/// other threads sleeps with this and takes the recorder only to drain.
#[derive(Clone)]
pub struct Waiter {
    shared: Arc<Shared>,
    seen: u64,
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiter").field("seen", &self.seen).finish()
    }
}

impl Waiter {
    /// Sleeps until a ring woke since the last call (or since the waiter was made), or
    /// `timeout`. Rings added to the recorder later wake it too.
    pub fn wait(&mut self, timeout: Duration) {
        wait_past(&self.shared, &mut self.seen, timeout);
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        self.stop();
    }
}
