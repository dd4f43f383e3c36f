//! Threads and CPUs as the core sees them, and the per-thread context that
//! lists the events observing a thread (`task->perf_event_ctxp`).
//!
//! The lists are read on hot paths (uevents, probe hooks) and possibly in a
//! signal handler, so they are `RcuCell`s: copied and swapped by the
//! control path, read without a lock. A thread's context is found through a
//! thread-local pointer; contexts live as long as the process (one small
//! struct per tid ever observed or emitting), so that pointer never dangles.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::event::{Event, EventList, Target};
use crate::rcu::RcuCell;

/// The events that observe one thread.
pub(crate) struct ThreadCtx {
    pub(crate) events: RcuCell<EventList>,
}

thread_local! {
    static TID: Cell<i32> = const { Cell::new(0) };
    static CTX: Cell<*const ThreadCtx> = const { Cell::new(std::ptr::null()) };
}

/// The calling thread's tid. Async-signal-safe.
#[inline]
pub fn gettid() -> i32 {
    TID.with(|t| {
        let v = t.get();
        if v != 0 {
            return v;
        }
        // SAFETY: gettid has no preconditions.
        let v = unsafe { libc::gettid() };
        t.set(v);
        v
    })
}

/// This process's pid, once read ([`forget_after_fork`] clears it).
static PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// This process's pid (`getpid()` is a system call on glibc; the pid is
/// read once).
#[inline]
pub fn getpid() -> u32 {
    let p = PID.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    let p = std::process::id();
    PID.store(p, Ordering::Relaxed);
    p
}

/// In the child of a `fork`, on the thread that forked (its only thread),
/// before anything else of the core runs there: forgets the parent's view
/// of this thread, without touching it. The cached tid and pid are the
/// parent's, and the thread's context lists the parent's events, whose
/// buffers may be memory shared with the parent (`mmap_over`): reached
/// from the child, a probe hit or a uevent would write into them. After
/// this the thread finds a context of its own tid (empty until events are
/// opened for it); the parent's contexts and events stay in the child's
/// copy of memory, unreachable and never released (releasing an event
/// writes its last records). It takes no lock and allocates nothing: for a
/// `pthread_atfork` child handler.
pub fn forget_after_fork() {
    TID.with(|t| t.set(0));
    CTX.with(|c| c.set(std::ptr::null()));
    PID.store(0, Ordering::Relaxed);
}

/// The CPU the calling thread runs on (`smp_processor_id()`).
/// Async-signal-safe.
#[inline]
pub fn current_cpu() -> i32 {
    // SAFETY: sched_getcpu has no preconditions.
    unsafe { libc::sched_getcpu() }
}

/// The number of CPUs a `cpu` argument may name (`nr_cpu_ids`).
pub fn nr_cpu_ids() -> i32 {
    static N: OnceLock<i32> = OnceLock::new();
    *N.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        if n < 1 { 1 } else { n as i32 }
    })
}

/// Whether `tid` is a live thread of this process
/// (`find_lively_task_by_vpid`, restricted to the process).
pub(crate) fn thread_exists(tid: i32) -> bool {
    if tid <= 0 {
        return false;
    }
    let pid = std::process::id() as libc::pid_t;
    // SAFETY: tgkill with signal 0 only checks existence and permission.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, 0) };
    r == 0
}

struct Contexts {
    threads: Mutex<HashMap<i32, &'static ThreadCtx>>,
    /// Events with `Target::AnyThread` (per-CPU events).
    cpu_wide: RcuCell<EventList>,
    cpu_wide_len: AtomicUsize,
    /// Serialises list updates.
    writers: Mutex<()>,
}

fn contexts() -> &'static Contexts {
    static C: OnceLock<Contexts> = OnceLock::new();
    C.get_or_init(|| Contexts {
        threads: Mutex::new(HashMap::new()),
        cpu_wide: RcuCell::new(Some(Arc::new(EventList(Vec::new())))),
        cpu_wide_len: AtomicUsize::new(0),
        writers: Mutex::new(()),
    })
}

fn ctx_for_tid(tid: i32) -> &'static ThreadCtx {
    let mut m = contexts().threads.lock().unwrap_or_else(|e| e.into_inner());
    m.entry(tid).or_insert_with(|| {
        Box::leak(Box::new(ThreadCtx {
            events: RcuCell::new(Some(Arc::new(EventList(Vec::new())))),
        }))
    })
}

/// The context of thread `tid` if one was ever made (no context is made here).
pub(crate) fn existing_ctx(tid: i32) -> Option<&'static ThreadCtx> {
    let p = CTX.with(Cell::get);
    if !p.is_null() && tid == gettid() {
        // SAFETY: contexts are leaked boxes, never freed.
        return Some(unsafe { &*p });
    }
    let m = contexts().threads.lock().unwrap_or_else(|e| e.into_inner());
    m.get(&tid).copied()
}

/// The calling thread's context. The first call on a thread takes a lock
/// and may allocate: not for the first call from a signal handler.
#[inline]
pub(crate) fn current_ctx() -> &'static ThreadCtx {
    CTX.with(|c| {
        let p = c.get();
        if !p.is_null() {
            // SAFETY: contexts are leaked boxes, never freed.
            return unsafe { &*p };
        }
        let ctx = ctx_for_tid(gettid());
        c.set(ctx);
        ctx
    })
}

/// Runs `f` on every event that observes the calling thread: its own
/// context's events, then the per-CPU events. Lock-free.
#[inline]
pub fn for_each_observing(mut f: impl FnMut(&Arc<Event>)) {
    current_ctx().events.read(|l| {
        if let Some(l) = l {
            l.0.iter().for_each(&mut f);
        }
    });
    let c = contexts();
    if c.cpu_wide_len.load(Ordering::Relaxed) != 0 {
        c.cpu_wide.read(|l| {
            if let Some(l) = l {
                l.0.iter().for_each(&mut f);
            }
        });
    }
}

pub(crate) fn edit(cell: &RcuCell<EventList>, f: impl FnOnce(&mut Vec<Arc<Event>>)) -> usize {
    let mut v = cell.read(|l| l.map(|l| l.0.clone()).unwrap_or_default());
    f(&mut v);
    let n = v.len();
    cell.replace(Some(Arc::new(EventList(v))));
    n
}

/// Puts `event` into the context of what it observes
/// (`perf_install_in_context`).
pub(crate) fn install(event: &Arc<Event>) {
    let c = contexts();
    let _w = c.writers.lock().unwrap_or_else(|e| e.into_inner());
    match event.target() {
        Target::Thread(tid) => {
            edit(&ctx_for_tid(tid).events, |v| v.push(event.clone()));
        }
        Target::AnyThread => {
            let n = edit(&c.cpu_wide, |v| v.push(event.clone()));
            c.cpu_wide_len.store(n, Ordering::Relaxed);
        }
    }
}

/// Takes `event` out of its context (`perf_remove_from_context`); returns
/// once no lock-free reader can still reach it through the lists.
pub(crate) fn uninstall(event: &Event) {
    let c = contexts();
    let _w = c.writers.lock().unwrap_or_else(|e| e.into_inner());
    let keep = |v: &mut Vec<Arc<Event>>| v.retain(|e| e.id() != event.id());
    match event.target() {
        Target::Thread(tid) => {
            edit(&ctx_for_tid(tid).events, keep);
        }
        Target::AnyThread => {
            let n = edit(&c.cpu_wide, keep);
            c.cpu_wide_len.store(n, Ordering::Relaxed);
        }
    }
}
