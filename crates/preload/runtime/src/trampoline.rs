//! `mcount` (-pg) and `__fentry__` (-pg -mfentry) on x86-64, and the return trampoline: the
//! entry hook saves the argument registers, finds the function (its call's return address)
//! and the slot of the function's own return address, and [`Thread::enter_hijack`] replaces
//! that with [`perfaux_return_trampoline`]; when the function returns there, the trampoline
//! saves the return registers, ends the call ([`Thread::exit_hijacked`]) and jumps to the
//! original address. This is uftrace's scheme (its arch/x86_64 mcount.S and fentry.S), written
//! anew here.
//!
//! Register use: both hooks save rdi, rsi, rdx, rcx, r8, r9, rax (rax carries the vector
//! register count of a variadic call) and xmm0-7 (argument registers), so the Rust code they
//! call may clobber them; the trampoline saves rax, rdx, xmm0 and xmm1 (return values).
//!
//! [`Thread::enter_hijack`]: crate::thread::Thread
//! [`Thread::exit_hijacked`]: crate::thread::Thread

use std::sync::atomic::{AtomicBool, Ordering};

use crate::thread::with as with_thread;

/// Saves the argument registers: 7 pushes (56 bytes) and 128 bytes, 184 in all (the callers
/// keep the call that follows 16-aligned).
macro_rules! save_args {
    () => {
        concat!(
            "push rdi\n push rsi\n push rdx\n push rcx\n push r8\n push r9\n push rax\n",
            "sub rsp, 128\n",
            "movdqu [rsp + 0], xmm0\n movdqu [rsp + 16], xmm1\n",
            "movdqu [rsp + 32], xmm2\n movdqu [rsp + 48], xmm3\n",
            "movdqu [rsp + 64], xmm4\n movdqu [rsp + 80], xmm5\n",
            "movdqu [rsp + 96], xmm6\n movdqu [rsp + 112], xmm7\n",
        )
    };
}

/// Restores what [`save_args`] saved.
macro_rules! restore_args {
    () => {
        concat!(
            "movdqu xmm0, [rsp + 0]\n movdqu xmm1, [rsp + 16]\n",
            "movdqu xmm2, [rsp + 32]\n movdqu xmm3, [rsp + 48]\n",
            "movdqu xmm4, [rsp + 64]\n movdqu xmm5, [rsp + 80]\n",
            "movdqu xmm6, [rsp + 96]\n movdqu xmm7, [rsp + 112]\n",
            "add rsp, 128\n",
            "pop rax\n pop r9\n pop r8\n pop rcx\n pop rdx\n pop rsi\n pop rdi\n",
        )
    };
}

/// -pg: called after the prologue (push rbp; mov rbp, rsp): the function's return address is
/// at rbp + 8, mcount's own return address (inside the function) on top of the stack.
///
/// Neither hook nor the trampoline may assume an aligned stack: gcc pushes callee-saved
/// registers before the mcount call (`push rbx; call mcount`), and calls functions of the same
/// unit that need no alignment with the stack as it is (`-fipa-stack-alignment`). So each
/// aligns it (as uftrace's hooks do), the entry's stack pointer kept in rbx (callee-saved:
/// the Rust code keeps it): after `and rsp, -16`, the 184 bytes of saved registers and 8 more
/// keep the inner call aligned.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub extern "C" fn mcount() {
    std::arch::naked_asm!(
        "push rbx",
        "mov rbx, rsp",
        "and rsp, -16",
        save_args!(),
        "sub rsp, 8",
        "lea rdi, [rbp + 8]",
        "mov rsi, [rbx + 8]",
        "call {entry}",
        "add rsp, 8",
        restore_args!(),
        "mov rsp, rbx",
        "pop rbx",
        "ret",
        entry = sym hook_entry,
    )
}

/// -pg -mfentry: called first thing in the function: the top of the stack is the return into
/// the function (5 or 6 bytes past its start: `call rel32` or `call [rip + GOT]`; 5 back is
/// inside the function either way), above it the function's own return address. The stack is
/// aligned as in [`mcount`]: after `push rbx`, the return into the function is at rbx + 8 and
/// the function's return address at rbx + 16.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub extern "C" fn __fentry__() {
    std::arch::naked_asm!(
        "push rbx",
        "mov rbx, rsp",
        "and rsp, -16",
        save_args!(),
        "sub rsp, 8",
        "lea rdi, [rbx + 16]",
        "mov rsi, [rbx + 8]",
        "sub rsi, 5",
        "call {entry}",
        "add rsp, 8",
        restore_args!(),
        "mov rsp, rbx",
        "pop rbx",
        "ret",
        entry = sym hook_entry,
    )
}

/// The return trampoline: entered by the hijacked `ret`, so rsp = the slot + 8 (aligned or
/// not, see [`mcount`]). Saves rbx below it (the slot is free: its return address was taken)
/// and aligns the stack, saves the return registers, gets the original address back, and
/// jumps there.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
extern "C" fn perfaux_return_trampoline() {
    std::arch::naked_asm!(
        "push rbx",
        "mov rbx, rsp",
        "and rsp, -16",
        "sub rsp, 48",
        "mov [rsp + 32], rax",
        "mov [rsp + 40], rdx",
        "movdqu [rsp + 0], xmm0",
        "movdqu [rsp + 16], xmm1",
        "lea rdi, [rbx + 8]",
        "call {exit}",
        "mov r11, rax",
        "movdqu xmm0, [rsp + 0]",
        "movdqu xmm1, [rsp + 16]",
        "mov rax, [rsp + 32]",
        "mov rdx, [rsp + 40]",
        "mov rsp, rbx",
        "pop rbx",
        "jmp r11",
        exit = sym hook_exit,
    )
}

/// Saves every call-clobbered register for the patched entries of code built without
/// instrumentation: there a caller may keep values in them across a call to a function that
/// does not touch them (gcc's -fipa-ra), which the hooks' Rust code would clobber. After
/// `and rsp, -16`: 9 pushes (72 bytes) and 264 bytes (xmm0-15, 8 spare) keep it aligned.
/// On a CPU with AVX, [`save_all_avx`] is used instead: the hooks reach the C library (its
/// allocator and copies on a function's first call), whose AVX2 routines end in `vzeroupper`,
/// which would clear the upper halves of a `__m256` argument or return value. (AVX-512's
/// upper halves and zmm16-31 are not saved.)
macro_rules! save_all {
    () => {
        concat!(
            "push rax\n push rcx\n push rdx\n push rsi\n push rdi\n",
            "push r8\n push r9\n push r10\n push r11\n",
            "sub rsp, 264\n",
            "movdqu [rsp + 0], xmm0\n movdqu [rsp + 16], xmm1\n",
            "movdqu [rsp + 32], xmm2\n movdqu [rsp + 48], xmm3\n",
            "movdqu [rsp + 64], xmm4\n movdqu [rsp + 80], xmm5\n",
            "movdqu [rsp + 96], xmm6\n movdqu [rsp + 112], xmm7\n",
            "movdqu [rsp + 128], xmm8\n movdqu [rsp + 144], xmm9\n",
            "movdqu [rsp + 160], xmm10\n movdqu [rsp + 176], xmm11\n",
            "movdqu [rsp + 192], xmm12\n movdqu [rsp + 208], xmm13\n",
            "movdqu [rsp + 224], xmm14\n movdqu [rsp + 240], xmm15\n",
        )
    };
}

/// [`save_all`] with ymm0-15 whole: 9 pushes (72 bytes) and 520 bytes (16 x 32, 8 spare).
macro_rules! save_all_avx {
    () => {
        concat!(
            "push rax\n push rcx\n push rdx\n push rsi\n push rdi\n",
            "push r8\n push r9\n push r10\n push r11\n",
            "sub rsp, 520\n",
            "vmovdqu [rsp + 0], ymm0\n vmovdqu [rsp + 32], ymm1\n",
            "vmovdqu [rsp + 64], ymm2\n vmovdqu [rsp + 96], ymm3\n",
            "vmovdqu [rsp + 128], ymm4\n vmovdqu [rsp + 160], ymm5\n",
            "vmovdqu [rsp + 192], ymm6\n vmovdqu [rsp + 224], ymm7\n",
            "vmovdqu [rsp + 256], ymm8\n vmovdqu [rsp + 288], ymm9\n",
            "vmovdqu [rsp + 320], ymm10\n vmovdqu [rsp + 352], ymm11\n",
            "vmovdqu [rsp + 384], ymm12\n vmovdqu [rsp + 416], ymm13\n",
            "vmovdqu [rsp + 448], ymm14\n vmovdqu [rsp + 480], ymm15\n",
            // The hooks' code is legacy SSE: with the upper halves clean it pays no
            // transition (or false dependency) on every instruction.
            "vzeroupper\n",
        )
    };
}

/// Restores what [`save_all_avx`] saved.
macro_rules! restore_all_avx {
    () => {
        concat!(
            "vmovdqu ymm0, [rsp + 0]\n vmovdqu ymm1, [rsp + 32]\n",
            "vmovdqu ymm2, [rsp + 64]\n vmovdqu ymm3, [rsp + 96]\n",
            "vmovdqu ymm4, [rsp + 128]\n vmovdqu ymm5, [rsp + 160]\n",
            "vmovdqu ymm6, [rsp + 192]\n vmovdqu ymm7, [rsp + 224]\n",
            "vmovdqu ymm8, [rsp + 256]\n vmovdqu ymm9, [rsp + 288]\n",
            "vmovdqu ymm10, [rsp + 320]\n vmovdqu ymm11, [rsp + 352]\n",
            "vmovdqu ymm12, [rsp + 384]\n vmovdqu ymm13, [rsp + 416]\n",
            "vmovdqu ymm14, [rsp + 448]\n vmovdqu ymm15, [rsp + 480]\n",
            "add rsp, 520\n",
            "pop r11\n pop r10\n pop r9\n pop r8\n",
            "pop rdi\n pop rsi\n pop rdx\n pop rcx\n pop rax\n",
        )
    };
}

/// Restores what [`save_all`] saved.
macro_rules! restore_all {
    () => {
        concat!(
            "movdqu xmm0, [rsp + 0]\n movdqu xmm1, [rsp + 16]\n",
            "movdqu xmm2, [rsp + 32]\n movdqu xmm3, [rsp + 48]\n",
            "movdqu xmm4, [rsp + 64]\n movdqu xmm5, [rsp + 80]\n",
            "movdqu xmm6, [rsp + 96]\n movdqu xmm7, [rsp + 112]\n",
            "movdqu xmm8, [rsp + 128]\n movdqu xmm9, [rsp + 144]\n",
            "movdqu xmm10, [rsp + 160]\n movdqu xmm11, [rsp + 176]\n",
            "movdqu xmm12, [rsp + 192]\n movdqu xmm13, [rsp + 208]\n",
            "movdqu xmm14, [rsp + 224]\n movdqu xmm15, [rsp + 240]\n",
            "add rsp, 264\n",
            "pop r11\n pop r10\n pop r9\n pop r8\n",
            "pop rdi\n pop rsi\n pop rdx\n pop rcx\n pop rax\n",
        )
    };
}

/// Defines a patched function's common entry (`-P`) saving registers with `$save` /
/// `$restore`: called by the function's stub (perfaux-patch's `relocate`), which pushed the
/// function's address first: after `push rbx`, the return into the stub is at rbx + 8, the
/// function's address at rbx + 16 and the function's own return address at rbx + 24. `ret 8`
/// drops the pushed address on the way back to the stub, which then runs the function's moved
/// first instructions.
macro_rules! patched_entry {
    ($(#[$doc:meta])* $name:ident, $save:ident, $restore:ident) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        pub(crate) extern "C" fn $name() {
            std::arch::naked_asm!(
                "push rbx",
                "mov rbx, rsp",
                "and rsp, -16",
                $save!(),
                "lea rdi, [rbx + 24]",
                "mov rsi, [rbx + 16]",
                "call {entry}",
                $restore!(),
                "mov rsp, rbx",
                "pop rbx",
                "ret 8",
                entry = sym hook_entry,
            )
        }
    };
}

/// Defines the return trampoline of a process with patched entries, saving registers with
/// `$save` / `$restore`: as [`perfaux_return_trampoline`], but every call-clobbered register is
/// kept (see [`save_all`]), so the way on cannot be in a register: the original return address
/// goes into the freed slot, and the jump reads it from there once the stack pointer is back
/// above it (within the red zone, which a signal frame never overwrites).
macro_rules! full_return_trampoline {
    ($(#[$doc:meta])* $name:ident, $save:ident, $restore:ident) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        extern "C" fn $name() {
            std::arch::naked_asm!(
                "sub rsp, 8",
                "push rbx",
                "mov rbx, rsp",
                "and rsp, -16",
                $save!(),
                "lea rdi, [rbx + 16]",
                "call {exit}",
                "mov [rbx + 8], rax",
                $restore!(),
                "mov rsp, rbx",
                "pop rbx",
                "lea rsp, [rsp + 8]",
                "jmp qword ptr [rsp - 8]",
                exit = sym hook_exit,
            )
        }
    };
}

patched_entry!(
    /// The common entry of patched functions, xmm0-15 kept.
    perfaux_patched_entry,
    save_all,
    restore_all
);
patched_entry!(
    /// The common entry of patched functions, ymm0-15 kept whole (a CPU with AVX).
    perfaux_patched_entry_avx,
    save_all_avx,
    restore_all_avx
);
full_return_trampoline!(
    /// The full return trampoline, xmm0-15 kept.
    perfaux_return_trampoline_full,
    save_all,
    restore_all
);
full_return_trampoline!(
    /// The full return trampoline, ymm0-15 kept whole (a CPU with AVX).
    perfaux_return_trampoline_full_avx,
    save_all_avx,
    restore_all_avx
);

/// What the loader's `_dl_debug_state` (the debuggers' breakpoint, `r_debug.r_brk`) runs once
/// [`crate::dl_watch`] has patched it: a plain function called from ld.so, which keeps every
/// call-clobbered register (as the `ret` it replaced did) around the watch's callback.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
pub(crate) extern "C" fn perfaux_r_brk() {
    std::arch::naked_asm!(
        "push rbx",
        "mov rbx, rsp",
        "and rsp, -16",
        save_all!(),
        "call {brk}",
        restore_all!(),
        "mov rsp, rbx",
        "pop rbx",
        "ret",
        brk = sym on_r_brk,
    )
}

/// The callback [`perfaux_r_brk`] calls (0: none yet).
static R_BRK_CALLBACK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets what [`perfaux_r_brk`] calls.
pub(crate) fn set_r_brk_callback(f: extern "C" fn()) {
    R_BRK_CALLBACK.store(f as usize, Ordering::Release);
}

extern "C" fn on_r_brk() {
    let f = R_BRK_CALLBACK.load(Ordering::Acquire);
    if f != 0 {
        // SAFETY: the only values stored are `extern "C" fn()` pointers (set_r_brk_callback).
        let f: extern "C" fn() = unsafe { std::mem::transmute::<usize, extern "C" fn()>(f) };
        f();
    }
}

/// Set once a process patches entries (before any hook runs): every hijack then uses the
/// trampoline that keeps every register.
static FULL_SAVE: AtomicBool = AtomicBool::new(false);
/// With [`FULL_SAVE`]: the CPU and kernel have AVX (the ymm variants are used).
static AVX: AtomicBool = AtomicBool::new(false);

/// Makes every later hijack keep every register ([`perfaux_return_trampoline_full`]).
pub(crate) fn keep_every_register() {
    AVX.store(
        std::arch::is_x86_feature_detected!("avx"),
        Ordering::Relaxed,
    );
    FULL_SAVE.store(true, Ordering::Relaxed);
}

/// The address of the common entry patched stubs call.
pub(crate) fn patched_entry_addr() -> usize {
    if AVX.load(Ordering::Relaxed) {
        perfaux_patched_entry_avx as *const () as usize
    } else {
        perfaux_patched_entry as *const () as usize
    }
}

/// The address hijacked return slots get.
pub(crate) fn return_trampoline_addr() -> usize {
    match (
        FULL_SAVE.load(Ordering::Relaxed),
        AVX.load(Ordering::Relaxed),
    ) {
        (true, true) => perfaux_return_trampoline_full_avx as *const () as usize,
        (true, false) => perfaux_return_trampoline_full as *const () as usize,
        _ => perfaux_return_trampoline as *const () as usize,
    }
}

/// Called by `mcount` / `__fentry__` with the slot of the function's return address and an
/// address in the function.
extern "C" fn hook_entry(parent_loc: *mut usize, child: usize) {
    if !crate::ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    // SAFETY: the assembly hands the function's live return-address slot (see above).
    let _ = with_thread(|t| unsafe { t.enter_hijack(child, parent_loc, return_trampoline_addr()) });
}

/// Called by the return trampoline; returns where the function really returns to.
extern "C" fn hook_exit(sp: usize) -> usize {
    match with_thread(|t| t.exit_hijacked(sp)) {
        Some(Some(ret)) => ret,
        _ => {
            // No way back: the return address is lost. Say so and stop, as uftrace does.
            let msg = b"perfaux-preload: a traced function returned through the trampoline but its return address is not on this thread's return stack\n";
            // SAFETY: write(2) of a static buffer, then abort.
            unsafe {
                libc::write(2, msg.as_ptr().cast(), msg.len());
            }
            std::process::abort();
        }
    }
}
