//! Probes handed to a tracer outside this copy of swtrace: `perfaux record -- ./rustprog`.
//!
//! A Rust program that uses the probe macros links its own copy of this crate, with no writer
//! on any thread. When `perfaux record` starts it, the recorder's preload runtime (which
//! carries another copy, and the core) is loaded first and exports
//! [`ENTER_SYMBOL`] and [`EXIT_SYMBOL`]: the program's probes then go to the runtime, as the
//! compilers' `__cyg_profile_func_enter/exit` hooks of a C program do, and the runtime traces
//! them into the recorder's rings under the name of the function they sit in.
//!
//! The lookup is made once per process, at the first registration of a probe (a cold path that
//! already takes a lock and allocates), with `dlsym(RTLD_DEFAULT, ...)`. Found, every probe's
//! hook word keeps [`HOOK_FORWARD`]: its entries take the cold path, which calls the runtime,
//! and the guard's drop calls the runtime's exit. Not found (no runtime: the common case), or
//! a runtime that does not trace this process ([`ACTIVE_SYMBOL`]), nothing changes and the hot
//! path stays as it is. The runtime turns forwarding off in its own
//! copy ([`disable`]) before any of its probes runs, or its probes would call themselves.

use std::sync::atomic::AtomicU8;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// Hook word bit: entries and returns go to the preload runtime.
pub const HOOK_FORWARD: u32 = 4;

/// The runtime's entry function: `(key, ip) -> taken`. `key` names the open call (the probe's
/// address: its return passes the same key), `ip` an address inside the instrumented function.
/// Returns whether the runtime took the entry (then it takes the return too).
pub const ENTER_SYMBOL: &std::ffi::CStr = c"perfaux_preload_probe_enter";
/// The runtime's return function: `(key)`.
pub const EXIT_SYMBOL: &std::ffi::CStr = c"perfaux_preload_probe_exit";
/// The runtime's `(key, name, len)`: names the probe whose entries come with `ip == key` (an
/// exactly named probe, [`crate::probe::ProbeName::Exact`]); optional (an older runtime names
/// such probes by address).
pub const NAME_SYMBOL: &std::ffi::CStr = c"perfaux_preload_probe_name";
/// The runtime's `(value)`: tags the calling thread's innermost traced call (a TAG packet,
/// [`crate::ProbeGuard::tag`]); optional (an older runtime's trace has no tags).
pub const TAG_SYMBOL: &std::ffi::CStr = c"perfaux_preload_probe_tag";
/// The runtime's `(type, name, len)`: names a uevent type in the runtime's recording.
pub const UEVENT_TYPE_NAME_SYMBOL: &std::ffi::CStr = c"perfaux_preload_uevent_type_name";
/// The runtime's `(type, buf, len) -> 0 or -1`: a uevent into the calling thread's recording.
pub const UEVENT_SYMBOL: &std::ffi::CStr = c"perfaux_record_uevent";
/// The runtime's `() -> active`: whether it may trace this process (a runtime preloaded into a
/// process the recorder does not trace, e.g. one whose control area did not map, is inactive once its
/// constructor ran: the probes then keep their direct path instead of calling it on every
/// entry; asked before that constructor, it says it may).
pub const ACTIVE_SYMBOL: &std::ffi::CStr = c"perfaux_preload_active";

type EnterFn = unsafe extern "C" fn(usize, usize) -> bool;
type NameFn = unsafe extern "C" fn(usize, *const u8, usize);
type UeventFn = unsafe extern "C" fn(u32, *const libc::c_void, usize) -> i32;
type UeventNameFn = unsafe extern "C" fn(u32, *const u8, usize);
type ExitFn = unsafe extern "C" fn(usize);
type TagFn = unsafe extern "C" fn(u64);
type ActiveFn = unsafe extern "C" fn() -> bool;

const UNKNOWN: u8 = 0;
const NONE: u8 = 1;
const FOUND: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
static ENTER: AtomicUsize = AtomicUsize::new(0);
static EXIT: AtomicUsize = AtomicUsize::new(0);
static NAME: AtomicUsize = AtomicUsize::new(0);
static UEVENT: AtomicUsize = AtomicUsize::new(0);
static UEVENT_NAME: AtomicUsize = AtomicUsize::new(0);
static TAG: AtomicUsize = AtomicUsize::new(0);

/// Turns forwarding off in this copy of the crate (the preload runtime's own).
pub fn disable() {
    STATE.store(NONE, Release);
}

/// Whether probes go to a preload runtime; looks it up on the first call (with the registry's
/// lock held, so once).
pub(crate) fn resolve() -> bool {
    match STATE.load(Acquire) {
        FOUND => return true,
        NONE => return false,
        _ => {}
    }
    let lookup = |name: &std::ffi::CStr| {
        // SAFETY: dlsym with the default handle and a NUL-terminated name; a symbol that is
        // found is the runtime's export of the signature this module names.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
    };
    let (enter, exit, active) = (
        lookup(ENTER_SYMBOL),
        lookup(EXIT_SYMBOL),
        lookup(ACTIVE_SYMBOL),
    );
    let active = !active.is_null() && {
        // SAFETY: a non-null `active` is the runtime's export of type ActiveFn, which stays
        // loaded (it is preloaded).
        let f = unsafe { std::mem::transmute::<*mut libc::c_void, ActiveFn>(active) };
        // SAFETY: it reads two flags; no precondition.
        unsafe { f() }
    };
    if enter.is_null() || exit.is_null() || !active {
        STATE.store(NONE, Release);
        return false;
    }
    ENTER.store(enter as usize, Relaxed);
    EXIT.store(exit as usize, Relaxed);
    NAME.store(lookup(NAME_SYMBOL) as usize, Relaxed);
    UEVENT.store(lookup(UEVENT_SYMBOL) as usize, Relaxed);
    UEVENT_NAME.store(lookup(UEVENT_TYPE_NAME_SYMBOL) as usize, Relaxed);
    TAG.store(lookup(TAG_SYMBOL) as usize, Relaxed);
    STATE.store(FOUND, Release);
    true
}

/// Whether the runtime was looked up and found (`None`: not looked up yet).
pub(crate) fn found() -> Option<bool> {
    match STATE.load(Acquire) {
        FOUND => Some(true),
        NONE => Some(false),
        _ => None,
    }
}

/// Tells the runtime the name of `probe`, an exactly named one (its registration, once).
pub(crate) fn name(probe: &'static crate::Probe) {
    let f = NAME.load(Relaxed);
    if STATE.load(Acquire) != FOUND || f == 0 {
        return;
    }
    // SAFETY: NAME was stored before FOUND (Release/Acquire above) from the runtime's export
    // of type NameFn, which stays loaded.
    let f: NameFn = unsafe { std::mem::transmute::<usize, NameFn>(f) };
    let name = probe.name();
    // SAFETY: the runtime reads `name.len()` bytes at `name.as_ptr()` during the call.
    unsafe {
        f(
            probe as *const crate::Probe as usize,
            name.as_ptr(),
            name.len(),
        )
    }
}

/// Names uevent type `ty` in the runtime's recording (nothing without a runtime).
pub(crate) fn name_uevent_type(ty: u32, name: &str) {
    let f = UEVENT_NAME.load(Relaxed);
    if STATE.load(Acquire) != FOUND || f == 0 {
        return;
    }
    // SAFETY: as in `name`: the runtime's export of type UeventNameFn.
    let f: UeventNameFn = unsafe { std::mem::transmute::<usize, UeventNameFn>(f) };
    // SAFETY: the runtime reads `name.len()` bytes at `name.as_ptr()` during the call.
    unsafe { f(ty, name.as_ptr(), name.len()) }
}

/// A uevent of `type_` with `data` into the runtime's recording of the calling thread: 0, or
/// the errno the runtime's `perfaux_record_uevent` set (ENODEV without a runtime).
pub fn uevent(type_: u32, data: &[u8]) -> i32 {
    let f = UEVENT.load(Relaxed);
    if STATE.load(Acquire) != FOUND || f == 0 {
        return libc::ENODEV;
    }
    // SAFETY: as in `name`: the runtime's export of type UeventFn.
    let f: UeventFn = unsafe { std::mem::transmute::<usize, UeventFn>(f) };
    // SAFETY: the runtime reads `data.len()` bytes at `data.as_ptr()` during the call.
    if unsafe { f(type_, data.as_ptr().cast(), data.len()) } == 0 {
        0
    } else {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    }
}

/// Hands an entry to the runtime; whether it took it.
pub(crate) fn enter(key: usize, ip: usize) -> bool {
    if STATE.load(Acquire) != FOUND {
        return false;
    }
    let f = ENTER.load(Relaxed);
    // SAFETY: FOUND is stored after ENTER (Release/Acquire) and ENTER then holds the address of
    // the runtime's exported function of type EnterFn, which stays loaded (it is preloaded).
    let f: EnterFn = unsafe { std::mem::transmute::<usize, EnterFn>(f) };
    // SAFETY: the runtime's function takes any key and ip.
    unsafe { f(key, ip) }
}

/// Hands a return to the runtime (for an entry it took).
pub(crate) fn exit(key: usize) {
    let f = EXIT.load(Relaxed);
    if f == 0 {
        return;
    }
    // SAFETY: as in `enter`: a taken entry means FOUND, and EXIT was stored before it.
    let f: ExitFn = unsafe { std::mem::transmute::<usize, ExitFn>(f) };
    // SAFETY: the runtime's function takes any key.
    unsafe { f(key) }
}

/// Hands a tag of the innermost call to the runtime (after an entry it took).
pub(crate) fn tag(value: u64) {
    let f = TAG.load(Relaxed);
    if f == 0 {
        return;
    }
    // SAFETY: as in `exit`: a taken entry means FOUND, and TAG was stored before it, from the
    // runtime's export of type TagFn.
    let f: TagFn = unsafe { std::mem::transmute::<usize, TagFn>(f) };
    // SAFETY: the runtime's function takes any value.
    unsafe { f(value) }
}
