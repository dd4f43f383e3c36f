//! The runtime `perfaux record` preloads into a traced program (`libperfaux_runtime.so`).
//!
//! - [`init`] (an `.init_array` constructor) maps the recorder's control memfd named by
//!   `PERFAUX_PRELOAD_FD` and reports the loaded objects ([`objects`]); without it (a process
//!   that is no descendant of the recorder's program), every hook returns at once.
//! - [`hooks`]: the compilers' entry/exit hooks. A function address becomes a swtrace probe the
//!   first time it is seen ([`intern`]); the probe's guard waits on the thread's return stack
//!   until the matching exit.
//! - [`thread`]: each thread, on its first hook, claims a slot ([`slot`]) and opens the
//!   recorder's events ([`traced`], from the table [`events`] read: the trace PMU's event over
//!   the slot's memory, the others in its group or redirected into its buffer, as `perf
//!   record` opens them); its thread-local destructor ends them cleanly.
//! - [`patch`]: `-P`, the entries of a program built without instrumentation patched in the
//!   constructor to stubs ([`stub_region`]) that enter the call as `-pg`'s hook does, and
//!   those of objects a `dlopen` maps, before their code runs ([`dl_watch`]).
//! - [`fork`]: a forked child is traced too (perf's inherit default): it leaves its parent's
//!   slot and events without a write and traces into a slot of its own, whose words say the
//!   fork ([`lineage`]).
//!
//! The modules import one way (tests/layers.rs): the leaves (`events`, `memfds`, `lineage`)
//! below `objects` and `slot`, below `intern` and `traced`, below `thread`, below what calls
//! into it (`hooks`, `trampoline`, `fork`, `crash`), then `dl_watch`, then `unwind` and
//! `patch`.

mod crash;
mod dl_watch;
mod events;
mod fork;
mod hooks;
mod intern;
mod lineage;
mod memfds;
mod no_cancel;
mod objects;
mod patch;
mod plt_hooks;
mod recorder_alive;
mod ring_maps;
mod sigtrap;
mod slot;
mod stub_region;
mod text;
mod thread;
mod traced;
mod trampoline;
mod unwind;
mod wrapped;

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use perfaux_preload_abi::{self as shared, Control};

/// Set once the control area is mapped: this is the process the recorder spawned or a
/// descendant of it (a forked child, or an image any of them exec'd).
pub(crate) static ACTIVE: AtomicBool = AtomicBool::new(false);
static CTL: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
/// Set when the constructor has run, whatever it found: until then [`ACTIVE`] says nothing
/// (the constructors of the program's own libraries may run first).
pub(crate) static INIT_DONE: AtomicBool = AtomicBool::new(false);

/// The control area, once mapped.
pub(crate) fn control() -> Option<Control> {
    let p = CTL.load(Ordering::Acquire);
    // SAFETY: a non-null CTL is a mapping of shared::total_len() bytes that is never unmapped.
    (!p.is_null()).then(|| unsafe { Control::new(p) })
}

/// When this image's runtime began (its constructor): [`shared::Slot::image_time`].
static IMAGE_TIME: AtomicU64 = AtomicU64::new(0);
/// The inode of this process's pid namespace ([`shared::Slot::pid_ns`]).
static PID_NS: AtomicU64 = AtomicU64::new(0);

/// When this image's runtime began (CLOCK_MONOTONIC ns).
pub(crate) fn image_time() -> u64 {
    IMAGE_TIME.load(Ordering::Relaxed)
}

/// The inode of this process's pid namespace (0: not known): pids are its own.
pub(crate) fn pid_ns() -> u64 {
    PID_NS.load(Ordering::Relaxed)
}

/// Reads this process's pid namespace into [`pid_ns`]: at the start of an image and in a
/// forked child. A stat(2) and no allocation, as a fork handler must (a fork from a signal
/// handler).
pub(crate) fn refresh_pid_ns() {
    // SAFETY: an all-zero `stat` is a valid value of the plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a `stat` that lives across the call.
    let ok = unsafe { libc::stat(c"/proc/self/ns/pid".as_ptr(), &mut st) } == 0;
    PID_NS.store(if ok { st.st_ino } else { 0 }, Ordering::Relaxed);
}

/// The constructor: maps the control area and reports the loaded objects.
extern "C" fn init() {
    /// Marks the constructor done on every way out of it.
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            INIT_DONE.store(true, Ordering::Release);
        }
    }
    let _done = Done;
    // This copy of swtrace serves the runtime: its probes are the traced program's calls and
    // must not be handed back to the runtime (crate perfaux_swtrace::forward), as a Rust
    // program's own copy does.
    IMAGE_TIME.store(perfaux_swtrace::clock::monotonic_ns(), Ordering::Relaxed);
    refresh_pid_ns();
    perfaux_swtrace::forward::disable();
    unwind::resolve();
    sigtrap::resolve();
    let Some(fd) = env_at_start(c"PERFAUX_PRELOAD_FD").and_then(|s| s.parse::<i32>().ok()) else {
        return;
    };
    debug_assert_eq!(shared::ENV_CTL_FD, "PERFAUX_PRELOAD_FD");
    // The trace PMU is a driver outside the core: register the drivers before
    // any thread opens its event (the constructor runs on the only thread).
    perfaux_pmus::register();
    if !recorder_alive::watch(memfds::remember_fd_dir()) {
        return;
    }
    let Some(p) = memfds::control_candidates(fd).find_map(|f| map_control(&f)) else {
        return;
    };
    // SAFETY: p maps total_len() bytes, page aligned, never unmapped.
    let ctl = unsafe { Control::new(p.cast()) };
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u64;
    if recording_closed(&ctl) {
        // SAFETY: p is the mapping made above, used by nothing else.
        unsafe { libc::munmap(p, shared::total_len()) };
        return;
    }
    if ctl.header().pid.load(Ordering::Acquire) != pid && !lineage::is_forked_child(&ctl, pid) {
        // A process the recorder's descendants made without a fork handler (posix_spawn,
        // vfork: a shell's commands, a build tool's jobs) that exec'd this image: it inherited
        // the control area as every descendant does, and perf's inherit traces it too.
        lineage::spawned_descendant();
    }
    CTL.store(p.cast(), Ordering::Release);
    // SAFETY: the word lies in the control mapping made above, which is never unmapped: it
    // lives as long as the process.
    let ids: &'static AtomicU64 = unsafe { &*std::ptr::from_ref(&ctl.header().next_event_id) };
    perfaux_core::share_event_ids(ids);
    fork::install();
    // Before any object is reported (which resolves the probe events' functions) and any
    // probe is made.
    events::load(&ctl);
    ACTIVE.store(true, Ordering::Release);
    // Last: the program's code may call the hooks from here on.
    patch::install(&ctl);
}

/// The environment variable `name`, if set and UTF-8: for the constructor only (constructors
/// run before main, on the only thread: no setenv runs while it is read).
pub(crate) fn env_at_start(name: &std::ffi::CStr) -> Option<String> {
    // SAFETY: getenv with a NUL-terminated name, under the contract above.
    let v = unsafe { libc::getenv(name.as_ptr()) };
    if v.is_null() {
        return None;
    }
    // SAFETY: getenv returned a NUL-terminated string, copied out at once.
    let s = unsafe { std::ffi::CStr::from_ptr(v) };
    s.to_str().ok().map(str::to_owned)
}

/// Maps the control memfd candidate `f` (its size checked: total_len); the mapping if it holds
/// this runtime's magic and version (it outlives the descriptor).
fn map_control(f: &std::os::fd::OwnedFd) -> Option<*mut libc::c_void> {
    // SAFETY: a fresh shared mapping of a memfd whose size is total_len (checked by the
    // caller's candidates).
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            shared::total_len(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            std::os::fd::AsRawFd::as_raw_fd(f),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: p maps total_len() bytes, page aligned.
    let ctl = unsafe { Control::new(p.cast()) };
    let h = ctl.header();
    if h.magic.load(Ordering::Acquire) == shared::MAGIC
        && h.version.load(Ordering::Acquire) == shared::VERSION
    {
        return Some(p);
    }
    // SAFETY: p is the mapping made above, used by nothing else.
    unsafe { libc::munmap(p, shared::total_len()) };
    None
}

/// What a process does once it traces, at its first thread's first hook (a descendant that
/// never calls a hook, a shell or a compiler the recording runs, costs the recording
/// nothing: no object entries, no probe ids, no signal handlers): skips the probe ids an
/// earlier image used, reports the loaded objects (before the thread's slot says it traces:
/// the recorder then checks the probe events' functions) and installs the crash handlers.
/// A forked child inherits it done, as it inherits the objects and handlers.
pub(crate) fn start_process(ctl: &Control) {
    static STARTED: std::sync::Once = std::sync::Once::new();
    // Outside the Once: a thread that forks while another waits here must not leave its child
    // a Once still running (each waiting thread polls on its own; the adoption happens once).
    wait_for_calibration(ctl);
    STARTED.call_once(|| {
        lineage::register_spawned(ctl);
        intern::skip_used_ids(ctl);
        objects::report_all(ctl);
        crash::install();
    });
}

/// Whether the recording has ended (the recorder's `CLOSED` word): a thread or image that
/// starts after it is not traced (nobody would read it).
pub(crate) fn recording_closed(ctl: &Control) -> bool {
    ctl.header().closed.load(Ordering::Acquire) != 0
}

/// Waits, at most 200 ms, for the recorder's TSC calibration if it is still being measured
/// (the program started beside it), then adopts it: before this process's clock is first
/// used (its first thread's events open after this).
fn wait_for_calibration(ctl: &Control) {
    let pending = || ctl.header().tsc_pending.load(Ordering::Acquire) != 0;
    let start = std::time::Instant::now();
    while pending() && start.elapsed() < std::time::Duration::from_millis(200) {
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    adopt_calibration(ctl);
}

/// The recorder's TSC calibration, if it wrote one (and it passes swtrace's checks), instead
/// of this process's own 10 ms wait at its first traced call.
fn adopt_calibration(ctl: &Control) {
    let h = ctl.header();
    let r = |w: &AtomicU64| w.load(Ordering::Acquire);
    let rate = r(&h.tsc_rate);
    // mult in bits 0-31, shift in 32-39: other bits set is no rate.
    if rate == 0 || rate >> 40 != 0 {
        return;
    }
    let _ = perfaux_swtrace::clock::adopt_tsc_calibration(perfaux_swtrace::clock::TscCalibration {
        base_ticks: r(&h.tsc_base_ticks),
        base_ns: r(&h.tsc_base_ns),
        span: r(&h.tsc_span),
        rate: perfaux_swtrace::clock::TscRate {
            mult: rate as u32,
            shift: (rate >> 32) as u8,
        },
    });
}

#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = init;
