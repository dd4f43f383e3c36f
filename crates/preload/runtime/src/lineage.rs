//! This process's pid and the fork that made it: the parent's pid, the forking thread's tid
//! and the fork's time, which every slot of the process carries (the recorder's
//! PERF_RECORD_FORK) and which the control area's table of children keeps for an image the
//! process execs. Set at init, and again in a forked child by the fork handler ([`crate::fork`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use perfaux_preload_abi::{ChildEntry, Control, Slot};

/// This process's pid.
static PID: AtomicU64 = AtomicU64::new(0);
/// A forked child: its parent's pid, the forking thread's tid and when the child began (all 0
/// in the spawned program).
static PPID: AtomicU64 = AtomicU64::new(0);
static PTID: AtomicU64 = AtomicU64::new(0);
static FORK_TIME: AtomicU64 = AtomicU64::new(0);
/// This image belongs to a process made without a fork handler, not yet in the table of
/// children.
static SPAWNED: AtomicBool = AtomicBool::new(false);

/// Takes this process's pid (at init, on the only thread).
pub(crate) fn init_pid() {
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() } as u64, Ordering::Relaxed);
}

/// In a forked child (the fork handler, which must not allocate): the process that forked is
/// the parent, `ptid` its forking thread, now the fork's time; the child's entry goes into
/// the table of children.
pub(crate) fn forked(ptid: i32) {
    // Its own fork's entry is written below; a spawned parent's is not its own.
    SPAWNED.store(false, Ordering::Relaxed);
    PPID.store(PID.load(Ordering::Relaxed), Ordering::Relaxed);
    PTID.store(ptid as u64, Ordering::Relaxed);
    init_pid();
    FORK_TIME.store(perfaux_swtrace::clock::monotonic_ns(), Ordering::Relaxed);
    if let Some(ctl) = crate::control() {
        add_child(&ctl, PID.load(Ordering::Relaxed));
    }
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

/// Writes the fork's words into slot `s` (a thread of a forked child), before the slot is
/// published.
pub(crate) fn write_slot(s: &Slot) {
    s.ppid
        .store(PPID.load(Ordering::Relaxed), Ordering::Relaxed);
    s.ptid
        .store(PTID.load(Ordering::Relaxed), Ordering::Relaxed);
    s.fork_time
        .store(FORK_TIME.load(Ordering::Relaxed), Ordering::Relaxed);
}
