//! C++ exceptions through -pg / -mfentry frames.
//!
//! The entry hooks replace a traced function's return address with the return trampoline's,
//! and the trampoline has no unwind table entry: an exception thrown through such a frame
//! stopped the unwinder there and the program ended in `std::terminate` (SIGABRT), where it
//! ran fine alone. So, as uftrace's libmcount does:
//!
//! - `_Unwind_RaiseException` (every throw, `__cxa_throw` and `std::rethrow_exception`, reaches
//!   libgcc's unwinder through it, across a library boundary, so the preloaded definition here
//!   is the one called) and `_Unwind_Resume_or_Rethrow` (`throw;`) first put every return
//!   address of the thread's open calls back ([`Thread::restore_for_unwind`]), then call
//!   libgcc's;
//! - `__cxa_begin_catch` (called by each catch clause) ends the calls the exception left
//!   (below the catching frame) and hijacks the return addresses of the calls still open again
//!   ([`Thread::rehijack_after_catch`]), so their returns are traced as before.
//!
//! A frame restored for an exception that no catch clause takes is never hijacked again: its
//! return ends it when a later call at its depth or above begins (as for a longjmp).
//!
//! `pthread_exit` unwinds the thread too (a forced unwind, running cleanup handlers and C++
//! destructors), but glibc calls libgcc's `_Unwind_ForcedUnwind` through a pointer of its own,
//! which no preloaded definition intercepts: `pthread_exit` itself is wrapped (as uftrace
//! does), restoring the return addresses first. The thread's open calls then end at its exit.
//! A thread cancelled at a cancellation point unwinds the same way without passing here: not
//! covered.
//!
//! [`Thread::restore_for_unwind`]: crate::thread::Thread
//! [`Thread::rehijack_after_catch`]: crate::thread::Thread

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::thread::with as with_thread;
use crate::wrapped::{next, real};

static RAISE: AtomicUsize = AtomicUsize::new(0);
static RETHROW: AtomicUsize = AtomicUsize::new(0);
static BEGIN_CATCH: AtomicUsize = AtomicUsize::new(0);
static PTHREAD_EXIT: AtomicUsize = AtomicUsize::new(0);

type UnwindFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type BeginCatchFn = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type PthreadExitFn = unsafe extern "C" fn(*mut c_void) -> !;

/// Looks up the functions these wrap, from the constructor (not from inside a throw).
pub(crate) fn resolve() {
    RAISE.store(next(c"_Unwind_RaiseException"), Ordering::Relaxed);
    RETHROW.store(next(c"_Unwind_Resume_or_Rethrow"), Ordering::Relaxed);
    BEGIN_CATCH.store(next(c"__cxa_begin_catch"), Ordering::Relaxed);
    PTHREAD_EXIT.store(next(c"pthread_exit"), Ordering::Relaxed);
}

fn restore() {
    let _ = with_thread(|t| t.restore_for_unwind(crate::trampoline::return_trampoline_addr()));
}

/// libgcc's `_Unwind_RaiseException`, after the thread's return addresses are restored.
///
/// # Safety
/// As libgcc's: `exc` is an exception object the unwinder may use.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _Unwind_RaiseException(exc: *mut c_void) -> c_int {
    restore();
    let f = real(&RAISE, c"_Unwind_RaiseException");
    if f == 0 {
        // No libgcc unwinder in the process: nothing can throw; _URC_FATAL_PHASE1_ERROR.
        return 3;
    }
    // SAFETY: the address of libgcc's _Unwind_RaiseException, of this signature.
    let f: UnwindFn = unsafe { std::mem::transmute::<usize, UnwindFn>(f) };
    // SAFETY: the caller's contract, passed on.
    unsafe { f(exc) }
}

/// libgcc's `_Unwind_Resume_or_Rethrow`, after the thread's return addresses are restored.
///
/// # Safety
/// As libgcc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _Unwind_Resume_or_Rethrow(exc: *mut c_void) -> c_int {
    restore();
    let f = real(&RETHROW, c"_Unwind_Resume_or_Rethrow");
    if f == 0 {
        return 3;
    }
    // SAFETY: the address of libgcc's _Unwind_Resume_or_Rethrow, of this signature.
    let f: UnwindFn = unsafe { std::mem::transmute::<usize, UnwindFn>(f) };
    // SAFETY: the caller's contract, passed on.
    unsafe { f(exc) }
}

/// libstdc++'s `__cxa_begin_catch`; then the calls the exception left end and the open ones
/// are hijacked again. The catching function's frame lies above this call's stack pointer.
///
/// # Safety
/// As libstdc++'s: `exc` is the caught exception's unwind header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __cxa_begin_catch(exc: *mut c_void) -> *mut c_void {
    let f = real(&BEGIN_CATCH, c"__cxa_begin_catch");
    if f == 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: the address of libstdc++'s __cxa_begin_catch, of this signature.
    let f: BeginCatchFn = unsafe { std::mem::transmute::<usize, BeginCatchFn>(f) };
    // SAFETY: the caller's contract, passed on.
    let r = unsafe { f(exc) };
    let here = 0u8;
    let sp = std::ptr::addr_of!(here) as usize;
    let _ =
        with_thread(|t| t.rehijack_after_catch(sp, crate::trampoline::return_trampoline_addr()));
    r
}

/// libc's `pthread_exit`, after the thread's return addresses are restored for its forced
/// unwind (module doc).
///
/// # Safety
/// As libc's: called on a thread that may exit, `retval` is what `pthread_join` returns.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_exit(retval: *mut c_void) -> ! {
    restore();
    let f = real(&PTHREAD_EXIT, c"pthread_exit");
    if f == 0 {
        // A program that calls pthread_exit links libc, which defines it: not reached.
        // SAFETY: abort has no preconditions.
        unsafe { libc::abort() }
    }
    // SAFETY: the address of libc's pthread_exit, of this signature.
    let f: PthreadExitFn = unsafe { std::mem::transmute::<usize, PthreadExitFn>(f) };
    // SAFETY: the caller's contract, passed on.
    unsafe { f(retval) }
}
