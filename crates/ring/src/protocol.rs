//! The head/tail protocol of the data area, alone, over [`crate::sync`]
//! atomics, so that the loom model check (`tests/loom.rs`) runs the very
//! code the producer and consumer run.
//!
//! # The state word
//!
//! The kernel keeps `rb->head` (reserved bytes) and `rb->nest` (writers in
//! flight) in two per-CPU words: the writers that nest on one CPU are
//! interrupts, which finish before the code they interrupted resumes, so
//! `perf_output_put_handle()` can publish with `nest == 1`, clear `nest`,
//! and re-check `head` (its `again:` loop). In user space the writers of one
//! ring are also threads on other CPUs, which do not finish in stack order:
//! between the outermost writer's "clear nest" and its "re-check head" a
//! thread may reserve space and still be writing it, and the kernel's
//! re-check would then publish unwritten bytes.
//!
//! So here `head` and `nest` share one `AtomicU64`, the *state word*: bits
//! 0..48 the reserved position (`pos`, bytes ever reserved, modulo 2^48),
//! bits 48..64 `nest`. Then
//!
//! - `perf_output_begin` is one CAS that checks space and takes `pos +=
//!   size, nest += 1` together ([`reserve`]);
//! - `perf_output_end` ([`put_handle`]) loads the state word; a writer that
//!   sees `nest == 1` is alone, so every byte below `pos` is written (each
//!   writer entered the nest before reserving and leaves it after writing),
//!   and it publishes `pos` into `data_head` while still in the nest. Then
//!   it leaves with one CAS of the whole word. If that CAS fails, another
//!   writer came in: it looks again (the kernel's `again:`), publishing a
//!   newer position if it is alone again, leaving the publishing to the
//!   newcomer otherwise. A writer that is not alone just leaves, with a CAS
//!   as well (two writers that each saw the other cannot both leave
//!   unpublished: the second CAS fails and looks again).
//!
//! Because position and nest change together, "alone" and "everything
//! below `pos` is written" are one observation, which two words cannot
//! give across threads; and because only a writer alone in the nest stores
//! `data_head`, and each such writer acquires its predecessor's release
//! through the state word, `data_head` never goes back. The common case of
//! `perf_output_end` is one CAS and a plain store.
//!
//! # Memory ordering
//!
//! The kernel's comment in `perf_output_put_handle()` pairs four barriers:
//!
//! ```text
//!   producer                               consumer
//!   if (LOAD ->data_tail) {                LOAD ->data_head
//!        (A) control dependency            (C) smp_rmb()
//!     STORE $data                          LOAD $data
//!        (B) smp_wmb()                     (D) smp_mb()
//!     STORE ->data_head                    STORE ->data_tail
//!   }
//! ```
//!
//! Here: (A) is an `Acquire` load of `data_tail` in [`reserve`] (Rust has no
//! control-dependency ordering), pairing with the consumer's `Release` store
//! of `data_tail` in [`store_tail`] (D): bytes the consumer read before
//! giving them back happen-before the producer overwrites them. The tail is
//! loaded before the state word, so the position compared with it is at
//! least the head the consumer took it from (the other order can see a
//! stale position under a newer tail and call a ring full that is not).
//! (B) is the `Release` CAS with which every writer leaves the nest, the
//! `Acquire` load of the state word with which the publisher finds itself
//! alone (every modification of the state word is a read-modify-write, so
//! it reads from the release sequence of every earlier leaver), and the
//! `Release` store of `data_head` that hands all of it on. (C) is the
//! consumer's `Acquire` load of `data_head` in [`load_head`]. A signal
//! handler interrupting a writer is just one more writer with its own
//! reservation: nothing here blocks, allocates or depends on which writer
//! finishes first.
//!
//! # Shared words
//!
//! The functions here reach the shared words (the state word, `data_head`,
//! `data_tail`) only through [`AtomicWord`], whose one real implementation
//! is [`AtomicU64`]'s own methods, inlined: the producer and consumer
//! monomorphize to the same instructions as if they called `AtomicU64`
//! directly. The other implementation is in `tests/model.rs`, which makes
//! every atomic action of the real [`reserve_with`] and [`put_handle_with`]
//! a step that its scheduler interleaves with the other writers' and the
//! consumer's, and checks the happens-before edges the orderings make.
//!
//! Written by hand because no crate implements the perf ring's layout and
//! protocol (the bytes are the kernel ABI's; generic SPSC/MPSC queues lay
//! out their memory their own way).
//!
//! # Limits
//!
//! 48-bit positions order correctly while fewer than 2^47 bytes are
//! reserved between two publications (always, in full-trace mode, where
//! the area is at most [`crate::layout::MAX_AREA`] = 2^40; in overwrite
//! mode, unless one writer stays in flight for hours at memory speed). A
//! writer in flight holds back `data_head` for everything reserved after
//! it, as in the kernel; unlike the kernel, whose writers cannot be
//! preempted, a user-space thread can be descheduled mid-record, and its
//! ring's consumer then sees nothing new until it runs again (a per-thread
//! ring, where only that thread and its signal handlers write, has no such
//! cross-thread stall). At most 65535 writers can be in flight; one more is
//! refused as if the ring were full.

use crate::sync::{AtomicU64, Ordering};

/// The atomic actions the protocol performs on a shared word: the subset of
/// `AtomicU64`'s methods it uses, so that a model check can stand in for the
/// word and see (and schedule) every action the real code takes.
pub trait AtomicWord {
    /// `AtomicU64::load`.
    fn load(&self, order: Ordering) -> u64;
    /// `AtomicU64::store`.
    fn store(&self, v: u64, order: Ordering);
    /// `AtomicU64::compare_exchange_weak`.
    fn compare_exchange_weak(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64>;
    /// `AtomicU64::fetch_sub`.
    fn fetch_sub(&self, v: u64, order: Ordering) -> u64;
}

/// The real word: `AtomicU64`'s inherent methods (std's, or loom's under
/// `--cfg loom`), inlined, so generic code costs nothing over calling them.
impl AtomicWord for AtomicU64 {
    #[inline(always)]
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }

    #[inline(always)]
    fn store(&self, v: u64, order: Ordering) {
        AtomicU64::store(self, v, order)
    }

    #[inline(always)]
    fn compare_exchange_weak(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        AtomicU64::compare_exchange_weak(self, current, new, success, failure)
    }

    #[inline(always)]
    fn fetch_sub(&self, v: u64, order: Ordering) -> u64 {
        AtomicU64::fetch_sub(self, v, order)
    }
}

/// Bits of the state word holding the position.
pub const POS_BITS: u32 = 48;
/// Mask of the position bits.
pub const POS_MASK: u64 = (1 << POS_BITS) - 1;
/// One writer in the nest count.
pub const NEST_ONE: u64 = 1 << POS_BITS;
/// The largest nest count.
pub const NEST_MAX: u64 = u64::MAX >> POS_BITS;

/// The position field of a state word.
#[inline]
pub fn state_pos(state: u64) -> u64 {
    state & POS_MASK
}

/// The nest field of a state word.
#[inline]
pub fn state_nest(state: u64) -> u64 {
    state >> POS_BITS
}

/// `CIRC_SPACE(head, tail, size)` of `include/linux/circ_buf.h`: free bytes
/// between a head and a tail that grow without bound, one byte kept free.
#[inline]
pub fn circ_space(head: u64, tail: u64, size: u64) -> u64 {
    tail.wrapping_sub(head.wrapping_add(1)) & size.wrapping_sub(1)
}

/// `ring_buffer_has_space()`: `pos` is the forward position; a backward
/// ring's head is `-pos`, and its free space lies the other way round.
#[inline]
pub fn has_space(pos: u64, tail: u64, data_size: u64, size: u64, backward: bool) -> bool {
    if data_size == 0 {
        return false;
    }
    if backward {
        circ_space(tail, pos.wrapping_neg(), data_size) >= size
    } else {
        circ_space(pos, tail, data_size) >= size
    }
}

/// A reservation: the positions (modulo 2^48) before and after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserved {
    /// Position of the reservation's first byte.
    pub start: u64,
    /// Position just past its last byte.
    pub end: u64,
}

/// `perf_output_begin()`'s `do { ... } while (!local_try_cmpxchg(&rb->head,
/// ...))`: reserves `size` bytes and enters the nest in one CAS. With
/// `check_space` false (overwrite: the consumer's mapping is read-only), the
/// tail is ignored. `None`: no space, or the nest count is full.
#[inline]
pub fn reserve(
    state: &AtomicU64,
    data_tail: &AtomicU64,
    size: u64,
    data_size: u64,
    check_space: bool,
    backward: bool,
) -> Option<Reserved> {
    reserve_with::<Smp, _>(state, data_tail, size, data_size, check_space, backward)
}

/// [`reserve`] with the read-modify-writes of `R`, over any [`AtomicWord`].
#[inline(always)]
pub fn reserve_with<R: Rmw<W>, W: AtomicWord + ?Sized>(
    state: &W,
    data_tail: &W,
    size: u64,
    data_size: u64,
    check_space: bool,
    backward: bool,
) -> Option<Reserved> {
    loop {
        // (A): pairs with the consumer's Release store of data_tail. The
        // tail is loaded before the state word: a tail the consumer took
        // from a published head then happens-before this load of the state,
        // so the position read is at least that head. (Loaded the other way
        // round, a stale position under a newer tail looks like a full ring
        // on weakly ordered CPUs, and a record is dropped for nothing: the
        // loom check found this.)
        let tail = if check_space {
            data_tail.load(Ordering::Acquire)
        } else {
            0
        };
        let cur = state.load(Ordering::Relaxed);
        let nest = state_nest(cur);
        if nest == NEST_MAX {
            return None;
        }
        let pos = state_pos(cur);
        if check_space && !has_space(pos, tail, data_size, size, backward) {
            return None;
        }
        let end = (pos + size) & POS_MASK;
        let new = ((nest + 1) << POS_BITS) | end;
        if R::cas(state, cur, new, Ordering::Relaxed).is_ok() {
            return Some(Reserved { start: pos, end });
        }
    }
}

/// The `data_head` that publishes bytes-written position `pos` (modulo
/// 2^48), given the `data_head` there now, or `None` if that is already at
/// or beyond `pos`. A `write_backward` ring publishes its head as the kernel
/// does, `rb->head` itself: `-pos`, moving down.
#[inline(always)]
pub fn advance_head(data_head: u64, pos: u64, backward: bool) -> Option<u64> {
    let written = if backward {
        data_head.wrapping_neg()
    } else {
        data_head
    };
    let delta = pos.wrapping_sub(written) & POS_MASK;
    if delta == 0 || delta > POS_MASK / 2 {
        return None;
    }
    let new_written = written.wrapping_add(delta);
    Some(if backward {
        new_written.wrapping_neg()
    } else {
        new_written
    })
}

/// `perf_output_put_handle()`: [`put_handle_with`] for writers on any
/// thread.
#[inline]
pub fn put_handle(state: &AtomicU64, data_head: &AtomicU64, backward: bool) -> bool {
    put_handle_with::<Smp, _>(state, data_head, backward)
}

/// `perf_output_put_handle()`, in the kernel's order: a writer that finds
/// itself alone in the nest publishes while it is still in it (any other
/// writer then sees `nest > 1` and does not publish), then leaves with one
/// CAS that fails if another writer entered meanwhile, in which case it
/// looks again (the kernel's `again:`): if it is still alone, the newcomer
/// has finished and it publishes the newer position; if not, it leaves the
/// publishing to the last one. A writer that is not alone leaves with a
/// CAS too, so that two writers that both saw `nest == 2` cannot both
/// leave without publishing. The common case is one CAS and a plain store
/// of `data_head`. Returns whether this writer published.
///
/// Only the writer alone in the nest stores `data_head`, and each such
/// writer acquires (through the state word) the previous one's release, so
/// the stores are ordered and `data_head` never goes back.
#[inline(always)]
pub fn put_handle_with<R: Rmw<W>, W: AtomicWord + ?Sized>(
    state: &W,
    data_head: &W,
    backward: bool,
) -> bool {
    let mut published = false;
    loop {
        // Acquire: every writer that left before (their data, and the
        // previous publisher's data_head store).
        let cur = state.load(Ordering::Acquire);
        if state_nest(cur) == 1 {
            // (B): the Release store orders this writer's data and all it
            // acquired before data_head.
            let head = data_head.load(Ordering::Relaxed);
            if let Some(new) = advance_head(head, state_pos(cur), backward) {
                data_head.store(new, Ordering::Release);
                published = true;
            }
        }
        // Release: this writer's data, for whoever publishes them.
        if R::cas(state, cur, cur - NEST_ONE, Ordering::Release).is_ok() {
            return published;
        }
    }
}

/// The read-modify-writes the protocol is built of, on words of type `W`:
/// [`Smp`] for writers on any CPU (any word), [`Local`] for the kernel's
/// per-CPU case (a real `AtomicU64` only).
pub trait Rmw<W: AtomicWord + ?Sized = AtomicU64> {
    /// Compare-and-swap; `Err(actual)` on failure. `success` orders the
    /// store; a failed CAS is `Relaxed`.
    fn cas(a: &W, current: u64, new: u64, success: Ordering) -> Result<u64, u64>;
    /// Subtracts `v`, returning the previous value.
    fn fetch_sub(a: &W, v: u64, order: Ordering) -> u64;
}

/// Locked (SMP-atomic) read-modify-writes: writers on several threads.
pub struct Smp;

impl<W: AtomicWord + ?Sized> Rmw<W> for Smp {
    #[inline(always)]
    fn cas(a: &W, current: u64, new: u64, success: Ordering) -> Result<u64, u64> {
        a.compare_exchange_weak(current, new, success, Ordering::Relaxed)
    }

    #[inline(always)]
    fn fetch_sub(a: &W, v: u64, order: Ordering) -> u64 {
        a.fetch_sub(v, order)
    }
}

/// The kernel's `local_t` operations: atomic against a signal handler that
/// interrupts this thread, not against other threads. On x86-64 a single
/// `cmpxchg` or `xadd` instruction without the `lock` prefix (what
/// `local_cmpxchg()`/`local_sub_return()` compile to): an interrupt lands
/// before or after an instruction, never inside. x86 keeps stores in
/// program order (TSO), so the `Release` the protocol asks for needs only
/// the compiler barrier the `asm!` block is. Elsewhere, and under loom,
/// these are the [`Smp`] operations.
///
/// Only for a ring whose writers are one thread and its signal handlers
/// (see `PerfBuffer::new_per_thread`): a second thread's writer could
/// interleave inside these read-modify-writes.
pub struct Local;

#[cfg(all(target_arch = "x86_64", not(loom)))]
impl Rmw for Local {
    #[inline(always)]
    fn cas(a: &AtomicU64, current: u64, new: u64, _success: Ordering) -> Result<u64, u64> {
        let prev: u64;
        // SAFETY: `a` is a valid, aligned u64 for the duration of the
        // instruction; cmpxchg reads and conditionally writes only it. No
        // `nomem`: the block is a compiler barrier, as barrier() is.
        unsafe {
            core::arch::asm!(
                "cmpxchg qword ptr [{p}], {new}",
                p = in(reg) a.as_ptr(),
                new = in(reg) new,
                inout("rax") current => prev,
                options(nostack),
            );
        }
        if prev == current { Ok(prev) } else { Err(prev) }
    }

    #[inline(always)]
    fn fetch_sub(a: &AtomicU64, v: u64, _order: Ordering) -> u64 {
        let mut x = v.wrapping_neg();
        // SAFETY: as in `cas`: one read-modify-write of the aligned u64 at
        // `a`, a compiler barrier.
        unsafe {
            core::arch::asm!(
                "xadd qword ptr [{p}], {x}",
                p = in(reg) a.as_ptr(),
                x = inout(reg) x,
                options(nostack),
            );
        }
        x
    }
}

#[cfg(not(all(target_arch = "x86_64", not(loom))))]
impl Rmw for Local {
    #[inline(always)]
    fn cas(a: &AtomicU64, current: u64, new: u64, success: Ordering) -> Result<u64, u64> {
        <Smp as Rmw>::cas(a, current, new, success)
    }

    #[inline(always)]
    fn fetch_sub(a: &AtomicU64, v: u64, order: Ordering) -> u64 {
        <Smp as Rmw>::fetch_sub(a, v, order)
    }
}

/// The consumer's `LOAD ->data_head; smp_rmb()` (C).
#[inline]
pub fn load_head<W: AtomicWord + ?Sized>(data_head: &W) -> u64 {
    data_head.load(Ordering::Acquire)
}

/// The consumer's `smp_mb(); STORE ->data_tail` (D): every read of the
/// released bytes happens before the producer may overwrite them.
#[inline]
pub fn store_tail<W: AtomicWord + ?Sized>(data_tail: &W, tail: u64) {
    data_tail.store(tail, Ordering::Release);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn circ_space_keeps_one_byte_free() {
        // include/linux/circ_buf.h: an empty ring of 64 has 63 free bytes.
        assert_eq!(circ_space(0, 0, 64), 63);
        assert_eq!(circ_space(64, 8, 64), 7);
        assert_eq!(circ_space(8, 8, 64), 63);
        assert!(has_space(0, 0, 64, 56, false));
        assert!(!has_space(0, 0, 64, 64, false));
        // Backward: head is -pos; the tail sits above it.
        assert!(has_space(0, 0, 64, 56, true));
        assert!(!has_space(56, 0, 64, 16, true));
    }

    #[test]
    fn the_last_writer_out_publishes_everything_reserved() {
        let state = AtomicU64::new(0);
        let tail = AtomicU64::new(0);
        let head = AtomicU64::new(0);
        let a = reserve(&state, &tail, 16, 64, true, false).unwrap();
        let b = reserve(&state, &tail, 24, 64, true, false).unwrap();
        assert_eq!((a.start, a.end, b.start, b.end), (0, 16, 16, 40));
        // a leaves first: b is in flight, so a must not publish.
        assert!(!put_handle(&state, &head, false));
        assert_eq!(head.load(Ordering::Relaxed), 0);
        assert!(put_handle(&state, &head, false));
        assert_eq!(head.load(Ordering::Relaxed), 40);
        assert_eq!(state.load(Ordering::Relaxed), 40);
        // 40 + 24 would leave no free byte.
        assert_eq!(reserve(&state, &tail, 24, 64, true, false), None);
    }

    #[test]
    fn advance_head_never_moves_data_head_back() {
        assert_eq!(advance_head(0, 40, false), Some(40));
        assert_eq!(advance_head(40, 16, false), None);
        assert_eq!(advance_head(40, 40, false), None);
    }

    #[test]
    fn positions_wrap_at_48_bits_and_data_head_keeps_growing() {
        let start = POS_MASK - 7;
        let state = AtomicU64::new(start);
        let tail = AtomicU64::new(start);
        let head = AtomicU64::new(start);
        let r = reserve(&state, &tail, 16, 64, true, false).unwrap();
        assert_eq!(r.end, 8);
        assert_eq!(state_nest(state.load(Ordering::Relaxed)), 1);
        assert!(put_handle(&state, &head, false));
        // The full 64-bit data_head keeps growing past 2^48.
        assert_eq!(head.load(Ordering::Relaxed), start + 16);
    }

    #[test]
    fn local_read_modify_writes_behave_as_the_locked_ones() {
        let a = AtomicU64::new(5);
        assert_eq!(Local::cas(&a, 4, 9, Ordering::Relaxed), Err(5));
        assert_eq!(Local::cas(&a, 5, 9, Ordering::Relaxed), Ok(5));
        assert_eq!(Local::fetch_sub(&a, 3, Ordering::Relaxed), 9);
        assert_eq!(a.load(Ordering::Relaxed), 6);
        let state = AtomicU64::new(0);
        let tail = AtomicU64::new(0);
        let head = AtomicU64::new(0);
        // A nested writer leaves, the outer one publishes everything.
        reserve_with::<Local, _>(&state, &tail, 16, 64, true, false).unwrap();
        reserve_with::<Local, _>(&state, &tail, 8, 64, true, false).unwrap();
        assert!(!put_handle_with::<Local, _>(&state, &head, false));
        assert_eq!(head.load(Ordering::Relaxed), 0);
        assert!(put_handle_with::<Local, _>(&state, &head, false));
        assert_eq!(head.load(Ordering::Relaxed), 24);
        assert_eq!(state.load(Ordering::Relaxed), 24);
    }

    #[test]
    fn a_backward_ring_publishes_its_head_moving_down() {
        // ring_buffer.c: perf_output_put_handle() publishes rb->head, which
        // a write_backward ring decrements.
        assert_eq!(advance_head(0, 40, true), Some(40u64.wrapping_neg()));
        assert_eq!(advance_head(40u64.wrapping_neg(), 16, true), None);
        assert_eq!(
            advance_head(40u64.wrapping_neg(), 48, true),
            Some(48u64.wrapping_neg())
        );
    }
}
