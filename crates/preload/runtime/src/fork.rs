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
//! thread's tid and the fork's time for its PERF_RECORD_FORK.
//!
//! Each child also writes its pid and those words into the control area's table of children:
//! an image the child execs finds its pid there (`init`), and is traced as the child.
//!
//! Not handled: a fork while another thread of the parent holds a lock of the runtime or the
//! core (the child may then wait on it forever, as for any lock POSIX leaves held across
//! fork in a threaded program).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use perfaux_preload_abi::{ChildEntry, Control, slot};

/// This process's pid (set at init, and again in a forked child).
static PID: AtomicU64 = AtomicU64::new(0);
/// A forked child: its parent's pid, the forking thread's tid and when the child began (all 0
/// in the spawned program).
static PPID: AtomicU64 = AtomicU64::new(0);
static PTID: AtomicU64 = AtomicU64::new(0);
static FORK_TIME: AtomicU64 = AtomicU64::new(0);
/// This image belongs to a process made without a fork handler, not yet in the table of
/// children.
static SPAWNED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The tid of the thread that calls fork, taken before the fork (the child's copy of it is
    /// the parent thread's tid).
    static FORKER: Cell<i32> = const { Cell::new(0) };
}

/// Registers the fork handlers (at init, on the only thread).
pub(crate) fn install() {
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() } as u64, Ordering::Relaxed);
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
    // Its own fork's entry is written below; a spawned parent's is not its own.
    SPAWNED.store(false, Ordering::Relaxed);
    let ptid = FORKER.try_with(Cell::get).unwrap_or(0);
    PPID.store(PID.load(Ordering::Relaxed), Ordering::Relaxed);
    PTID.store(ptid as u64, Ordering::Relaxed);
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() } as u64, Ordering::Relaxed);
    // A fork after an unshare(CLONE_NEWPID) puts the child in the new namespace, where its pid
    // means another process than in its parent's.
    crate::refresh_pid_ns();
    FORK_TIME.store(perfaux_swtrace::clock::monotonic_ns(), Ordering::Relaxed);
    if let Some(ctl) = crate::control() {
        add_child(&ctl, PID.load(Ordering::Relaxed));
    }
    crate::thread::forked();
}

/// Whether `pid` is a child the traced processes forked (an image it exec'd is traced, `init`):
/// its fork's words are taken from its entry (the newest with that pid), so that its threads'
/// slots carry them as the child's did.
pub(crate) fn is_forked_child(ctl: &Control, pid: u64) -> bool {
    let Some(c) = ctl.find_child(pid, crate::pid_ns()) else {
        return false;
    };
    PPID.store(c.ppid, Ordering::Relaxed);
    PTID.store(c.ptid, Ordering::Relaxed);
    FORK_TIME.store(c.fork_time, Ordering::Relaxed);
    true
}

/// This process is an image exec'd by a descendant made without a fork handler (posix_spawn,
/// vfork: no entry in the table of children): its parent is `getppid()`, the forking thread is
/// not known (the parent's main thread stands for it, as perf names a process by its main
/// thread) and its fork's time is this image's start, the earliest moment the runtime sees.
pub(crate) fn spawned_descendant() {
    // SAFETY: getppid has no preconditions.
    let ppid = unsafe { libc::getppid() } as u64;
    PPID.store(ppid, Ordering::Relaxed);
    PTID.store(ppid, Ordering::Relaxed);
    FORK_TIME.store(perfaux_swtrace::clock::monotonic_ns(), Ordering::Relaxed);
    SPAWNED.store(true, Ordering::Relaxed);
}

/// A spawned descendant ([`spawned_descendant`]) that traces goes into the table of
/// children as a forked child does, so that an image it execs next is the same process (one
/// FORK, one EXIT); one that never traces takes no entry.
pub(crate) fn register_spawned(ctl: &Control) {
    if SPAWNED.swap(false, Ordering::Relaxed) {
        add_child(ctl, PID.load(Ordering::Relaxed));
    }
}

/// Writes this process's fork words into the next entry of the table of children.
fn add_child(ctl: &Control, pid: u64) {
    ctl.push_child(&ChildEntry {
        pid,
        ppid: PPID.load(Ordering::Relaxed),
        ptid: PTID.load(Ordering::Relaxed),
        fork_time: FORK_TIME.load(Ordering::Relaxed),
        pid_ns: crate::pid_ns(),
    });
}

/// This process's pid.
pub(crate) fn pid() -> u64 {
    PID.load(Ordering::Relaxed)
}

/// Writes the fork's words into slot `i` (a thread of a forked child), before the slot is
/// published.
pub(crate) fn write_slot(ctl: &Control, i: usize) {
    for (off, v) in [slot::PPID, slot::PTID, slot::FORK_TIME]
        .into_iter()
        .zip([&PPID, &PTID, &FORK_TIME])
    {
        ctl.slot_word(i, off)
            .store(v.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}
