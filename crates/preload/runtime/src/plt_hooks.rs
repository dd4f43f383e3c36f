//! Library calls (`-P` without `--no-libcall`): each PLT slot of an object (perfaux-patch's
//! `plt`) pointed at a stub that pushes the library function's address, calls the common
//! entry of patched functions (the call entered under the library function's name, its
//! return hijacked), and jumps on to the function. The recorder starts the program with
//! `LD_BIND_NOW=1`, so that every slot holds its function when the constructor runs (a lazy
//! slot would be overwritten by the loader at the first call). A slot whose function is in the
//! object itself, in the runtime or in the loader is left alone.

use std::sync::atomic::{AtomicU64, Ordering};

use perfaux_patch::plt::{JumpSlot, slot_stub};

use crate::stub_region::StubRegion;

/// Bytes a stub takes in its region.
const STUB: usize = 32;

/// Points the PLT slots `slots` of an object loaded at `bias` at stubs; `skip(addr)` says
/// which functions are left alone, `relro` is the object's read-only-after-relocation span
/// (loaded addresses). How many slots now enter their calls.
pub(crate) fn hook(
    bias: u64,
    slots: &[JumpSlot],
    skip: impl Fn(u64) -> bool,
    relro: Option<(u64, u64)>,
) -> u64 {
    let mut targets = Vec::new();
    for s in slots {
        let got = bias.wrapping_add(s.got);
        if got % 8 != 0 {
            continue;
        }
        // SAFETY: a GOT slot of the loaded object (its relocation's address), 8-byte aligned
        // (checked) and mapped while the object is loaded; written by the loader before the
        // constructors (LD_BIND_NOW), read here on the only thread.
        let target = unsafe { (*(got as *const AtomicU64)).load(Ordering::Relaxed) };
        if target != 0 && !skip(target) {
            // The call is entered under its PLT entry's address (the recorder names it after
            // the import), else under the function's.
            let key = s.plt.map_or(target, |p| bias.wrapping_add(p));
            targets.push((got, key, target));
        }
    }
    if targets.is_empty() {
        return 0;
    }
    let cells = 8 * (2 * targets.len() + 1);
    let code_at = cells.next_multiple_of(32);
    let lo = targets.iter().map(|t| t.0).min().unwrap_or(0) as usize;
    let Some(mut region) = StubRegion::near(lo, lo + 8, code_at + STUB * targets.len()) else {
        return 0;
    };
    let base = region.base() as u64;
    region.write(
        0,
        &(crate::trampoline::patched_entry_addr() as u64).to_le_bytes(),
    );
    let mut stubs = Vec::with_capacity(targets.len());
    for (k, &(got, key, target)) in targets.iter().enumerate() {
        let (key_cell, target_cell) = (8 * (2 * k + 1), 8 * (2 * k + 2));
        region.write(key_cell, &key.to_le_bytes());
        region.write(target_cell, &target.to_le_bytes());
        let at = code_at + STUB * k;
        let cell = |c: usize| base + c as u64;
        let Some(code) = slot_stub(cell(at), cell(key_cell), cell(target_cell), base) else {
            continue;
        };
        region.write(at, &code);
        stubs.push((got, base + at as u64));
    }
    if !region.seal() {
        return 0;
    }
    let writable = relro.is_none_or(|(s, e)| make_writable(s, e, true));
    if !writable {
        return 0;
    }
    for &(got, stub) in &stubs {
        // SAFETY: as above; the slot is writable (outside RELRO, or made so), and no other
        // thread runs yet to call through it meanwhile (an 8-byte aligned store besides).
        unsafe { (*(got as *const AtomicU64)).store(stub, Ordering::Relaxed) };
    }
    if let Some((s, e)) = relro {
        make_writable(s, e, false);
    }
    stubs.len() as u64
}

/// Makes `[start, end)` (RELRO: read-only after relocation) writable or read-only again: its
/// whole pages, as the loader protects them (a partial last page stays as it was).
fn make_writable(start: u64, end: u64, writable: bool) -> bool {
    let page = 4096u64;
    let s = start & !(page - 1);
    let e = end & !(page - 1);
    if e <= s {
        return true;
    }
    let prot = if writable {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_READ
    };
    // SAFETY: the object's own RELRO pages: their protection changes, not their contents.
    unsafe { libc::mprotect(s as *mut libc::c_void, (e - s) as usize, prot) == 0 }
}
