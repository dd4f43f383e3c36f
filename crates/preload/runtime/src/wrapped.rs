//! The functions the runtime wraps (libgcc's unwinder, libc's `sigaction`): each wrapper
//! calls the next definition after the runtime's own, found with `dlsym(RTLD_NEXT)`.

use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The next definition of `name` after this library's, or 0.
pub(crate) fn next(name: &CStr) -> usize {
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize }
}

/// The wrapped function `slot` holds, looked up now if the constructor has not run (a call
/// from another library's constructor).
pub(crate) fn real(slot: &AtomicUsize, name: &CStr) -> usize {
    let f = slot.load(Ordering::Relaxed);
    if f != 0 {
        return f;
    }
    let f = next(name);
    slot.store(f, Ordering::Relaxed);
    f
}
