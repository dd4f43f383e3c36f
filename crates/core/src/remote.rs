//! Running a function on another thread of the process: the kernel's
//! `task_function_call` (an IPI to the CPU the task runs on), done with a
//! signal to the thread.
//!
//! The trace PMU's `start`/`stop` act on the thread they trace (the
//! tracer's writer slot is thread-local, as a trace unit's MSRs are
//! per-CPU). When the control path runs on another thread, the call is
//! posted here and the target runs it in a signal handler, while the
//! caller waits, as `smp_call_function_single(.., wait=1)` does. A call to
//! the calling thread itself runs directly.
//!
//! The signal is `SIGRTMIN + 6` ([`remote_signal`]); a process that uses it
//! for something else cannot use cross-thread control of trace events.

use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use perfaux_abi::errno;

use crate::error::{Error, Result};
use crate::thread;

thread_local! {
    /// Set while this thread runs a posted call in the signal handler.
    static IN_REMOTE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling code runs as a remote call, i.e. in a signal
/// handler that may have interrupted the thread anywhere.
#[inline]
pub fn in_remote_call() -> bool {
    IN_REMOTE.with(std::cell::Cell::get)
}

const IDLE: u32 = 0;
const POSTED: u32 = 1;
const CLAIMED: u32 = 2;
const DONE: u32 = 3;

struct Request {
    tid: AtomicI32,
    /// `*mut &mut dyn FnMut()`, on the caller's stack while it waits.
    call: AtomicUsize,
    state: AtomicU32,
}

static REQ: Request = Request {
    tid: AtomicI32::new(0),
    call: AtomicUsize::new(0),
    state: AtomicU32::new(IDLE),
};

/// The signal used for remote calls.
pub fn remote_signal() -> i32 {
    libc::SIGRTMIN() + 6
}

fn install_handler() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // SAFETY: a zeroed sigaction is a valid starting value (the handler
        // has the SA_SIGINFO signature and only touches atomics and the
        // posted closure).
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: `sa.sa_mask` is a valid sigset_t to initialise.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: a valid signal number and a fully initialised sigaction.
        unsafe { libc::sigaction(remote_signal(), &sa, std::ptr::null_mut()) };
    });
}

extern "C" fn handler(_sig: i32, _info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let saved = errno_value();
    if REQ.tid.load(Ordering::Acquire) == thread::gettid()
        && REQ
            .state
            .compare_exchange(POSTED, CLAIMED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        let p = REQ.call.load(Ordering::Acquire) as *mut &mut dyn FnMut();
        IN_REMOTE.with(|c| c.set(true));
        // SAFETY: the poster keeps the closure alive until the state is
        // DONE (it cannot withdraw a CLAIMED request), and only this claim
        // calls it.
        unsafe { (*p)() };
        IN_REMOTE.with(|c| c.set(false));
        REQ.state.store(DONE, Ordering::Release);
    }
    set_errno(saved);
}

fn errno_value() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Sets this thread's `errno` (async-signal-safe).
pub fn set_errno(v: i32) {
    // SAFETY: __errno_location has no preconditions.
    let p = unsafe { libc::__errno_location() };
    // SAFETY: it returns this thread's errno slot, valid and aligned.
    unsafe { *p = v };
}

/// Runs `f` on thread `tid` and waits for it. ESRCH if the thread is gone,
/// ETIMEDOUT if it did not take the signal within 2 s (signals blocked).
pub fn run_on(tid: i32, f: &mut dyn FnMut()) -> Result<()> {
    if tid == thread::gettid() {
        f();
        return Ok(());
    }
    static SERIAL: Mutex<()> = Mutex::new(());
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    install_handler();
    let mut f = f;
    let p: *mut &mut dyn FnMut() = &mut f;
    REQ.tid.store(tid, Ordering::Release);
    REQ.call.store(p as usize, Ordering::Release);
    REQ.state.store(POSTED, Ordering::Release);
    let pid = std::process::id() as libc::pid_t;
    // SAFETY: tgkill with a valid signal number; errors are returned.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, remote_signal()) };
    if r != 0 {
        REQ.state.store(IDLE, Ordering::Release);
        return Err(Error::new(
            errno::ESRCH,
            "remote call: target thread is gone",
        ));
    }
    let start = Instant::now();
    loop {
        match REQ.state.load(Ordering::Acquire) {
            DONE => {
                REQ.state.store(IDLE, Ordering::Release);
                return Ok(());
            }
            POSTED
                if start.elapsed() > Duration::from_secs(2)
                    && REQ
                        .state
                        .compare_exchange(POSTED, IDLE, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok() =>
            {
                return Err(Error::new(
                    errno::ETIMEDOUT,
                    "remote call: target thread did not run the call (signals blocked?)",
                ));
            }
            _ => {}
        }
        if start.elapsed() < Duration::from_millis(1) {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}
