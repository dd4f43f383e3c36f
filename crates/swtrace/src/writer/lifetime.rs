//! Where a thread's [`ThreadTrace`] lives, and how it is made and freed without anything a
//! signal handler may not do.
//!
//! The core installs a writer on another thread from a signal handler on that thread (its
//! remote call, the kernel's IPI), and that may be the thread's first: the handler may have
//! interrupted the thread inside `malloc`, so making the state must not allocate, nor register
//! a thread-local destructor (glibc's `__cxa_thread_atexit_impl` allocates). So:
//!
//! - the memory is an anonymous `mmap` of its own (a system call, async-signal-safe), freed by
//!   `munmap`;
//! - the thread-exit hook is a pthread key whose destructor frees it: `pthread_setspecific` of
//!   one of the first 32 keys stores into the thread descriptor and allocates nothing (glibc;
//!   a later key allocates a block on each thread's first use, so the core makes the key early,
//!   [`prepare`]), and the key is made with compare-and-swap, not a lock or a `Once` a handler
//!   could find half-done on its own thread;
//! - two thread-locals without destructors point at it: SLOT (while probes have work here)
//!   and TRACE (from creation to release), each one load to read.
//!
//! A pthread key's destructor runs after the thread's Rust thread-local destructors, so probes
//! entered by those still find the state; at release TRACE is cleared before the slot, so a
//! handler's control call in between finds nothing instead of publishing the slot again (state
//! made again after that is freed by pthread's next destructor round). A handler's control
//! call that lands while its thread is making the state gets none: an install is refused, an
//! [`super::enable_shadow_stack`] is lost.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicUsize, compiler_fence};

#[cfg(test)]
use super::test_points::{Point, at_point};
use super::thread::{SLOT, ThreadTrace};

thread_local! {
    /// This thread's ThreadTrace once created (whether observing or not); read by the control
    /// calls with one load, so that a signal handler calling them sees a consistent value.
    static TRACE: Cell<*const ThreadTrace> = const { Cell::new(ptr::null()) };
    /// Set while this thread makes its ThreadTrace: a handler that interrupts the making gets
    /// none rather than a second one.
    static MAKING: Cell<bool> = const { Cell::new(false) };
}

/// The pthread key whose destructor frees a thread's ThreadTrace (the key plus one; 0: not
/// made yet).
static KEY: AtomicUsize = AtomicUsize::new(0);
/// The (tid, address) of each ThreadTrace freed so far, for tests.
#[cfg(test)]
static FREED: std::sync::Mutex<Vec<(u32, usize)>> = std::sync::Mutex::new(Vec::new());

const LEN: usize = std::mem::size_of::<ThreadTrace>();

/// The calling thread's writer slot (null when nothing observes the thread).
#[inline(always)]
pub(crate) fn slot() -> *const ThreadTrace {
    SLOT.with(|s| s.get())
}

/// The calling thread's ThreadTrace if one was ever created, observed or not: where the
/// return of an observed call goes when the slot was cleared since (a pause, an uninstall).
#[inline(always)]
pub(crate) fn thread_trace_ptr() -> *const ThreadTrace {
    TRACE.with(|t| t.get())
}

/// The calling thread's ThreadTrace if one was ever created. Async-signal-safe (one load).
pub(super) fn existing() -> Option<&'static ThreadTrace> {
    let p = TRACE.with(|t| t.get());
    // SAFETY: TRACE holds null or this thread's live ThreadTrace: `release` clears it before
    // freeing. The reference does not escape the calling thread's control call.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// The calling thread's ThreadTrace, made on first use; async-signal-safe (module doc).
/// `None` if the system refused the memory or the key, or inside a handler that interrupted
/// this thread making it.
pub(super) fn thread_trace() -> Option<&'static ThreadTrace> {
    if let Some(t) = existing() {
        return Some(t);
    }
    if MAKING.with(|m| m.replace(true)) {
        return None;
    }
    // A handler that ran between the look above and the flag may have made it already.
    compiler_fence(SeqCst);
    let made = existing().or_else(make);
    compiler_fence(SeqCst);
    MAKING.with(|m| m.set(false));
    made
}

/// Makes the process's pthread key now, from an ordinary context (the core's event_init), so
/// that it is among the first keys: glibc stores the first 32 keys' values in the thread
/// descriptor, but allocates a block on a thread's first use of a later key, which a signal
/// handler must not. Returns whether the key is one of the first 32.
pub fn prepare() -> bool {
    const PTHREAD_KEY_2NDLEVEL_SIZE: libc::pthread_key_t = 32;
    key().is_some_and(|k| k < PTHREAD_KEY_2NDLEVEL_SIZE)
}

fn make() -> Option<&'static ThreadTrace> {
    let key = key()?;
    // SAFETY: an anonymous private mapping: no file, no address hint.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            LEN,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let p = p.cast::<ThreadTrace>();
    // SAFETY: `p` is a fresh, page-aligned (so 64-byte aligned) mapping of LEN bytes, ours.
    unsafe { p.write(ThreadTrace::new()) };
    // SAFETY: a key from pthread_key_create; the value is ours to hand to its destructor.
    if unsafe { libc::pthread_setspecific(key, p.cast()) } != 0 {
        // SAFETY: `p` was never shared: drop and unmap it.
        unsafe { free(p) };
        return None;
    }
    compiler_fence(SeqCst);
    TRACE.with(|t| t.set(p));
    existing()
}

/// The process's key, made by the first thread that needs it.
fn key() -> Option<libc::pthread_key_t> {
    let k = KEY.load(Acquire);
    if k != 0 {
        return Some((k - 1) as libc::pthread_key_t);
    }
    let mut new: libc::pthread_key_t = 0;
    // SAFETY: a valid out-pointer and a destructor of the signature pthread expects.
    if unsafe { libc::pthread_key_create(&mut new, Some(release_at_exit)) } != 0 {
        return None;
    }
    match KEY.compare_exchange(0, new as usize + 1, AcqRel, Acquire) {
        Ok(_) => Some(new),
        Err(won) => {
            // Another thread made one first: use it, give this one back.
            // SAFETY: `new` was made above and never used.
            unsafe { libc::pthread_key_delete(new) };
            Some((won - 1) as libc::pthread_key_t)
        }
    }
}

/// In the child of a `fork`, on the thread that forked: forgets the thread's writer state
/// without a write through it. The state is the child's copy of the parent thread's, and its
/// region is the parent's AUX area, memory the two processes may share: a probe entered in the
/// child would write packets there. Clears the slot, TRACE and the key's value, so that the
/// next install makes a state of the child's own; the old one stays mapped (its shadow stack
/// may still be read by a guard made before the fork, which [`crate::ProbeGuard::forget_call`]
/// makes inert). Takes no lock and allocates nothing.
pub fn forget_after_fork() {
    // A hook the fork interrupted (from a signal handler) may still publish through this
    // copy of the writer's state: not into the parent's mirror word, which is shared memory.
    // The copy is the child's own (a private mapping).
    if let Some(t) = existing() {
        t.head_mirror.store(ptr::null_mut(), Relaxed);
    }
    SLOT.with(|s| s.set(ptr::null()));
    TRACE.with(|t| t.set(ptr::null()));
    MAKING.with(|m| m.set(false));
    let k = KEY.load(Acquire);
    if k != 0 {
        // SAFETY: our key; clearing its value allocates nothing and makes thread exit leave
        // the parent's copy alone.
        unsafe { libc::pthread_setspecific((k - 1) as libc::pthread_key_t, ptr::null()) };
    }
}

/// What runs on an exiting thread before its ThreadTrace is freed (a `fn()` as usize; 0: none).
static EXIT_HOOK: AtomicUsize = AtomicUsize::new(0);

/// Sets what runs on a thread that exits with a ThreadTrace, before the state is freed: the
/// trace PMU's core stops the thread's events there (`perf_event_exit_task`), so that a writer
/// still installed ends its AUX transaction and the trace written so far is published rather
/// than freed with the thread. Runs from a pthread-key destructor (an ordinary context, after
/// the thread's Rust thread-local destructors), with the writer still reachable.
pub fn set_exit_hook(hook: fn()) {
    EXIT_HOOK.store(hook as usize, Release);
}

/// The key's destructor, at thread exit (pthread has already cleared the key's value).
unsafe extern "C" fn release_at_exit(p: *mut libc::c_void) {
    let hook = EXIT_HOOK.load(Acquire);
    if hook != 0 {
        // SAFETY: a non-zero EXIT_HOOK was stored from a `fn()` by `set_exit_hook`.
        let hook = unsafe { std::mem::transmute::<usize, fn()>(hook) };
        hook();
    }
    // SAFETY: the value of our key: this thread's ThreadTrace, released once, here.
    unsafe { release(p.cast()) };
}

/// Frees the calling thread's ThreadTrace `p`: TRACE first, then the slot, then the memory.
///
/// # Safety
/// `p` is the calling thread's ThreadTrace, freed by no one else.
unsafe fn release(p: *mut ThreadTrace) {
    TRACE.with(|t| t.set(ptr::null()));
    #[cfg(test)]
    at_point(Point::Release);
    SLOT.with(|s| s.set(ptr::null()));
    #[cfg(test)]
    FREED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        // SAFETY: `p` is still live here (freed below).
        .push((unsafe { (*p).tid }, p as usize));
    // SAFETY: the caller's contract; neither thread-local points at it any more.
    unsafe { free(p) };
}

/// # Safety
/// `p` came from `make`'s mapping and nothing refers to it.
unsafe fn free(p: *mut ThreadTrace) {
    // SAFETY: the caller's contract: a valid ThreadTrace that nothing refers to.
    unsafe { ptr::drop_in_place(p) };
    // SAFETY: the caller's contract: `make`'s mapping of LEN bytes, now unused.
    unsafe { libc::munmap(p.cast(), LEN) };
}

/// Releases the calling thread's ThreadTrace now, as thread exit would (tests).
#[cfg(test)]
pub(super) fn release_now() {
    let p = TRACE.with(|t| t.get()).cast_mut();
    if p.is_null() {
        return;
    }
    let key = key().expect("the key exists once a ThreadTrace does");
    // SAFETY: clearing our key's value, so that thread exit does not free `p` again.
    unsafe { libc::pthread_setspecific(key, ptr::null()) };
    // SAFETY: this thread's ThreadTrace, whose key value was just cleared.
    unsafe { release(p) };
}

/// Whether thread `tid`'s ThreadTrace at `addr` was freed.
#[cfg(test)]
pub(super) fn was_freed(tid: u32, addr: usize) -> bool {
    FREED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&(tid, addr))
}
