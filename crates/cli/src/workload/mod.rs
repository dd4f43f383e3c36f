//! The built-in workload `perfaux record` traces when no command is given:
//! a small request server of real, instrumented code.
//!
//! [`WORKERS`] worker threads each serve `requests` requests. A request is
//!
//! ```text
//! serve_request
//!   parse_request          checksum of the request text
//!   lookup_cache           a hash probe; every 64th request misses:
//!     rebuild_cache        the rare slow path (sorts a table)
//!   compute                recursive fib(FIB_N) and a small matrix product
//!     fib -> fib -> ...
//!     mat_mul
//!   send_response          formats the answer
//! ```
//!
//! with uevents around it: [`UEVENT_REQUEST_START`] (payload: worker and
//! request number), [`UEVENT_SLOW_PATH`] when the slow path runs, and
//! [`UEVENT_REQUEST_DONE`] (payload: the result). Every function is a
//! perfaux-swtrace probe (`probe:serve_request`, ...), so the trace PMU sees
//! each call and return and `probe:FUNC` events can count or trigger on them.
//!
//! The workers start parked: [`Workload::spawn`] returns their tids so the
//! recorder can open per-thread events before [`Workload::start`] lets them
//! run, as perf opens its events before it execs the workload. When a
//! worker has served its requests it waits, alive, until [`Workload::join`]
//! (or drop) releases it, so the recorder can stop its per-thread events
//! (snapshot, disable, final AUX record) while the thread still runs, as
//! the kernel does at a task's exit.

mod requests;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

pub use requests::{Cache, FIB_N, SLOW_PATH_EVERY, serve_request};

/// Worker threads in the built-in workload.
pub const WORKERS: usize = 3;

/// uevent type: a request starts; payload `"worker=W req=N"`.
pub const UEVENT_REQUEST_START: u32 = 1;
/// uevent type: a request is done; payload `"worker=W req=N result=R"`.
pub const UEVENT_REQUEST_DONE: u32 = 2;
/// uevent type: the rare slow path ran; payload `"worker=W req=N rebuild"`.
pub const UEVENT_SLOW_PATH: u32 = 3;

/// The uevent type names `uevent:TYPE` accepts besides numbers.
pub const UEVENT_TYPES: &[(&str, u32)] = &[
    ("request_start", UEVENT_REQUEST_START),
    ("request_done", UEVENT_REQUEST_DONE),
    ("slow_path", UEVENT_SLOW_PATH),
];

/// Names of the instrumented functions (`probe:FUNC` names).
pub const PROBES: &[&str] = &[
    "serve_request",
    "parse_request",
    "lookup_cache",
    "rebuild_cache",
    "compute",
    "fib",
    "mat_mul",
    "send_response",
];

/// Where a worker sends its uevents (the recorder's `perf_uevent`, or
/// nothing when the workload runs untraced).
pub type UeventSink = fn(u32, &[u8]);

/// A one-way gate threads wait at until it opens.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut g = self.open.lock().unwrap_or_else(|e| e.into_inner());
        while !*g {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }
}

/// The running workload.
pub struct Workload {
    tids: Vec<i32>,
    go: Arc<Gate>,
    release: Arc<Gate>,
    done: Arc<AtomicUsize>,
    handles: Vec<JoinHandle<u64>>,
}

impl Workload {
    /// Spawns the workers, parked until [`Workload::start`].
    pub fn spawn(requests: u32, uevent: UeventSink) -> std::io::Result<Workload> {
        // The recording says what its uevent types are called: the views
        // read the names from it, not from this table.
        for &(name, ty) in UEVENT_TYPES {
            perfaux_swtrace::name_uevent_type(ty, name);
        }
        let go = Arc::new(Gate::default());
        let release = Arc::new(Gate::default());
        let done = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let mut handles = Vec::with_capacity(WORKERS);
        for w in 0..WORKERS {
            let (go, release, done) = (Arc::clone(&go), Arc::clone(&release), Arc::clone(&done));
            let tx = tx.clone();
            let h = std::thread::Builder::new()
                .name(format!("perfaux-worker{w}"))
                .spawn(move || {
                    // The tid the recorder opens this thread's events for.
                    let _ = tx.send((w, perfaux_core::gettid()));
                    drop(tx);
                    go.wait();
                    let r = requests::worker_loop(w as u32, requests, uevent);
                    done.fetch_add(1, Ordering::AcqRel);
                    release.wait();
                    r
                })?;
            handles.push(h);
        }
        drop(tx);
        let mut tids = vec![0; WORKERS];
        for (w, tid) in rx.iter().take(WORKERS) {
            tids[w] = tid;
        }
        Ok(Workload {
            tids,
            go,
            release,
            done,
            handles,
        })
    }

    /// The workers' thread ids, in worker order.
    pub fn tids(&self) -> &[i32] {
        &self.tids
    }

    /// Lets the workers run.
    pub fn start(&self) {
        self.go.open();
    }

    /// Whether every worker has served its requests (or died).
    pub fn is_finished(&self) -> bool {
        self.done.load(Ordering::Acquire) == WORKERS || self.handles.iter().any(|h| h.is_finished())
    }

    /// Releases the workers and waits for them; returns the sum of their
    /// results, or an error if one of them panicked.
    pub fn join(mut self) -> Result<u64, String> {
        self.release.open();
        let mut sum = 0u64;
        for (w, h) in std::mem::take(&mut self.handles).into_iter().enumerate() {
            sum = sum.wrapping_add(
                h.join()
                    .map_err(|_| format!("workload worker {w} panicked"))?,
            );
        }
        Ok(sum)
    }
}

impl Drop for Workload {
    /// A workload dropped unjoined (the recorder failed) is let go.
    fn drop(&mut self) {
        self.go.open();
        self.release.open();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    static SEEN: Mutex<Vec<(u32, Vec<u8>)>> = Mutex::new(Vec::new());

    fn collect(t: u32, d: &[u8]) {
        SEEN.lock().unwrap().push((t, d.to_vec()));
    }

    #[test]
    fn every_probe_name_is_a_registered_probe() {
        // probe:FUNC resolves these names (perfaux-core's resolve_probe),
        // so they must be the probes' registered names, not module paths.
        let mut c = Cache::new();
        serve_request("GET /x", 0, &mut c);
        for name in PROBES {
            assert!(
                !perfaux_swtrace::lookup(name).is_empty(),
                "probe {name} not registered"
            );
        }
    }

    #[test]
    fn workers_serve_every_request_with_start_and_done_uevents() {
        let w = Workload::spawn(70, collect).unwrap();
        assert_eq!(w.tids().len(), WORKERS);
        assert!(w.tids().iter().all(|&t| t > 0));
        w.start();
        w.join().unwrap();
        let seen = SEEN.lock().unwrap();
        let n = |ty| seen.iter().filter(|(t, _)| *t == ty).count();
        assert_eq!(n(UEVENT_REQUEST_START), WORKERS * 70);
        assert_eq!(n(UEVENT_REQUEST_DONE), WORKERS * 70);
        // Requests 0 and 64 of each worker take the slow path.
        assert_eq!(n(UEVENT_SLOW_PATH), WORKERS * 2);
        assert!(
            seen.iter()
                .any(|(t, d)| *t == UEVENT_REQUEST_START && d == b"worker=0 req=0")
        );
    }
}
