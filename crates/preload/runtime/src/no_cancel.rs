//! The runtime adds no cancellation point to the program: its setup of a thread, its end, and
//! the rescan of the loaded objects call close, open, nanosleep and poll, which are
//! cancellation points (pthreads(7)), so each runs with deferred cancellation held off.

/// Deferred cancellation held off while it lives: the runtime's setup of a thread (its
/// close, open, nanosleep and poll calls are cancellation points) must add none to the
/// program. A `pthread_cancel` that came meanwhile acts at the program's own next
/// cancellation point, as it would without perfaux; cut short inside the setup, the thread
/// would lose the call that was entering and hold its slot CLAIMED for the recording's life.
pub(crate) struct NoCancel(libc::c_int);

/// glibc's and musl's value (the libc crate has no binding of these for Linux).
const PTHREAD_CANCEL_DISABLE: libc::c_int = 1;

unsafe extern "C" {
    fn pthread_setcancelstate(state: libc::c_int, oldstate: *mut libc::c_int) -> libc::c_int;
}

impl NoCancel {
    pub(crate) fn new() -> NoCancel {
        let mut old = 0;
        // SAFETY: pthread_setcancelstate with a valid state and a place for the old one.
        unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) };
        NoCancel(old)
    }
}

impl Drop for NoCancel {
    fn drop(&mut self) {
        let mut old = 0;
        // SAFETY: as in new, restoring the state new found.
        unsafe { pthread_setcancelstate(self.0, &mut old) };
    }
}
