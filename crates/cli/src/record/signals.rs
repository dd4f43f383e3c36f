//! The signals `record` answers, as perf's builtin-record.c does: SIGINT,
//! SIGTERM and SIGHUP end the recording and the file is written (a second
//! one aborts at once); SIGUSR2 takes a snapshot in `-S` mode and is
//! ignored otherwise. The handlers are installed before anything else
//! runs, so an early signal is never fatal.
//!
//! Process-wide by nature (a signal is delivered to the process): two
//! flags the handlers set and the drain loop reads.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicI32 = AtomicI32::new(0);
static SNAPSHOT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(sig: libc::c_int) {
    if STOP.swap(sig, Ordering::AcqRel) != 0 {
        // The second request: abort as if no handler were there.
        // SAFETY: signal is async-signal-safe and SIG_DFL a valid handler.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
        // SAFETY: raise is async-signal-safe and takes no pointers.
        unsafe { libc::raise(sig) };
    }
}

extern "C" fn on_sigusr2(_: libc::c_int) {
    SNAPSHOT.store(true, Ordering::Release);
}

/// Installs the handlers; returns an error naming the signal that failed.
pub fn install() -> Result<(), String> {
    let set = |sig: libc::c_int, h: extern "C" fn(libc::c_int), name: &str| {
        // SAFETY: an all-zero sigaction is a valid value of the C struct.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = h as usize;
        sa.sa_flags = libc::SA_RESTART;
        // SAFETY: sa_mask is a valid sigset_t owned by `sa`.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: the handlers only touch atomics (and re-raise), which is
        // async-signal-safe; `sa` is fully initialized.
        let r = unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
        if r != 0 {
            return Err(format!(
                "cannot install the {name} handler: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    };
    set(libc::SIGINT, on_stop, "SIGINT")?;
    set(libc::SIGTERM, on_stop, "SIGTERM")?;
    set(libc::SIGHUP, on_stop, "SIGHUP")?;
    set(libc::SIGUSR2, on_sigusr2, "SIGUSR2")?;
    // A parent that blocked them (a supervisor sending its request as the
    // process starts) has them delivered now, to the handlers.
    // SAFETY: an all-zero sigset_t is a valid value of the C type.
    let mut set_: libc::sigset_t = unsafe { std::mem::zeroed() };
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR2] {
        // SAFETY: `set_` is a valid sigset_t this function owns.
        unsafe { libc::sigaddset(&mut set_, sig) };
    }
    // SAFETY: `set_` is initialized; the old mask is not asked for.
    unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set_, std::ptr::null_mut()) };
    Ok(())
}

/// The signal that asked the recording to stop, if any.
pub fn stop_requested() -> Option<i32> {
    match STOP.load(Ordering::Acquire) {
        0 => None,
        s => Some(s),
    }
}

/// Whether SIGUSR2 arrived since the last call.
pub fn take_snapshot_request() -> bool {
    SNAPSHOT.swap(false, Ordering::AcqRel)
}
