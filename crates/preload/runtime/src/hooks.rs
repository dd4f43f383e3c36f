//! The compilers' instrumentation hooks.

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use crate::thread::THREAD;

/// `-finstrument-functions`: entry into `func`, called from `site`.
#[unsafe(no_mangle)]
pub extern "C" fn __cyg_profile_func_enter(func: *mut c_void, _site: *mut c_void) {
    if crate::ACTIVE.load(Ordering::Relaxed) {
        let _ = THREAD.try_with(|t| t.enter(func as usize));
    }
}

/// `-finstrument-functions`: exit from `func`.
#[unsafe(no_mangle)]
pub extern "C" fn __cyg_profile_func_exit(func: *mut c_void, _site: *mut c_void) {
    if crate::ACTIVE.load(Ordering::Relaxed) {
        let _ = THREAD.try_with(|t| t.exit(func as usize));
    }
}
