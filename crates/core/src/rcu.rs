//! `RcuCell`: a shared pointer that readers use without ever waiting.
//!
//! The kernel reads `event->rb`, `event->aux_event` and the context's event
//! lists under RCU from NMI context. Here the same reads happen on hot paths
//! and in signal handlers (our NMI), where a lock could deadlock against the
//! interrupted thread. Readers announce themselves with one counter
//! increment and never wait; a writer swaps the pointer and waits until the
//! readers that might hold the old value have left before dropping it (a
//! grace period). No crate in the workspace provides this (arc-swap is not a
//! dependency, and its debt lists allocate), hence this small piece.
//!
//! Writers wait for *all* current readers, so a writer must not be called
//! from inside a read section of the same cell (it would wait on itself);
//! the core only replaces cells from ordinary (non-handler) code.

use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// An `Option<Arc<T>>` that readers access lock-free and async-signal-safely.
pub(crate) struct RcuCell<T> {
    ptr: AtomicPtr<T>,
    readers: AtomicUsize,
}

impl<T> RcuCell<T> {
    /// A cell holding `v`.
    pub(crate) fn new(v: Option<Arc<T>>) -> Self {
        Self {
            ptr: AtomicPtr::new(into_raw(v)),
            readers: AtomicUsize::new(0),
        }
    }

    /// Runs `f` on the current value. Never blocks; safe in a signal handler.
    #[inline]
    pub(crate) fn read<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        self.readers.fetch_add(1, Ordering::SeqCst);
        let p = self.ptr.load(Ordering::SeqCst);
        // SAFETY: `p` is null or came from `Arc::into_raw`; a writer that
        // swaps it out waits for `readers` to drop to zero before releasing
        // its reference, and we are counted in `readers` until below.
        let r = f(unsafe { p.as_ref() });
        self.readers.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// A new strong reference to the current value (an atomic increment: no
    /// allocation, so also usable in a signal handler).
    #[inline]
    pub(crate) fn get(&self) -> Option<Arc<T>> {
        self.readers.fetch_add(1, Ordering::SeqCst);
        let p = self.ptr.load(Ordering::SeqCst);
        let r = if p.is_null() {
            None
        } else {
            // SAFETY: as in `read`: `p` is a live `Arc` pointer while we are
            // counted; incrementing first and rebuilding the Arc after keeps
            // the counts balanced (one `into_raw` reference stays owned by
            // the cell).
            unsafe { Arc::increment_strong_count(p) };
            // SAFETY: the increment above is the reference this Arc owns.
            Some(unsafe { Arc::from_raw(p) })
        };
        self.readers.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Whether the cell holds a value (a racy hint).
    pub(crate) fn is_some(&self) -> bool {
        !self.ptr.load(Ordering::Relaxed).is_null()
    }

    /// Replaces the value and returns the old one once no reader can still
    /// see it.
    pub(crate) fn replace(&self, v: Option<Arc<T>>) -> Option<Arc<T>> {
        let old = self.ptr.swap(into_raw(v), Ordering::SeqCst);
        while self.readers.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        if old.is_null() {
            None
        } else {
            // SAFETY: `old` came from `Arc::into_raw` in `new`/`replace` and
            // the cell's reference is handed back exactly once, here.
            Some(unsafe { Arc::from_raw(old) })
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
            // `&mut self` no reader exists.
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
}
