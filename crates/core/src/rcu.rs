//! `RcuCell`: a shared pointer that readers use without ever waiting and
//! without an atomic read-modify-write.
//!
//! The kernel reads `event->aux_event`, the group's sibling list and the
//! context's event lists under RCU from NMI context. Here the same reads
//! happen on hot paths (every uevent, every probe hit) and in signal
//! handlers (our NMI), where a lock could deadlock against the interrupted
//! thread. No crate in the workspace provides this (crossbeam-epoch and
//! arc-swap are not dependencies, and both take atomic RMWs per read),
//! hence this small piece, built the way user-space RCU is:
//!
//! - a reader marks itself in a per-thread word (a plain store: only the
//!   thread and its own signal handlers, which nest, write it), loads the
//!   pointer, uses it, and unmarks; leaving the outermost section bumps the
//!   thread's epoch;
//! - a writer swaps the pointer, then `membarrier(PRIVATE_EXPEDITED)` makes
//!   every thread of the process execute a full barrier, so each reader's
//!   mark is visible or its load sees the new pointer; it then waits until
//!   every marked thread has left (its epoch moved) and drops the old value
//!   (a grace period).
//!
//! Where `membarrier` is unavailable, readers fall back to a full fence.
//! Writers wait for readers, so a writer must not run inside a read
//! section on its own thread; the core only replaces cells from the
//! control path.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering, compiler_fence, fence};
use std::sync::{Arc, Mutex, OnceLock};

/// One thread's reader state.
struct ReaderState {
    /// Read-section nesting depth (signal handlers nest).
    depth: AtomicU64,
    /// Bumped when the thread leaves its outermost read section.
    epoch: AtomicU64,
}

fn readers() -> &'static Mutex<Vec<Arc<ReaderState>>> {
    static R: OnceLock<Mutex<Vec<Arc<ReaderState>>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Vec::new()))
}

/// Whether `membarrier(PRIVATE_EXPEDITED)` is registered; otherwise
/// readers fence.
fn membarrier_ok() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        const REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;
        // SAFETY: membarrier with a command and flags 0 has no memory
        // effects beyond its barriers; failure is returned.
        let r = unsafe { libc::syscall(libc::SYS_membarrier, REGISTER_PRIVATE_EXPEDITED, 0) };
        r == 0
    })
}

static STRONG_READERS: AtomicBool = AtomicBool::new(false);

thread_local! {
    static ME: Cell<*const ReaderState> = const { Cell::new(std::ptr::null()) };
    static ME_OWNER: Cell<Option<Arc<ReaderState>>> = const { Cell::new(None) };
}

/// The calling thread's reader state, registered on first use (which
/// allocates: a thread's first read should not be in a signal handler).
#[inline]
fn me() -> &'static ReaderState {
    let p = ME.with(Cell::get);
    if !p.is_null() {
        // SAFETY: the registry and ME_OWNER hold the Arc for the thread's
        // life; the registry keeps it until a writer prunes it after the
        // thread exited.
        return unsafe { &*p };
    }
    register()
}

#[cold]
fn register() -> &'static ReaderState {
    if !membarrier_ok() {
        STRONG_READERS.store(true, Ordering::SeqCst);
    }
    let st = Arc::new(ReaderState {
        depth: AtomicU64::new(0),
        epoch: AtomicU64::new(0),
    });
    readers()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(st.clone());
    let p = Arc::as_ptr(&st);
    ME_OWNER.with(|o| o.set(Some(st)));
    ME.with(|c| c.set(p));
    // SAFETY: as in `me`.
    unsafe { &*p }
}

/// An `Option<Arc<T>>` that readers access without RMW and
/// async-signal-safely.
pub struct RcuCell<T> {
    ptr: AtomicPtr<T>,
}

impl<T> RcuCell<T> {
    /// A cell holding `v`.
    pub fn new(v: Option<Arc<T>>) -> Self {
        Self {
            ptr: AtomicPtr::new(into_raw(v)),
        }
    }

    /// Runs `f` on the current value. Never blocks; safe in a signal handler.
    #[inline]
    pub fn read<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        let me = me();
        let d = me.depth.load(Ordering::Relaxed);
        me.depth.store(d + 1, Ordering::Relaxed);
        if STRONG_READERS.load(Ordering::Relaxed) {
            fence(Ordering::SeqCst);
        } else {
            compiler_fence(Ordering::SeqCst);
        }
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: `p` is null or came from `Arc::into_raw`; a writer that
        // swaps it out waits until this thread leaves its read section
        // (depth back to 0, epoch bumped) before releasing it.
        let r = f(unsafe { p.as_ref() });
        compiler_fence(Ordering::SeqCst);
        if d == 0 {
            me.epoch
                .store(me.epoch.load(Ordering::Relaxed) + 1, Ordering::Release);
        }
        me.depth.store(d, Ordering::Release);
        r
    }

    /// A new strong reference to the current value (an atomic increment:
    /// no allocation, so also usable in a signal handler).
    #[inline]
    pub fn get(&self) -> Option<Arc<T>> {
        self.read(|v| {
            v.map(|v| {
                let p: *const T = v;
                // SAFETY: `p` is the cell's live `Arc` pointer inside the
                // read section; incrementing first and rebuilding an Arc
                // from it keeps the counts balanced.
                unsafe { Arc::increment_strong_count(p) };
                // SAFETY: the increment above is this Arc's reference.
                unsafe { Arc::from_raw(p) }
            })
        })
    }

    /// Whether the cell holds a value (a racy hint).
    pub fn is_some(&self) -> bool {
        !self.ptr.load(Ordering::Relaxed).is_null()
    }

    /// Replaces the value and returns the old one once no reader can still
    /// see it.
    pub fn replace(&self, v: Option<Arc<T>>) -> Option<Arc<T>> {
        let old = self.ptr.swap(into_raw(v), Ordering::SeqCst);
        if old.is_null() {
            return None;
        }
        synchronize();
        // SAFETY: `old` came from `Arc::into_raw` in `new`/`replace` and
        // the cell's reference is handed back exactly once, here.
        Some(unsafe { Arc::from_raw(old) })
    }
}

/// `synchronize_rcu`: returns when every read section that began before the
/// call has ended.
fn synchronize() {
    if membarrier_ok() {
        const PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
        // SAFETY: registered in membarrier_ok; a barrier on every thread.
        unsafe { libc::syscall(libc::SYS_membarrier, PRIVATE_EXPEDITED, 0) };
    }
    fence(Ordering::SeqCst);
    let mut list = readers().lock().unwrap_or_else(|e| e.into_inner());
    // Threads that exited hold no read section: forget them.
    list.retain(|r| Arc::strong_count(r) > 1 || r.depth.load(Ordering::Acquire) != 0);
    let snapshot: Vec<(Arc<ReaderState>, u64)> = list
        .iter()
        .filter(|r| r.depth.load(Ordering::Acquire) != 0)
        .map(|r| (r.clone(), r.epoch.load(Ordering::Acquire)))
        .collect();
    drop(list);
    let mine = ME.with(Cell::get);
    for (r, epoch) in snapshot {
        if std::ptr::eq(Arc::as_ptr(&r), mine) {
            continue;
        }
        while r.depth.load(Ordering::Acquire) != 0 && r.epoch.load(Ordering::Acquire) == epoch {
            std::thread::yield_now();
        }
    }
}

fn into_raw<T>(v: Option<Arc<T>>) -> *mut T {
    v.map_or(std::ptr::null_mut(), |a| Arc::into_raw(a).cast_mut())
}

impl<T> Drop for RcuCell<T> {
    fn drop(&mut self) {
        let p = *self.ptr.get_mut();
        if !p.is_null() {
            // SAFETY: the cell owns one reference from `Arc::into_raw`; with
            // `&mut self` no reader of this cell exists.
            drop(unsafe { Arc::from_raw(p) });
        }
    }
}

impl<T> Default for RcuCell<T> {
    fn default() -> Self {
        Self::new(None)
    }
}

// SAFETY: the cell only hands out `&T` and `Arc<T>`, exactly what
// `Arc<T>: Send + Sync` allows.
unsafe impl<T: Send + Sync> Send for RcuCell<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for RcuCell<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_returns_the_old_value_and_readers_see_the_new_one() {
        let c = RcuCell::new(Some(Arc::new(1)));
        assert_eq!(c.read(|v| v.copied()), Some(1));
        let old = c.replace(Some(Arc::new(2)));
        assert_eq!(old.as_deref(), Some(&1));
        assert_eq!(c.get().as_deref(), Some(&2));
        assert!(c.replace(None).is_some());
        assert!(!c.is_some());
    }

    #[test]
    fn values_are_released_exactly_once() {
        let v = Arc::new(5);
        let c = RcuCell::new(Some(v.clone()));
        let g = c.get();
        assert_eq!(Arc::strong_count(&v), 3);
        drop(g);
        drop(c);
        assert_eq!(Arc::strong_count(&v), 1);
    }

    #[test]
    fn a_writer_waits_for_a_reader_on_another_thread() {
        use std::sync::atomic::AtomicUsize;
        let c = Arc::new(RcuCell::new(Some(Arc::new(AtomicUsize::new(0)))));
        let (in_tx, in_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let c2 = c.clone();
        let h = std::thread::spawn(move || {
            c2.read(|v| {
                in_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                // Still valid: the writer has not dropped it.
                v.unwrap().fetch_add(1, Ordering::SeqCst)
            })
        });
        in_rx.recv().unwrap();
        let released = Arc::new(AtomicBool::new(false));
        let r2 = released.clone();
        let c3 = c.clone();
        let w = std::thread::spawn(move || {
            let old = c3.replace(None);
            r2.store(true, Ordering::SeqCst);
            old
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !released.load(Ordering::SeqCst),
            "grace period waits for the reader"
        );
        go_tx.send(()).unwrap();
        assert_eq!(h.join().unwrap(), 0);
        let old = w.join().unwrap().unwrap();
        assert_eq!(old.load(Ordering::SeqCst), 1);
    }
}
