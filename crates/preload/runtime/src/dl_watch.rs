//! Objects a `dlopen` brings in, seen before any of their code runs: the loader calls
//! `_dl_debug_state` (`r_debug.r_brk`, where debuggers put their breakpoint) once the new
//! objects are mapped and listed, with `r_state` back at `RT_CONSISTENT`, before it relocates
//! them and runs their constructors. That function is an empty `ret`; it is patched (once, in
//! the constructor, on the only thread) to jump to [`crate::trampoline`]'s `perfaux_r_brk`,
//! which keeps every register and calls the watch's callback. So the callback patches code no
//! thread can have entered, with no signal and no stop of the other threads (the kernel's
//! text_poke_bp protocol is for code that may be running; this code is not yet).
//!
//! A `dlopen` wrapper would also see each load, but only after the object's constructors ran,
//! and it would make the runtime the caller the loader searches from (the caller's RUNPATH and
//! namespace decide what `dlopen("libx.so")` finds).
//!
//! Only the two shapes glibc builds are patched: `endbr64; ret` (5 bytes) and `ret` followed by
//! no-op padding up to the next 16-byte boundary (at least 4 bytes of it). Anything else: no
//! watch, and dlopen'd objects go unpatched, as before.

use std::sync::atomic::{AtomicPtr, Ordering};

use crate::stub_region::StubRegion;

/// glibc's `struct r_debug` (link.h): its layout whole, two of its fields read.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct RDebug {
    r_version: i32,
    r_map: *mut libc::c_void,
    r_brk: usize,
    r_state: i32,
    r_ldbase: usize,
}

const RT_CONSISTENT: i32 = 0;

static R_DEBUG: AtomicPtr<RDebug> = AtomicPtr::new(std::ptr::null_mut());

/// Whether the loader's list of objects is consistent (a load or unload just ended).
pub(crate) fn consistent() -> bool {
    let p = R_DEBUG.load(Ordering::Acquire);
    if p.is_null() {
        return false;
    }
    // SAFETY: a non-null R_DEBUG is the loader's `_r_debug`, which lives as long as the
    // process.
    let state = unsafe { &raw const (*p).r_state };
    // SAFETY: as above; `r_state` is an int the loader writes before it calls r_brk on this
    // thread.
    unsafe { state.read_volatile() == RT_CONSISTENT }
}

/// Makes the loader call `callback` at each change of its list; whether it will.
pub(crate) fn install(callback: extern "C" fn()) -> bool {
    // SAFETY: dlsym with a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_r_debug".as_ptr()) }.cast::<RDebug>();
    if p.is_null() {
        return false;
    }
    // SAFETY: `_r_debug` is the loader's struct r_debug, alive for the process.
    let field = unsafe { &raw const (*p).r_brk };
    // SAFETY: as above.
    let brk = unsafe { field.read() };
    if brk == 0 || !patchable_shape(brk) {
        return false;
    }
    let Some(mut region) = StubRegion::near(brk, brk + 5, 4096) else {
        return false;
    };
    // jmp [rip + 0]; the address of perfaux_r_brk.
    region.write(0, &[0xff, 0x25, 0, 0, 0, 0]);
    let target = crate::trampoline::perfaux_r_brk as *const () as u64;
    region.write(6, &target.to_le_bytes());
    let stub = region.base() as u64;
    if !region.seal() {
        return false;
    }
    let Some(jmp) = perfaux_patch::relocate::jmp_rel32(brk as u64, stub) else {
        return false;
    };
    crate::trampoline::set_r_brk_callback(callback);
    R_DEBUG.store(p, Ordering::Release);
    write_text(brk, &jmp)
}

/// Whether the bytes at `brk` are one of the shapes glibc builds `_dl_debug_state` in.
fn patchable_shape(brk: usize) -> bool {
    const ENDBR_RET: [u8; 5] = [0xf3, 0x0f, 0x1e, 0xfa, 0xc3];
    let end = (brk + 1).next_multiple_of(16);
    // SAFETY: `brk` is a function of ld.so's text: its 5 bytes (the first shape) or the bytes
    // up to the next 16-byte boundary (the second; never past the page) are mapped.
    let first5 = unsafe { std::slice::from_raw_parts(brk as *const u8, 5) };
    if first5 == ENDBR_RET {
        return true;
    }
    if first5[0] != 0xc3 || end - brk < 5 {
        return false;
    }
    // SAFETY: as above, within the same 16-byte block.
    let pad = unsafe { std::slice::from_raw_parts((brk + 1) as *const u8, end - brk - 1) };
    perfaux_patch::relocate::all_nops(pad, brk as u64 + 1)
}

/// Writes `bytes` at `at` in ld.so's text, made writable meanwhile.
fn write_text(at: usize, bytes: &[u8]) -> bool {
    let span = [(at as u64, (at + bytes.len()) as u64)];
    if !crate::text::set_writable(&span, true) {
        crate::text::set_writable(&span, false);
        return false;
    }
    // SAFETY: the bytes of `_dl_debug_state` and its padding (checked), writable now; the
    // only thread runs the constructor, not this function.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len()) };
    crate::text::set_writable(&span, false);
    true
}
