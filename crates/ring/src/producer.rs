//! The producer half of the data area: what `perf_output_begin()`,
//! `perf_output_put_handle()` and `perf_output_end()` in
//! kernel/events/ring_buffer.c do, for writers that are threads and signal
//! handlers (the kernel's NMIs) of one process.
//!
//! # Protocol and memory ordering
//!
//! A writer reserves its bytes and enters the nest with one CAS on the
//! state word, writes them, and leaves the nest with one more CAS; a
//! writer that finds itself alone publishes `data_head` before it leaves. Why that is correct for
//! threads as well as nested handlers, and how the orderings pair with the
//! consumer's (the kernel's barriers A, B, C, D), is the module doc of
//! [`crate::protocol`], which holds that code alone so that loom can check
//! it. The hot path takes no lock and allocates nothing, so it may run in a
//! signal handler that interrupted another writer of the same ring.
//!
//! # What the kernel's ring adds around the protocol
//!
//! - **Records** are 8-byte aligned and `size` is a multiple of 8, so a
//!   header (8 bytes at an 8-aligned position) never straddles the wrap;
//!   a body may, and [`OutputHandle`]'s [`ByteSink::put`] splits its copy
//!   there.
//! - **LOST**: a record that does not fit is dropped and counted in
//!   `rb->lost`; the next writer that sees a non-zero count reserves room
//!   for a `PERF_RECORD_LOST { id, lost }` in front of its own record and
//!   writes it with the count it takes (`local_xchg(&rb->lost, 0)`). The
//!   ring does not know the event, so the caller passes the event's id and
//!   its `sample_id` trailer in [`LostInfo`]. As in the kernel, two writers
//!   that both saw a count may both reserve a LOST record and the second
//!   one then says `lost = 0`; the sum over all LOST records is exact.
//! - **Overwrite** (the consumer mapped the data area read-only, so
//!   `RING_BUFFER_WRITABLE` is clear): `data_tail` is ignored and old
//!   records are overwritten. **write_backward**: the head moves down and
//!   is published as it is (`rb->head`, so `data_head` is the negated count
//!   of bytes written); records lie from the head upwards, newest first.
//! - **Pause** (`PERF_EVENT_IOC_PAUSE_OUTPUT`): a paused ring drops and
//!   counts every record.
//! - **Wakeups**: `rb->wakeup` moves by `rb->watermark` whenever the head
//!   gets more than a watermark past it (default half the area, or
//!   `wakeup_watermark`); [`OutputHandle::count_wakeup_event`] is the
//!   `wakeup_events` counting `perf_output_sample()` does. The writer that
//!   publishes wakes the consumer ([`crate::Wakeup`]) if `rb->wakeup`
//!   moved since its `perf_output_begin`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use perfaux_abi::consts::PERF_RECORD_LOST;
use perfaux_abi::mmap_page::offsets;
use perfaux_abi::{ByteSink, PerfEventHeader};

use crate::aux::{AuxBuffer, AuxConfig};
use crate::error::RingError;
use crate::memory::RingMemory;
use crate::protocol;
use crate::wakeup::Wakeup;

/// How the producer runs the data area (from the event's attr and the
/// consumer's mapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataConfig {
    /// `RING_BUFFER_WRITABLE`: the consumer mapped the data area with
    /// `PROT_WRITE` and owns `data_tail`. False: overwrite mode.
    pub writable: bool,
    /// `attr.write_backward`.
    pub write_backward: bool,
    /// `attr.watermark ? attr.wakeup_watermark : 0`; 0 means half the area.
    pub wakeup_watermark: u32,
}

impl Default for DataConfig {
    fn default() -> Self {
        DataConfig {
            writable: true,
            write_backward: false,
            wakeup_watermark: 0,
        }
    }
}

/// The event a `PERF_RECORD_LOST` speaks for: its id and its `sample_id`
/// trailer (empty without `sample_id_all`). `sample_id.len()` must be a
/// multiple of 8 (every `sample_id` field is).
#[derive(Debug, Clone, Copy, Default)]
pub struct LostInfo<'a> {
    /// The event's id, for the LOST record.
    pub id: u64,
    /// The event's `sample_id` trailer, for the LOST record.
    pub sample_id: &'a [u8],
}

/// Why `perf_output_begin()` gave no handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputError {
    /// The ring is paused (`PERF_EVENT_IOC_PAUSE_OUTPUT`); counted as lost.
    Paused,
    /// Not enough space (or no data area); counted as lost if there is a data area.
    NoSpace,
    /// The size is 0, not a multiple of 8, above 65535 with the LOST
    /// record, or the `sample_id` is not a multiple of 8: a caller bug,
    /// not counted.
    InvalidSize {
        /// The size asked for.
        size: usize,
    },
}

impl OutputError {
    /// The kernel's return value for this case (`-ENOSPC` or `-EINVAL`).
    pub fn errno(self) -> i32 {
        match self {
            OutputError::Paused | OutputError::NoSpace => perfaux_abi::errno::ENOSPC,
            OutputError::InvalidSize { .. } => perfaux_abi::errno::EINVAL,
        }
    }
}

/// `struct perf_buffer`, producer side: the data area (and, after
/// [`PerfBuffer::rb_alloc_aux`], the AUX area) of one ring.
pub struct PerfBuffer {
    mem: Arc<RingMemory>,
    data: *mut u8,
    data_size: u64,
    /// `rb->head` and `rb->nest`: see [`crate::protocol`].
    state: protocol_atomics::State,
    /// `rb->lost`.
    lost: AtomicU64,
    /// `rb->paused`.
    paused: AtomicBool,
    /// `rb->overwrite`.
    overwrite: bool,
    backward: bool,
    /// All writers are one thread and its signal handlers
    /// ([`PerfBuffer::new_per_thread`]): `local_t` operations suffice.
    local: bool,
    /// `rb->watermark`.
    watermark: u64,
    /// `rb->wakeup`: the position the next watermark wakeup counts from.
    wakeup_pos: AtomicU64,
    /// `rb->events`.
    events: AtomicU32,
    wakeup: Arc<Wakeup>,
    aux: Option<AuxBuffer>,
}

mod protocol_atomics {
    /// The state word lives in process memory, never in the shared page.
    pub type State = crate::sync::AtomicU64;
}

// SAFETY: the raw `data` pointer points into `mem`, which is Send + Sync and
// kept alive by the Arc; writers touch only the bytes they reserved.
unsafe impl Send for PerfBuffer {}
// SAFETY: as for Send: every shared field is atomic and the data bytes are
// handed out by the reservation protocol.
unsafe impl Sync for PerfBuffer {}

impl PerfBuffer {
    /// `ring_buffer_init()`: a producer over `mem`'s data area, with a new
    /// [`Wakeup`] (see [`PerfBuffer::with_wakeup`] for one with an eventfd).
    pub fn new(mem: Arc<RingMemory>, config: DataConfig) -> Result<Self, RingError> {
        Self::with_wakeup(mem, config, Arc::new(Wakeup::new()))
    }

    /// [`PerfBuffer::new`] with a given wakeup.
    pub fn with_wakeup(
        mem: Arc<RingMemory>,
        config: DataConfig,
        wakeup: Arc<Wakeup>,
    ) -> Result<Self, RingError> {
        if !mem.data_writable() {
            return Err(RingError::ReadOnly {
                what: "a producer's data area",
            });
        }
        let data_size = mem.layout().data_size as u64;
        // ring_buffer_init(): min(max_size, watermark), else max_size / 2.
        let mut watermark = u64::from(config.wakeup_watermark).min(data_size);
        if watermark == 0 {
            watermark = data_size / 2;
        }
        let data_head = mem.user_word(offsets::DATA_HEAD).load(Ordering::Relaxed);
        // Bytes written so far: a backward ring's head is their negation.
        let head = if config.write_backward {
            data_head.wrapping_neg()
        } else {
            data_head
        };
        Ok(PerfBuffer {
            data: mem.data_ptr(),
            data_size,
            state: protocol_atomics::State::new(head & protocol::POS_MASK),
            lost: AtomicU64::new(0),
            paused: AtomicBool::new(false),
            overwrite: !config.writable,
            backward: config.write_backward,
            local: false,
            watermark,
            wakeup_pos: AtomicU64::new(head),
            events: AtomicU32::new(0),
            wakeup,
            aux: None,
            mem,
        })
    }

    /// A ring whose writers are one thread and the signal handlers that
    /// interrupt it, like the kernel's per-CPU buffers, whose writers are a
    /// CPU's task and its interrupts and NMIs: the protocol is the same, but
    /// its read-modify-writes are the kernel's `local_t` operations
    /// ([`protocol::Local`]: no `lock` prefix), which makes
    /// `perf_output_begin`/`end` several times cheaper.
    ///
    /// # Safety
    /// Only one thread at a time may write into this ring (take output
    /// handles); its signal handlers may, at any point. Handing the ring to
    /// another thread is fine once the first has no handle open. Another
    /// thread writing concurrently could be given bytes that are also
    /// given to another writer.
    pub unsafe fn new_per_thread(
        mem: Arc<RingMemory>,
        config: DataConfig,
        wakeup: Arc<Wakeup>,
    ) -> Result<Self, RingError> {
        let mut rb = Self::with_wakeup(mem, config, wakeup)?;
        rb.local = true;
        Ok(rb)
    }

    /// Whether the writers are one thread and its signal handlers.
    pub fn per_thread(&self) -> bool {
        self.local
    }

    /// The memory under this ring.
    pub fn memory(&self) -> &Arc<RingMemory> {
        &self.mem
    }

    /// The wakeup the consumer waits on.
    pub fn wakeup(&self) -> &Arc<Wakeup> {
        &self.wakeup
    }

    /// `rb->overwrite`.
    pub fn overwrite(&self) -> bool {
        self.overwrite
    }

    /// `rb->watermark`.
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// Records dropped and not yet reported in a `PERF_RECORD_LOST`.
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Free bytes now (`CIRC_SPACE` of the reserved head and `data_tail`;
    /// the whole area in overwrite mode). A user-space writer that would
    /// rather wait than drop checks this before `output_begin`; the kernel
    /// never waits.
    pub fn data_space(&self) -> u64 {
        if self.data_size == 0 {
            return 0;
        }
        if self.overwrite {
            return self.data_size;
        }
        let pos = protocol::state_pos(self.state.load(Ordering::Relaxed));
        let tail = self
            .mem
            .user_word(offsets::DATA_TAIL)
            .load(Ordering::Acquire);
        if self.backward {
            protocol::circ_space(tail, pos.wrapping_neg(), self.data_size)
        } else {
            protocol::circ_space(pos, tail, self.data_size)
        }
    }

    /// `PERF_EVENT_IOC_PAUSE_OUTPUT`: while paused, every record is dropped
    /// and counted as lost (`rb_toggle_paused()`).
    pub fn pause_output(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }

    /// Whether output is paused.
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// `perf_output_begin()` (and `perf_output_begin_backward()` for a
    /// `write_backward` ring): reserves `size` bytes for one record, after a
    /// `PERF_RECORD_LOST` built from `lost` if records were dropped since
    /// the last one. Write exactly `size` bytes into the handle, header
    /// first; dropping the handle is `perf_output_end()`.
    #[inline]
    pub fn output_begin<'a>(
        &'a self,
        size: usize,
        lost: &LostInfo<'_>,
    ) -> Result<OutputHandle<'a>, OutputError> {
        if size == 0 || !size.is_multiple_of(8) || !lost.sample_id.len().is_multiple_of(8) {
            return Err(OutputError::InvalidSize { size });
        }
        if self.data_size == 0 {
            return Err(OutputError::NoSpace);
        }
        if self.paused.load(Ordering::Relaxed) {
            self.lost.fetch_add(1, Ordering::Relaxed);
            return Err(OutputError::Paused);
        }
        let have_lost = self.lost.load(Ordering::Relaxed) != 0;
        let lost_size = if have_lost {
            LOST_SIZE + lost.sample_id.len()
        } else {
            0
        };
        if size > usize::from(u16::MAX) {
            return Err(OutputError::InvalidSize { size });
        }
        let total = (size + lost_size) as u64;
        if total > self.data_size {
            self.lost.fetch_add(1, Ordering::Relaxed);
            return Err(OutputError::NoSpace);
        }
        let Some(mut handle) = self.reserve(total) else {
            self.lost.fetch_add(1, Ordering::Relaxed);
            return Err(OutputError::NoSpace);
        };
        if have_lost {
            let count = self.lost.swap(0, Ordering::Relaxed);
            put_lost(&mut handle, lost, count);
        }
        Ok(handle)
    }

    /// The reservation of `perf_output_begin()`: `total` bytes (at most the
    /// area) from the head, moving `rb->wakeup` past a watermark; `None`
    /// if they do not fit before `data_tail`. Nothing is counted here.
    #[inline(always)]
    fn reserve(&self, total: u64) -> Option<OutputHandle<'_>> {
        let wakeup = self.wakeup_pos.load(Ordering::Relaxed);
        let tail = self.mem.user_word(offsets::DATA_TAIL);
        let (state, data_size, check) = (&self.state, self.data_size, !self.overwrite);
        let reserved = if self.local {
            protocol::reserve_with::<protocol::Local, _>(
                state,
                tail,
                total,
                data_size,
                check,
                self.backward,
            )
        } else {
            protocol::reserve_with::<protocol::Smp, _>(
                state,
                tail,
                total,
                data_size,
                check,
                self.backward,
            )
        };
        let r = reserved?;
        // The published head after this record: bytes written so far, for
        // both directions (a backward head is published negated).
        let head = r.end;
        let w = self.wakeup_pos.load(Ordering::Relaxed);
        if head.wrapping_sub(w) & protocol::POS_MASK > self.watermark {
            let _ = self.wakeup_pos.compare_exchange(
                w,
                w.wrapping_add(self.watermark),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        let pos = if self.backward {
            r.end.wrapping_neg()
        } else {
            r.start
        };
        Some(OutputHandle {
            rb: self,
            pos,
            remaining: total as usize,
            wakeup,
        })
    }

    /// Writes the `PERF_RECORD_LOST` of the records dropped since the last
    /// one on its own, without a record after it: the kernel leaves such a
    /// count in `rb->lost` until the next record, which never comes once
    /// the ring's writers are gone, and the loss would go unsaid. Returns
    /// the count written (0: nothing was lost); `NoSpace` if the LOST
    /// record does not fit (the count stays for a later try), `Paused` if
    /// output is paused. Neither is counted as another loss.
    pub fn output_lost(&self, lost: &LostInfo<'_>) -> Result<u64, OutputError> {
        if self.lost.load(Ordering::Relaxed) == 0 {
            return Ok(0);
        }
        let size = LOST_SIZE + lost.sample_id.len();
        if !lost.sample_id.len().is_multiple_of(8) || size > usize::from(u16::MAX) {
            return Err(OutputError::InvalidSize { size });
        }
        if self.paused.load(Ordering::Relaxed) {
            return Err(OutputError::Paused);
        }
        if size as u64 > self.data_size {
            return Err(OutputError::NoSpace);
        }
        let mut handle = self.reserve(size as u64).ok_or(OutputError::NoSpace)?;
        let count = self.lost.swap(0, Ordering::Relaxed);
        put_lost(&mut handle, lost, count);
        Ok(count)
    }

    /// `perf_output_begin()`, a copy of `record`, `perf_output_end()`.
    #[inline]
    pub fn output_record(&self, record: &[u8], lost: &LostInfo<'_>) -> Result<(), OutputError> {
        let mut h = self.output_begin(record.len(), lost)?;
        h.put(record);
        Ok(())
    }

    /// The second half of `perf_output_put_handle()`: publish if last out,
    /// then wake the consumer if `rb->wakeup` moved.
    #[inline(always)]
    fn put_handle(&self, handle_wakeup: u64) {
        let data_head = self.mem.user_word(offsets::DATA_HEAD);
        let published = if self.local {
            protocol::put_handle_with::<protocol::Local, _>(&self.state, data_head, self.backward)
        } else {
            protocol::put_handle_with::<protocol::Smp, _>(&self.state, data_head, self.backward)
        };
        if !published {
            return;
        }
        if handle_wakeup != self.wakeup_pos.load(Ordering::Relaxed) {
            self.wakeup.wake();
        }
    }

    /// Copies `bytes` to ring position `pos` (unmasked), split at the wrap.
    #[inline(always)]
    fn copy_to(&self, pos: u64, bytes: &[u8]) {
        let off = (pos & (self.data_size - 1)) as usize;
        let dst = self.data.wrapping_add(off);
        let first = bytes.len().min(self.data_size as usize - off);
        // The bytes are this writer's reservation: no other writer touches
        // them and the consumer reads them only after they are published.
        if first == bytes.len() && (8..=32).contains(&bytes.len()) {
            // SAFETY: [off, off + len) is in the data area (no wrap).
            unsafe { small_copy(bytes, dst) };
            return;
        }
        // SAFETY: off < data_size and first <= data_size - off, so
        // [off, off+first) is in the data area.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, first) };
        if first < bytes.len() {
            // SAFETY: the rest, bytes.len() - first < data_size bytes
            // (the reservation is at most data_size), from the area's start.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr().wrapping_add(first),
                    self.data,
                    bytes.len() - first,
                );
            }
        }
    }

    /// `rb_alloc_aux()`: sets up the producer's side of `mem`'s AUX area,
    /// sharing this ring's wakeup; see [`crate::aux`].
    pub fn rb_alloc_aux(&mut self, config: AuxConfig) -> Result<(), RingError> {
        self.aux = Some(AuxBuffer::new(
            self.mem.clone(),
            config,
            self.wakeup.clone(),
        )?);
        Ok(())
    }

    /// The AUX area's producer side, if allocated.
    pub fn aux(&self) -> Option<&AuxBuffer> {
        self.aux.as_ref()
    }
}

/// Copies 8..=32 bytes with two (possibly overlapping) fixed-size moves
/// each way, inline: a `memcpy` call costs more than the record it copies
/// on the 10 ns path.
///
/// # Safety
/// `dst` is valid for `src.len()` bytes of writes and does not overlap `src`.
#[inline(always)]
unsafe fn small_copy(src: &[u8], dst: *mut u8) {
    let n = src.len();
    debug_assert!((8..=32).contains(&n));
    if n >= 16 {
        let a: [u8; 16] = src[..16].try_into().unwrap_or_default();
        let b: [u8; 16] = src[n - 16..].try_into().unwrap_or_default();
        // SAFETY: [0, 16) of dst is writable (the caller's contract, n >= 16).
        unsafe { dst.cast::<[u8; 16]>().write_unaligned(a) };
        // SAFETY: [n-16, n) of dst, likewise.
        unsafe {
            dst.wrapping_add(n - 16)
                .cast::<[u8; 16]>()
                .write_unaligned(b)
        };
    } else {
        let a: [u8; 8] = src[..8].try_into().unwrap_or_default();
        let b: [u8; 8] = src[n - 8..].try_into().unwrap_or_default();
        // SAFETY: [0, 8) of dst is writable (the caller's contract, n >= 8).
        unsafe { dst.cast::<[u8; 8]>().write_unaligned(a) };
        // SAFETY: [n-8, n) of dst, likewise.
        unsafe { dst.wrapping_add(n - 8).cast::<[u8; 8]>().write_unaligned(b) };
    }
}

/// Size of `PERF_RECORD_LOST` without `sample_id`: header, id, lost.
pub const LOST_SIZE: usize = 24;

/// Writes `PERF_RECORD_LOST { id, lost = count }` and `lost`'s `sample_id`
/// at the start of `h`'s reservation.
#[inline]
fn put_lost(h: &mut OutputHandle<'_>, lost: &LostInfo<'_>, count: u64) {
    let size = LOST_SIZE + lost.sample_id.len();
    let header = PerfEventHeader::new(PERF_RECORD_LOST, 0, size as u16);
    let mut rec = [0u8; LOST_SIZE];
    rec[..8].copy_from_slice(&header.to_native_u64().to_ne_bytes());
    rec[8..16].copy_from_slice(&lost.id.to_ne_bytes());
    rec[16..24].copy_from_slice(&count.to_ne_bytes());
    h.put(&rec);
    h.put(lost.sample_id);
}

/// `struct perf_output_handle` for the data area: the reserved bytes of one
/// record. Writing goes straight into the ring ([`ByteSink`]); dropping
/// the handle is `perf_output_end()`.
pub struct OutputHandle<'a> {
    rb: &'a PerfBuffer,
    /// Ring position of the next byte.
    pos: u64,
    remaining: usize,
    /// `handle->wakeup`: `rb->wakeup` when the handle was taken.
    wakeup: u64,
}

impl OutputHandle<'_> {
    /// Reserved bytes not yet written.
    pub fn remaining(&self) -> usize {
        self.remaining
    }

    /// `perf_output_end()`.
    pub fn end(self) {}

    /// The `wakeup_events` accounting of `perf_output_sample()` (only for
    /// events without `attr.watermark`): every `wakeup_events`-th sample
    /// moves `rb->wakeup`, so the writer that publishes wakes the consumer.
    pub fn count_wakeup_event(&self, wakeup_events: u32) {
        if wakeup_events == 0 {
            return;
        }
        let rb = self.rb;
        let events = rb.events.fetch_add(1, Ordering::Relaxed) + 1;
        if events >= wakeup_events {
            rb.events.fetch_sub(wakeup_events, Ordering::Relaxed);
            rb.wakeup_pos.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl OutputHandle<'_> {
    /// A caller that wrote less than it reserved: publish zeros, not the
    /// stale bytes of an older record that could parse as one. Out of line:
    /// the hot path never comes here.
    #[cold]
    #[inline(never)]
    fn zero_rest(&mut self) {
        self.put_zeros(self.remaining);
    }
}

impl ByteSink for OutputHandle<'_> {
    /// `__output_copy()`: bytes beyond the reservation are not written
    /// (a caller bug: debug builds assert).
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        debug_assert!(
            bytes.len() <= self.remaining,
            "record overruns its reservation"
        );
        let n = bytes.len().min(self.remaining);
        self.rb.copy_to(self.pos, &bytes[..n]);
        self.pos = self.pos.wrapping_add(n as u64);
        self.remaining -= n;
    }
}

impl Drop for OutputHandle<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.remaining != 0 {
            self.zero_rest();
        }
        self.rb.put_handle(self.wakeup);
    }
}
