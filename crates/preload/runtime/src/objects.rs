//! The loaded objects, written into the control area for the recorder (its MMAP2 records and
//! symbols), because /proc/PID/maps is gone once a crashed program is reaped. Written at the
//! process's first hook and again whenever a hook sees a function outside every object
//! written so far (code a `dlopen` brought in). A new object's symbols are searched for the functions of the
//! `probe:FUNC` events ([`crate::events::resolve_object`]).

use std::sync::atomic::Ordering;

use perfaux_preload::shared::{Control, MAX_OBJECTS, PATH_MAX, object};

/// Whether entry `i` is one of this process's objects: written by it, or before it was forked
/// (a child has its parent's objects; those another process loads later are not its own).
fn mine(ctl: &Control, i: usize) -> bool {
    i < crate::fork::objects_at_fork()
        || ctl
            .word(Control::object_offset(i) + object::PID)
            .load(Ordering::Acquire)
            == crate::fork::pid()
}

/// Whether `addr` lies in an executable segment of this process already written.
fn covered(ctl: &Control, addr: usize) -> bool {
    let n = (ctl.object_count().load(Ordering::Acquire) as usize).min(MAX_OBJECTS);
    (0..n).any(|i| {
        let off = Control::object_offset(i);
        let w = |o| ctl.word(off + o).load(Ordering::Acquire);
        let (start, len) = (w(object::START), w(object::LEN));
        w(object::DONE) != 0
            && (start..start.saturating_add(len)).contains(&(addr as u64))
            && mine(ctl, i)
    })
}

fn known_start(ctl: &Control, start: u64) -> bool {
    let n = (ctl.object_count().load(Ordering::Acquire) as usize).min(MAX_OBJECTS);
    (0..n).any(|i| {
        ctl.word(Control::object_offset(i) + object::START)
            .load(Ordering::Acquire)
            == start
            && mine(ctl, i)
    })
}

/// Makes sure the object holding `addr` is written (rescans the loaded objects if not).
pub(crate) fn cover(ctl: &Control, addr: usize) {
    if !covered(ctl, addr) {
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
        if known_start(ctl, start) {
            continue;
        }
        let i = ctl.object_count().fetch_add(1, Ordering::AcqRel) as usize;
        if i >= MAX_OBJECTS {
            return 1;
        }
        let off = Control::object_offset(i);
        let w = |o: usize, v: u64| ctl.word(off + o).store(v, Ordering::Relaxed);
        w(object::BASE, info.dlpi_addr);
        w(object::START, start);
        w(object::LEN, (vaddr - start) + ph.p_memsz);
        w(object::PGOFF, ph.p_offset & !(page - 1));
        w(object::PATH_LEN, path.len() as u64);
        w(object::TIME, perfaux_swtrace::clock::monotonic_ns());
        w(object::PID, crate::fork::pid());
        ctl.write_bytes(off + object::PATH, path);
        ctl.word(off + object::DONE).store(1, Ordering::Release);
        new = true;
    }
    if new {
        // A new object: the probe events' functions may be in it.
        crate::events::resolve_object(ctl, path, info.dlpi_addr);
    }
    0
}
