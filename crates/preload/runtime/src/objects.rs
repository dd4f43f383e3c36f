//! The loaded objects, written into the control area's ring for the recorder (its MMAP2
//! records and symbols), because /proc/PID/maps is gone once a crashed program is reaped.
//! Written at the process's first hook and again whenever a hook sees a function outside
//! every object written so far (code a `dlopen` brought in). A new object's symbols are
//! searched for the functions of the `probe:FUNC` events ([`crate::events::resolve_object`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use perfaux_preload_abi::{Control, ObjectEntry, PATH_MAX};

/// Executable segments this process reported (or its parent did before forking it: a child
/// has its parent's mappings), kept here: the shared ring is the recorder's, which takes its
/// entries away.
const REPORTED_MAX: usize = 1024;
static REPORTED_START: [AtomicU64; REPORTED_MAX] = [const { AtomicU64::new(0) }; REPORTED_MAX];
static REPORTED_END: [AtomicU64; REPORTED_MAX] = [const { AtomicU64::new(0) }; REPORTED_MAX];
/// Entries of the two arrays written whole (stored after them, Release). Only the loader's
/// `dl_iterate_phdr` callback appends: glibc runs the callbacks under its `dl_load_write_lock`,
/// one thread at a time, and a signal handler's hook on the same thread does not get here
/// (the runtime's per-thread busy flag).
static REPORTED: AtomicUsize = AtomicUsize::new(0);
/// This process waited for room in the ring in vain once: the recorder is stuck (an entry a
/// dying process claimed and never finished) or gone; it does not wait again (the wait holds
/// the loader's lock).
static RING_STUCK: AtomicBool = AtomicBool::new(false);

/// The reported segments' (start, end).
fn reported() -> impl Iterator<Item = (u64, u64)> {
    let n = REPORTED.load(Ordering::Acquire).min(REPORTED_MAX);
    (0..n).map(|i| {
        (
            REPORTED_START[i].load(Ordering::Relaxed),
            REPORTED_END[i].load(Ordering::Relaxed),
        )
    })
}

/// Keeps a reported segment; false past [`REPORTED_MAX`] (the segment is then not reported:
/// unkept, it would be reported again at every rescan).
fn keep(start: u64, end: u64) -> bool {
    let n = REPORTED.load(Ordering::Relaxed);
    if n >= REPORTED_MAX {
        return false;
    }
    REPORTED_START[n].store(start, Ordering::Relaxed);
    REPORTED_END[n].store(end, Ordering::Relaxed);
    REPORTED.store(n + 1, Ordering::Release);
    true
}

/// Whether `addr` lies in an executable segment this process reported.
fn covered(addr: usize) -> bool {
    reported().any(|(start, end)| (start..end).contains(&(addr as u64)))
}

fn known_start(start: u64) -> bool {
    reported().any(|(s, _)| s == start)
}

/// Makes sure the object holding `addr` is written (rescans the loaded objects if not).
pub(crate) fn cover(ctl: &Control, addr: usize) {
    if !covered(addr) {
        let _no_cancel = crate::no_cancel::NoCancel::new();
        report_all(ctl);
    }
}

/// Writes every loaded object's executable segment not written yet.
pub(crate) fn report_all(ctl: &Control) {
    // SAFETY: the callback matches dl_iterate_phdr's signature and reads only what the loader
    // hands it; `data` is the &Control below, alive for the call.
    unsafe {
        libc::dl_iterate_phdr(Some(one), std::ptr::from_ref(ctl).cast_mut().cast());
    }
}

unsafe extern "C" fn one(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut libc::c_void,
) -> i32 {
    // SAFETY: dl_iterate_phdr passes a valid info.
    let info = unsafe { &*info };
    // SAFETY: our data pointer (see report_all), a live &Control.
    let ctl = unsafe { &*(data as *const Control) };
    let page = 4096u64;
    let mut path_buf = [0u8; PATH_MAX];
    let path: &[u8] = if info.dlpi_name.is_null() {
        &[]
    } else {
        // SAFETY: the loader's NUL-terminated name.
        unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }.to_bytes()
    };
    let path: &[u8] = if path.is_empty() {
        // The main program: the loader names it "".
        // SAFETY: readlink into a buffer of the given length.
        let n = unsafe {
            libc::readlink(
                c"/proc/self/exe".as_ptr(),
                path_buf.as_mut_ptr().cast(),
                PATH_MAX,
            )
        };
        if n <= 0 {
            return 0;
        }
        &path_buf[..n as usize]
    } else {
        path
    };
    if path.first() != Some(&b'/') {
        return 0; // the vDSO
    }
    let mut new = false;
    for k in 0..info.dlpi_phnum as usize {
        // SAFETY: dlpi_phdr has dlpi_phnum entries.
        let ph = unsafe { &*info.dlpi_phdr.wrapping_add(k) };
        if ph.p_type != libc::PT_LOAD || ph.p_flags & libc::PF_X == 0 {
            continue;
        }
        let vaddr = info.dlpi_addr.wrapping_add(ph.p_vaddr);
        let start = vaddr & !(page - 1);
        if known_start(start) {
            continue;
        }
        let len = (vaddr - start) + ph.p_memsz;
        let time = perfaux_swtrace::clock::monotonic_ns();
        if !keep(start, start.saturating_add(len)) {
            ctl.objects_lost().fetch_add(1, Ordering::AcqRel);
            continue;
        }
        new = true;
        // A full ring the recorder does not empty: the object goes unnamed (counted).
        let Some(n) = ctl.claim_object(!RING_STUCK.load(Ordering::Relaxed)) else {
            RING_STUCK.store(true, Ordering::Relaxed);
            continue;
        };
        ctl.write_object(
            n,
            &ObjectEntry {
                base: info.dlpi_addr,
                start,
                len,
                pgoff: ph.p_offset & !(page - 1),
                time,
                pid: crate::lineage::pid(),
                path,
            },
        );
    }
    if new {
        // A new object: the probe events' functions may be in it.
        crate::events::resolve_object(ctl, path, info.dlpi_addr);
    }
    0
}
