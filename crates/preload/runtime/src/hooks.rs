//! The compilers' instrumentation hooks.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::thread::with as with_thread;

/// `-finstrument-functions`: entry into `func`, called from `site` (the return address into
/// its caller). Passes on the stack pointer the instrumented function had when it called the
/// hook, from which [`cyg_enter`] finds the function's return-address slot.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub extern "C" fn __cyg_profile_func_enter(func: *mut c_void, site: *mut c_void) {
    std::arch::naked_asm!("lea rdx, [rsp + 8]", "jmp {enter}", enter = sym cyg_enter)
}

/// How many stack words above the instrumented function's stack pointer are searched for its
/// return address (its frame: locals and saved registers).
const SLOT_SEARCH_WORDS: usize = 256;

/// Per function (direct-mapped by address), where its return-address slot was found last: the
/// function's address shifted left 16 bits, or'ed with the slot's distance in words from the
/// stack pointer at the hook call. A function's frame has one layout (the hook is called at the
/// same depth of it at every entry; an inlined function's hook from its container's frame), so
/// the word there is looked at first: one load where the search read every word of the frame
/// up to the slot (a program whose functions keep large locals, such as zstd's, searched
/// hundreds). A miss, or another function in the entry, searches as before and keeps the new
/// distance. Shared by the threads (a race loses an update, not a result: the word is checked).
static SLOT_AT: [AtomicU64; SLOT_CACHE] = [const { AtomicU64::new(0) }; SLOT_CACHE];
const SLOT_CACHE: usize = 4096;

/// The return-address slot of the function at `func`, entered from `site`, whose stack pointer
/// at the hook call was `sp`: the word at the distance kept for it if it holds `site`, else the
/// first word at or above `sp` that does, within [`SLOT_SEARCH_WORDS`]; its address, or 0.
/// (Where a word below the kept one held `site` too, a local copy of the return address, the
/// search would take that one and the kept distance the one above: the real slot is the
/// frame's highest.)
#[inline(always)]
fn slot_of(func: usize, site: usize, sp: *const usize) -> usize {
    let entry = &SLOT_AT[(func >> 4) % SLOT_CACHE];
    let kept = entry.load(Ordering::Relaxed);
    if kept >> 16 == (func as u64) & 0xffff_ffff_ffff {
        let k = (kept & 0xffff) as usize;
        let p = sp.wrapping_add(k);
        // SAFETY: a word of this thread's stack above its stack pointer, within the searched
        // frame (k < SLOT_SEARCH_WORDS: only such distances are kept), as the search reads.
        if unsafe { p.read_volatile() } == site {
            return p as usize;
        }
    }
    let found = (0..SLOT_SEARCH_WORDS)
        .map(|k| (k, sp.wrapping_add(k)))
        // SAFETY: reads of this thread's own stack above its stack pointer, inside the frames
        // of the instrumented function and its callers: mapped and not written concurrently
        // (the search stops at the first match, well inside a frame of the 2 KiB searched).
        .find(|(_, p)| unsafe { p.read_volatile() } == site);
    match found {
        Some((k, p)) => {
            entry.store(((func as u64) << 16) | k as u64, Ordering::Relaxed);
            p as usize
        }
        None => 0,
    }
}

/// The entry hook proper: `sp` is the instrumented function's stack pointer at the hook call.
/// Its return-address slot ([`slot_of`]) tells a live frame from one a longjmp left (as -pg's
/// does).
extern "C" fn cyg_enter(func: *mut c_void, site: *mut c_void, sp: *const usize) {
    if !crate::ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    let slot = slot_of(func as usize, site as usize, sp);
    let _ = with_thread(|t| t.enter(func as usize, site as usize, slot));
}

/// `-finstrument-functions`: exit from `func`.
#[unsafe(no_mangle)]
pub extern "C" fn __cyg_profile_func_exit(func: *mut c_void, _site: *mut c_void) {
    if crate::ACTIVE.load(Ordering::Relaxed) {
        let _ = with_thread(|t| t.exit(func as usize));
    }
}

/// A Rust probe's entry, from the program's own copy of perfaux-swtrace (its `forward`
/// module finds this by name): the call of the function containing `ip`, whose return passes
/// `key`. Whether the entry was taken (this thread traces); if not, the program's copy treats
/// the probe as it would without perfaux.
#[unsafe(no_mangle)]
pub extern "C" fn perfaux_preload_probe_enter(key: usize, ip: usize) -> bool {
    if !crate::ACTIVE.load(Ordering::Relaxed) {
        return false;
    }
    with_thread(|t| t.enter_forwarded(ip, key)).unwrap_or(false)
}

/// Tags the calling thread's innermost traced call with `value` (a `tracing` span's id, right
/// after its entry: the program's copy of `ProbeGuard::tag`).
#[unsafe(no_mangle)]
pub extern "C" fn perfaux_preload_probe_tag(value: u64) {
    if crate::ACTIVE.load(Ordering::Relaxed) {
        let _ = with_thread(|t| t.tag_innermost(value));
    }
}

/// A Rust probe named exactly (a `tracing` span's): its entries come with `ip == key`, and the
/// probe made for them is named `name` (`len` bytes, UTF-8), in the recording too.
///
/// # Safety
/// `name` points to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_preload_probe_name(key: usize, name: *const u8, len: usize) {
    if name.is_null() || len == 0 {
        return;
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { std::slice::from_raw_parts(name, len) };
    crate::intern::name_key(key, &String::from_utf8_lossy(bytes));
}

/// A Rust program's name for its uevent type `ty` (`perfaux_swtrace::name_uevent_type`), for
/// the recording's views.
///
/// # Safety
/// `name` points to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_preload_uevent_type_name(ty: u32, name: *const u8, len: usize) {
    if name.is_null() || len == 0 {
        return;
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { std::slice::from_raw_parts(name, len) };
    if let Some(ctl) = crate::control() {
        ctl.name_uevent_type(ty, bytes);
    }
}

/// Whether this runtime may trace the process (swtrace's `forward` asks once, before it sends
/// a Rust program's probes here): whether it does, once its constructor ran; before that
/// (a constructor of the program's own libraries reaching a probe first) it may.
#[unsafe(no_mangle)]
pub extern "C" fn perfaux_preload_active() -> bool {
    !crate::INIT_DONE.load(Ordering::Acquire) || crate::ACTIVE.load(Ordering::Acquire)
}

/// A Rust probe's return (for an entry [`perfaux_preload_probe_enter`] took).
#[unsafe(no_mangle)]
pub extern "C" fn perfaux_preload_probe_exit(key: usize) {
    if crate::ACTIVE.load(Ordering::Relaxed) {
        let _ = with_thread(|t| t.exit(key));
    }
}

/// perfaux.h's `perfaux_uevent(type, buf, len)` when the program runs under perfaux: a uevent
/// of `type_` with `len` bytes at `buf` into the calling thread's recording (its events opened
/// first if no traced call did yet). 0, or -1 with errno as the seed's uevent call sets it
/// (E2BIG over 4096 bytes, EFAULT for a null `buf` with a length, ENODEV if the thread is not
/// traced, ENOSPC if its buffer had no room: counted lost).
///
/// # Safety
/// `buf` is null or points to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_record_uevent(type_: u32, buf: *const c_void, len: usize) -> i32 {
    if !crate::ACTIVE.load(Ordering::Relaxed) || !crate::thread::ensure_traced() {
        return fail(libc::ENODEV);
    }
    let Ok(size) = u32::try_from(len) else {
        return fail(libc::E2BIG);
    };
    // SAFETY: the caller's contract on buf/len, which perfaux_uevent shares.
    unsafe { perfaux_core::perfaux_uevent(type_, size, buf, 0) }
}

/// Sets errno to `e`; -1.
fn fail(e: i32) -> i32 {
    // SAFETY: __errno_location returns this thread's errno, valid for the thread's life.
    let p = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    unsafe { p.write(e) };
    -1
}
