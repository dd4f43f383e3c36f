//! The producer half of the AUX area: what `rb_alloc_aux()`,
//! `perf_aux_output_begin()`, `perf_aux_output_end()`,
//! `perf_aux_output_skip()`, `perf_aux_output_flag()` and
//! `perf_output_copy_aux()` in kernel/events/ring_buffer.c do.
//!
//! - **One writer at a time** (`rb->aux_nest`): the PMU that owns the AUX
//!   area takes an [`AuxHandle`] in its `start()` and ends it in `stop()`;
//!   a nested begin (a signal handler during that window, another thread)
//!   gets [`AuxBeginError::Nested`], where the kernel WARNs.
//! - **Full-trace mode** (the consumer mapped the area with `PROT_WRITE`):
//!   the handle's `size` is the free space, `CIRC_SPACE(aux_head, aux_tail,
//!   aux_size)` of the unmasked positions; no space means the event must be
//!   disabled and the consumer woken ([`AuxBeginError::Full`]: the ring has
//!   done the wakeup, the caller disables the event: the kernel's
//!   `perf_event_disable_inatomic()` is core's).
//! - **Overwrite mode** (read-only mapping): `aux_tail` is ignored, the
//!   PMU writes anywhere (the kernel leaves `handle->size` at 0 and so do
//!   we), reports where it stopped in [`AuxHandle::head`], and there are no
//!   AUX wakeups (`aux_watermark` 0).
//! - `end` publishes `aux_head` and hands back the `PERF_RECORD_AUX` fields
//!   ([`AuxRecord`]) for the caller to write with the event's `sample_id`,
//!   only when there is something to say (`size || flags & ~OVERWRITE`).
//!
//! The PMU writes its bytes through [`AuxHandle::write_at`] (checked
//! against the handle's window) or, on a tracer's hot path, through a
//! [`RawAuxWriter`] (base + mask, no lifetime; see its safety contract).
//!
//! # Memory ordering
//!
//! The PMU's stores into the area happen before the `Release` store of
//! `aux_head` in `end`/`skip`; the consumer loads `aux_head` with
//! `Acquire`, copies, and gives the bytes back with a `Release` store of
//! `aux_tail`, which `begin` loads with `Acquire` before handing out space
//! (the same A/B/C/D pairing as the data area, see [`crate::protocol`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use perfaux_abi::ByteSink;
use perfaux_abi::consts::{PERF_AUX_FLAG_OVERWRITE, PERF_AUX_FLAG_TRUNCATED};
use perfaux_abi::mmap_page::offsets;

use crate::error::RingError;
use crate::memory::RingMemory;
use crate::protocol::circ_space;
use crate::wakeup::Wakeup;

/// How the producer runs the AUX area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxConfig {
    /// `RING_BUFFER_WRITABLE`: the consumer mapped the AUX area with
    /// `PROT_WRITE` and owns `aux_tail`. False: overwrite mode.
    pub writable: bool,
    /// `attr.aux_watermark`; 0 means half the area (full-trace mode only).
    pub aux_watermark: u32,
}

impl Default for AuxConfig {
    fn default() -> Self {
        AuxConfig {
            writable: true,
            aux_watermark: 0,
        }
    }
}

/// The fields of the `PERF_RECORD_AUX` that `perf_aux_output_end()` emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxRecord {
    /// AUX position of the transaction's first byte.
    pub aux_offset: u64,
    /// Bytes the transaction wrote (or skipped).
    pub aux_size: u64,
    /// `PERF_AUX_FLAG_*` (TRUNCATED, OVERWRITE, PARTIAL, COLLISION).
    pub flags: u64,
}

/// What `perf_aux_output_end()` leaves for the caller to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxEnd {
    /// The `PERF_RECORD_AUX` to write, if any.
    pub record: Option<AuxRecord>,
    /// The consumer was woken (the ring did it).
    pub wakeup: bool,
    /// `TRUNCATED` was set: the event must be disabled
    /// (`perf_event_disable_inatomic()`).
    pub disable: bool,
}

/// Why `perf_aux_output_begin()` gave no handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuxBeginError {
    /// Another writer holds the AUX area (`aux_nest`).
    Nested,
    /// Full-trace mode and no free space: the consumer has been woken; the
    /// caller must disable the event (`pending_disable`).
    Full,
}

/// `AuxHandle::skip` beyond the handle's space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoSpace;

impl NoSpace {
    /// `-ENOSPC`.
    pub fn errno(self) -> i32 {
        perfaux_abi::errno::ENOSPC
    }
}

/// `struct perf_buffer`'s AUX fields: the producer side of the AUX area.
pub struct AuxBuffer {
    mem: Arc<RingMemory>,
    base: *mut u8,
    aux_size: u64,
    /// `rb->aux_head`: changed only by the holder of `aux_nest`.
    aux_head: AtomicU64,
    /// `rb->aux_wakeup`.
    aux_wakeup: AtomicU64,
    /// `rb->aux_watermark`.
    aux_watermark: u64,
    /// `rb->aux_overwrite`.
    aux_overwrite: bool,
    /// `rb->aux_nest`.
    aux_nest: AtomicU32,
    wakeup: Arc<Wakeup>,
}

// SAFETY: `base` points into `mem` (Send + Sync, kept alive by the Arc);
// its bytes are written only by the holder of aux_nest.
unsafe impl Send for AuxBuffer {}
// SAFETY: as for Send; all shared fields are atomic.
unsafe impl Sync for AuxBuffer {}

impl AuxBuffer {
    /// `rb_alloc_aux()` over `mem`'s AUX area.
    pub fn new(
        mem: Arc<RingMemory>,
        config: AuxConfig,
        wakeup: Arc<Wakeup>,
    ) -> Result<Self, RingError> {
        let base = mem.aux_ptr().ok_or(RingError::NoAux)?;
        let aux_size = mem.layout().aux_size as u64;
        let aux_overwrite = !config.writable;
        let aux_watermark = if aux_overwrite {
            0
        } else if config.aux_watermark != 0 {
            u64::from(config.aux_watermark)
        } else {
            (aux_size / 2).min(u64::from(u32::MAX))
        };
        let head = mem.user_word(offsets::AUX_HEAD).load(Ordering::Relaxed);
        Ok(AuxBuffer {
            base,
            aux_size,
            aux_head: AtomicU64::new(head),
            aux_wakeup: AtomicU64::new(head),
            aux_watermark,
            aux_overwrite,
            aux_nest: AtomicU32::new(0),
            wakeup,
            mem,
        })
    }

    /// `aux_size`.
    pub fn aux_size(&self) -> u64 {
        self.aux_size
    }

    /// `rb->aux_head`.
    pub fn aux_head(&self) -> u64 {
        self.aux_head.load(Ordering::Relaxed)
    }

    /// `rb->aux_watermark`.
    pub fn aux_watermark(&self) -> u64 {
        self.aux_watermark
    }

    /// `rb->aux_overwrite`.
    pub fn aux_overwrite(&self) -> bool {
        self.aux_overwrite
    }

    /// `perf_aux_output_begin()`.
    #[doc(alias = "perf_aux_output_begin")]
    pub fn output_begin(&self) -> Result<AuxHandle<'_>, AuxBeginError> {
        if self
            .aux_nest
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(AuxBeginError::Nested);
        }
        let head = self.aux_head.load(Ordering::Relaxed);
        let mut handle = AuxHandle {
            rb: self,
            head,
            size: 0,
            aux_flags: 0,
            wakeup: 0,
        };
        if !self.aux_overwrite {
            // (A): pairs with the consumer's Release store of aux_tail.
            let tail = self
                .mem
                .user_word(offsets::AUX_TAIL)
                .load(Ordering::Acquire);
            handle.wakeup = self.aux_wakeup.load(Ordering::Relaxed) + self.aux_watermark;
            if head.wrapping_sub(tail) < self.aux_size {
                handle.size = circ_space(head, tail, self.aux_size);
            }
            if handle.size == 0 {
                self.wakeup.wake();
                // The handle's Drop releases aux_nest.
                return Err(AuxBeginError::Full);
            }
        }
        Ok(handle)
    }

    /// `rb_need_aux_wakeup()`.
    fn need_aux_wakeup(&self) -> bool {
        if self.aux_overwrite {
            return false;
        }
        let head = self.aux_head.load(Ordering::Relaxed);
        let w = self.aux_wakeup.load(Ordering::Relaxed);
        if head.wrapping_sub(w) >= self.aux_watermark {
            self.aux_wakeup
                .store(head - head % self.aux_watermark.max(1), Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Publishes `rb->aux_head` into the user page (the PMU's stores
    /// before it).
    fn publish_aux_head(&self) {
        self.mem
            .user_word(offsets::AUX_HEAD)
            .store(self.aux_head.load(Ordering::Relaxed), Ordering::Release);
    }

    /// `rb_output_aux()` / `perf_output_copy_aux()`: copies the bytes at
    /// AUX positions `[from, to)` (unmasked; `to - from` at most
    /// `aux_size`, the whole area when equal) across the wrap into `sink`,
    /// with at most two `put`s. The kernel masks both ends and copies the
    /// whole area when they meet; a caller wanting that passes
    /// `to = from + aux_size`.
    pub fn copy_aux(&self, from: u64, to: u64, sink: &mut impl ByteSink) -> Result<u64, RingError> {
        copy_aux(self.base, self.aux_size, from, to, sink)
    }

    /// [`AuxBuffer::copy_aux`] into a slice of exactly `to - from` bytes.
    pub fn copy_aux_to_slice(&self, from: u64, to: u64, out: &mut [u8]) -> Result<(), RingError> {
        copy_aux_to_slice(self.base, self.aux_size, from, to, out)
    }
}

/// The two pieces `[from, to)` of an area of `size` bytes splits into at
/// its wrap: (offset, len) of each.
pub(crate) fn aux_pieces(size: u64, from: u64, to: u64) -> Result<[(usize, usize); 2], RingError> {
    let len = to.wrapping_sub(from);
    if len > size {
        return Err(RingError::AuxRange { from, to, size });
    }
    if len == 0 {
        return Ok([(0, 0), (0, 0)]);
    }
    let off = from & (size - 1);
    let first = len.min(size - off);
    Ok([(off as usize, first as usize), (0, (len - first) as usize)])
}

pub(crate) fn copy_aux(
    base: *const u8,
    size: u64,
    from: u64,
    to: u64,
    sink: &mut impl ByteSink,
) -> Result<u64, RingError> {
    for (off, len) in aux_pieces(size, from, to)? {
        if len != 0 {
            // SAFETY: aux_pieces keeps off + len <= size, inside the AUX
            // mapping that outlives this call; the bytes are plain u8. The
            // slice lives only for the put, and the PMU must not write
            // [from, to) meanwhile (the caller's contract, as in the kernel:
            // snapshots run with the PMU stopped or on its own CPU).
            let piece = unsafe { std::slice::from_raw_parts(base.wrapping_add(off), len) };
            sink.put(piece);
        }
    }
    Ok(to.wrapping_sub(from))
}

pub(crate) fn copy_aux_to_slice(
    base: *const u8,
    size: u64,
    from: u64,
    to: u64,
    out: &mut [u8],
) -> Result<(), RingError> {
    if out.len() as u64 != to.wrapping_sub(from) {
        return Err(RingError::AuxRange {
            from,
            to,
            size: out.len() as u64,
        });
    }
    copy_aux(base, size, from, to, &mut SliceSink { out, at: 0 })?;
    Ok(())
}

/// A [`ByteSink`] filling a slice front to back (the caller sized it).
struct SliceSink<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl ByteSink for SliceSink<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.out[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }
}

/// `struct perf_output_handle` for the AUX area.
pub struct AuxHandle<'a> {
    rb: &'a AuxBuffer,
    /// `handle->head`: where the PMU writes next (unmasked). In overwrite
    /// mode the PMU moves it itself ([`AuxHandle::set_head`]).
    head: u64,
    /// `handle->size`: bytes the PMU may write from `head` (0 in
    /// overwrite mode, where the whole area is its own).
    size: u64,
    aux_flags: u64,
    /// `handle->wakeup`.
    wakeup: u64,
}

impl<'a> AuxHandle<'a> {
    /// `handle->head`.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// `handle->size`.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// `handle->aux_flags`.
    pub fn aux_flags(&self) -> u64 {
        self.aux_flags
    }

    /// `handle->wakeup`: the head at which the next watermark wakeup is due.
    pub fn wakeup(&self) -> u64 {
        self.wakeup
    }

    /// The AUX buffer.
    pub fn buffer(&self) -> &'a AuxBuffer {
        self.rb
    }

    /// Overwrite mode: the PMU reports where its writing stopped (the
    /// kernel's drivers set `handle->head`); `end` publishes it as
    /// `aux_head`. Unmasked and growing, so that a consumer can tell a
    /// wrapped area (`aux_head >= aux_size`).
    pub fn set_head(&mut self, head: u64) {
        self.head = head;
    }

    /// `perf_aux_output_flag()`: TRUNCATED, PARTIAL, COLLISION and the PMU
    /// format bits. OVERWRITE is the core's alone (mainline WARNs); it is
    /// refused here and nothing is set.
    #[doc(alias = "perf_aux_output_flag")]
    pub fn flag(&mut self, flags: u64) -> Result<(), i32> {
        if flags & PERF_AUX_FLAG_OVERWRITE != 0 {
            return Err(perfaux_abi::errno::EINVAL);
        }
        self.aux_flags |= flags;
        Ok(())
    }

    /// `perf_aux_output_skip()`: gives up `size` bytes of the handle's
    /// space as written padding: `aux_head` moves on and is published.
    #[doc(alias = "perf_aux_output_skip")]
    pub fn skip(&mut self, size: u64) -> Result<(), NoSpace> {
        if size > self.size {
            return Err(NoSpace);
        }
        let rb = self.rb;
        let head = rb.aux_head.load(Ordering::Relaxed) + size;
        rb.aux_head.store(head, Ordering::Relaxed);
        rb.publish_aux_head();
        if rb.need_aux_wakeup() {
            rb.wakeup.wake();
            self.wakeup = rb.aux_wakeup.load(Ordering::Relaxed) + rb.aux_watermark;
        }
        self.head = head;
        self.size -= size;
        Ok(())
    }

    /// `perf_aux_output_end()`: publishes `aux_head` (moved by `size`, or
    /// in overwrite mode set to [`AuxHandle::head`]), wakes the consumer
    /// when `TRUNCATED` or a watermark was crossed, releases `aux_nest`,
    /// and returns the `PERF_RECORD_AUX` to write, if any.
    #[doc(alias = "perf_aux_output_end")]
    pub fn end(mut self, size: u64) -> AuxEnd {
        let rb = self.rb;
        let mut wakeup = self.aux_flags & PERF_AUX_FLAG_TRUNCATED != 0;
        let aux_offset;
        if rb.aux_overwrite {
            self.aux_flags |= PERF_AUX_FLAG_OVERWRITE;
            aux_offset = self.head;
            rb.aux_head.store(self.head, Ordering::Relaxed);
        } else {
            self.aux_flags &= !PERF_AUX_FLAG_OVERWRITE;
            aux_offset = rb.aux_head.load(Ordering::Relaxed);
            rb.aux_head
                .store(aux_offset.wrapping_add(size), Ordering::Relaxed);
        }
        let record =
            (size != 0 || self.aux_flags & !PERF_AUX_FLAG_OVERWRITE != 0).then_some(AuxRecord {
                aux_offset,
                aux_size: size,
                flags: self.aux_flags,
            });
        rb.publish_aux_head();
        if rb.need_aux_wakeup() {
            wakeup = true;
        }
        if wakeup {
            rb.wakeup.wake();
        }
        AuxEnd {
            record,
            wakeup,
            disable: self.aux_flags & PERF_AUX_FLAG_TRUNCATED != 0,
        }
        // Drop releases aux_nest.
    }

    /// Writes `bytes` at AUX position `head + offset` (split at the wrap).
    /// Full-trace mode: the bytes must lie in the handle's space
    /// `[head, head + size)`; overwrite mode: anywhere, at most `aux_size`
    /// bytes. Out of range: nothing is written.
    pub fn write_at(&self, offset: u64, bytes: &[u8]) -> Result<(), NoSpace> {
        let len = bytes.len() as u64;
        let fits = if self.rb.aux_overwrite {
            len <= self.rb.aux_size
        } else {
            offset.checked_add(len).is_some_and(|end| end <= self.size)
        };
        if !fits {
            return Err(NoSpace);
        }
        // SAFETY: used at once, while this handle is open.
        let writer = unsafe { self.raw_writer() };
        // SAFETY: the range is the handle's own space (or, in overwrite
        // mode, the area this handle's holder alone writes), and len <=
        // aux_size so the masked write stays in the area.
        unsafe { writer.write(self.head.wrapping_add(offset), bytes) };
        Ok(())
    }

    /// A writer for a tracer's hot path: the area's base and mask, no
    /// lifetime, no checks.
    ///
    /// # Safety
    /// The returned writer may be used only while this handle is open and
    /// the memory alive, and only for the positions the handle owns:
    /// `[head, head + size)` in full-trace mode, anywhere in overwrite mode
    /// (while no consumer reads the area, i.e. the consumer reads after
    /// the PMU stopped).
    pub unsafe fn raw_writer(&self) -> RawAuxWriter {
        RawAuxWriter {
            base: self.rb.base,
            mask: self.rb.aux_size - 1,
        }
    }
}

impl Drop for AuxHandle<'_> {
    fn drop(&mut self) {
        self.rb.aux_nest.store(0, Ordering::Release);
    }
}

/// The AUX area as a base and a mask, for a PMU that writes ~16 bytes per
/// traced call. See [`AuxHandle::raw_writer`] for when it may be used.
#[derive(Debug, Clone, Copy)]
pub struct RawAuxWriter {
    base: *mut u8,
    mask: u64,
}

// SAFETY: the writer is a pointer into shared memory; its users uphold
// raw_writer's contract, which does not depend on the thread.
unsafe impl Send for RawAuxWriter {}

impl RawAuxWriter {
    /// `aux_size`.
    pub fn aux_size(&self) -> u64 {
        self.mask + 1
    }

    /// Writes `bytes` at unmasked AUX position `pos`, split at the wrap.
    ///
    /// # Safety
    /// [`AuxHandle::raw_writer`]'s contract, and `bytes.len() <= aux_size`.
    #[inline]
    pub unsafe fn write(&self, pos: u64, bytes: &[u8]) {
        let off = (pos & self.mask) as usize;
        let room = (self.mask as usize + 1) - off;
        if bytes.len() <= room {
            // SAFETY: off + len <= aux_size, inside the area (caller's contract).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    self.base.wrapping_add(off),
                    bytes.len(),
                )
            };
        } else {
            // SAFETY: [off, aux_size) and [0, len - room) with len <= aux_size.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.wrapping_add(off), room)
            };
            // SAFETY: as above, the part after the wrap.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr().wrapping_add(room),
                    self.base,
                    bytes.len() - room,
                )
            };
        }
    }
}
