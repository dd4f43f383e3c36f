//! `GraveCell`: a pointer that readers load with one plain atomic load,
//! because what it pointed to is kept until the cell itself goes.
//!
//! `event->rb` and a buffer's AUX state change only on mmap, munmap and
//! `SET_OUTPUT`, a handful of times in an event's life, but are read on
//! every record. Keeping each replaced value (the "grave") until the owner
//! is dropped makes the read path a single `Acquire` load, safe in a signal
//! handler; the cost is that a replaced buffer's memory is released when
//! its event (or buffer) is, not at the moment it is replaced.

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};

/// An `Option<Arc<T>>` whose reads borrow from the cell.
pub(crate) struct GraveCell<T> {
    ptr: AtomicPtr<T>,
    /// Every value ever stored (the current one included).
    grave: Mutex<Vec<Arc<T>>>,
}

impl<T> Default for GraveCell<T> {
    fn default() -> Self {
        Self {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            grave: Mutex::new(Vec::new()),
        }
    }
}

impl<T> GraveCell<T> {
    /// The current value, valid for as long as the cell.
    #[inline]
    pub(crate) fn load(&self) -> Option<&T> {
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: every non-null pointer stored came from an `Arc` that the
        // grave owns until `self` is dropped, which `&self` rules out here.
        unsafe { p.as_ref() }
    }

    /// A strong reference to the current value.
    pub(crate) fn get(&self) -> Option<Arc<T>> {
        let g = self.grave.lock().unwrap_or_else(|e| e.into_inner());
        let p = self.ptr.load(Ordering::Acquire);
        g.iter().find(|a| std::ptr::eq(Arc::as_ptr(a), p)).cloned()
    }

    /// Stores `v`; the old value stays readable until the cell is dropped.
    pub(crate) fn store(&self, v: Option<Arc<T>>) {
        let mut g = self.grave.lock().unwrap_or_else(|e| e.into_inner());
        let p = match v {
            Some(a) => {
                let p = Arc::as_ptr(&a).cast_mut();
                if !g.iter().any(|x| Arc::ptr_eq(x, &a)) {
                    g.push(a);
                }
                p
            }
            None => std::ptr::null_mut(),
        };
        self.ptr.store(p, Ordering::Release);
    }
}
