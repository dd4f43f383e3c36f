//! The program's own SIGTRAP beside the kernel triggers (perfaux-pmus' `kernel_trigger`): once
//! a trigger's handler holds SIGTRAP, the program's `sigaction(SIGTRAP, ...)` and
//! `signal(SIGTRAP, ...)` set the action the handler passes every SIGTRAP not a trigger's to,
//! and report the one before, instead of replacing the handler (which would send the
//! triggers' signals to the program). Every other call goes to libc's.

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::wrapped::{next, real};

static SIGACTION: AtomicUsize = AtomicUsize::new(0);
static SIGNAL: AtomicUsize = AtomicUsize::new(0);

type SigactionFn =
    unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
type SignalFn = unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;

/// Looks up libc's functions, from the constructor.
pub(crate) fn resolve() {
    SIGACTION.store(next(c"sigaction"), Ordering::Relaxed);
    SIGNAL.store(next(c"signal"), Ordering::Relaxed);
}

/// libc's `sigaction`, or the triggers' record of the program's SIGTRAP action.
///
/// # Safety
/// As libc's: `act` and `oldact` are null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    oldact: *mut libc::sigaction,
) -> c_int {
    if sig == libc::SIGTRAP && perfaux_pmus::kernel_trigger::installed() {
        // SAFETY: the caller's pointer, null or valid (sigaction's contract).
        let new = unsafe { act.as_ref() };
        // SAFETY: as above.
        let old = unsafe { oldact.as_mut() };
        perfaux_pmus::kernel_trigger::set_program_action(new, old);
        return 0;
    }
    let f = real(&SIGACTION, c"sigaction");
    if f == 0 {
        // SAFETY: __errno_location has no preconditions.
        let errno = unsafe { libc::__errno_location() };
        // SAFETY: this thread's errno, a valid int.
        unsafe { *errno = libc::ENOSYS };
        return -1;
    }
    // SAFETY: libc's sigaction, found by dlsym, with the caller's arguments.
    let f: SigactionFn = unsafe { std::mem::transmute(f) };
    // SAFETY: as above.
    unsafe { f(sig, act, oldact) }
}

/// libc's `signal`, or the triggers' record of the program's SIGTRAP handler (with glibc's
/// `signal` flags: BSD semantics, SA_RESTART).
///
/// # Safety
/// As libc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if sig == libc::SIGTRAP && perfaux_pmus::kernel_trigger::installed() {
        // SAFETY: all-zero is a valid sigaction.
        let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
        new.sa_sigaction = handler;
        new.sa_flags = libc::SA_RESTART;
        // SAFETY: as above.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        perfaux_pmus::kernel_trigger::set_program_action(Some(&new), Some(&mut old));
        return old.sa_sigaction;
    }
    let f = real(&SIGNAL, c"signal");
    if f == 0 {
        return libc::SIG_ERR;
    }
    // SAFETY: libc's signal, found by dlsym, with the caller's arguments.
    let f: SignalFn = unsafe { std::mem::transmute(f) };
    // SAFETY: as above.
    unsafe { f(sig, handler) }
}
