//! Forked children are traced, as perf traces them by default (`inherit`) and uftrace does.
//!
//! After `fork` the child's only thread is a copy of the thread that forked, with that
//! thread's slot, events and trace writer, whose buffers are memory the child shares with the
//! parent (the slot's memfds, `MAP_SHARED`). The child must not write a byte there, so its
//! `pthread_atfork` handler drops them without a write: swtrace's writer state and the core's
//! view of the thread are forgotten (their state stays in the child's copy of memory,
//! unreachable: releasing an event would write its last records), the open calls' guards are
//! made inert, and the thread is untried again. Its next hook claims a slot of its own and
//! opens the recorder's events for the child's pid and tid; the calls open at the fork are
//! then entered again in the child's trace, outermost first, so that the child, which returns
//! through them, shows them as uftrace does (`uftrace report` counts them once in the child).
//!
//! What else the child inherits, and why it writes nothing of the parent's: the core's other
//! threads' contexts and events are unreachable (no thread of the child runs them); POSIX
//! timers (task-clock samplers) are not inherited by a child; the probe events' hook
//! subscriptions stay in swtrace's registry, so hooked probes stay hooked, and the handler
//! finds the events observing the thread through the child's own context; a remote call
//! another thread had posted at the fork names a thread the child does not have.
//!
//! The recorder learns the child from its slot: its pid, and the parent's pid, the forking
//! thread's tid and the fork's time for its PERF_RECORD_FORK ([`crate::lineage`]).
//!
//! Each child also writes its pid and those words into the control area's table of children:
//! an image the child execs finds its pid there (`init`), and is traced as the child.
//!
//! Not handled: a fork while another thread of the parent holds a lock of the runtime or the
//! core (the child may then wait on it forever, as for any lock POSIX leaves held across
//! fork in a threaded program).

use std::cell::Cell;

thread_local! {
    /// The tid of the thread that calls fork, taken before the fork (the child's copy of it is
    /// the parent thread's tid).
    static FORKER: Cell<i32> = const { Cell::new(0) };
}

/// Registers the fork handlers (at init, on the only thread).
pub(crate) fn install() {
    crate::lineage::init_pid();
    // SAFETY: registers plain functions for the two sides of fork.
    unsafe { libc::pthread_atfork(Some(prepare), None, Some(in_child)) };
}

extern "C" fn prepare() {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let _ = FORKER.try_with(|f| f.set(tid));
}

extern "C" fn in_child() {
    // First, so that nothing after it can write the parent's trace: the writer, then the
    // core's view of the thread (its tid, pid and events).
    perfaux_swtrace::writer::forget_after_fork();
    perfaux_core::forget_after_fork();
    // A fork after an unshare(CLONE_NEWPID) puts the child in the new namespace, where its pid
    // means another process than in its parent's.
    crate::refresh_pid_ns();
    crate::lineage::forked(FORKER.try_with(Cell::get).unwrap_or(0));
    crate::thread::forked();
}
