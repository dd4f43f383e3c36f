//! The fd table: what turns a `group_fd` or a `SET_OUTPUT` argument into an
//! event, and what `close()` releases.
//!
//! Numbers start far above the process's real descriptors, so a real fd
//! (stdin, a file) passed as `group_fd` is "not a perf event" and gets EBADF,
//! as `is_perf_file()` gives it in the kernel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Result, ebadf};
use crate::event::Event;

/// The first number the table hands out.
pub const FD_BASE: i32 = 1 << 20;

fn table() -> &'static Mutex<HashMap<i32, Arc<Event>>> {
    static T: OnceLock<Mutex<HashMap<i32, Arc<Event>>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
}

pub(crate) fn insert(event: Arc<Event>) -> i32 {
    static NEXT: AtomicI32 = AtomicI32::new(FD_BASE);
    let fd = NEXT.fetch_add(1, Ordering::Relaxed);
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(fd, event);
    fd
}

/// The event behind `fd`, or EBADF.
pub fn lookup(fd: i32) -> Result<Arc<Event>> {
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&fd)
        .cloned()
        .ok_or_else(|| ebadf("fd is not a perf event"))
}

pub(crate) fn remove(fd: i32) -> Option<Arc<Event>> {
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&fd)
}
