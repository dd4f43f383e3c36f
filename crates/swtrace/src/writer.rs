//! The per-thread writer: the producer half of the trace, and its contract with the core.
//!
//! # Contract with the core (the trace PMU)
//!
//! Everything here acts on the **calling thread**, like a PMU's `start`/`stop` running on the
//! CPU of its event. The core:
//!
//! - [`install`]s a writer over the AUX area of the calling thread's event (`pmu::start`): an
//!   [`AuxRegion`] (raw pointer + power-of-two size, built with an `unsafe` constructor whose
//!   safety contract the core upholds), a start position (`aux_head`), and a mode:
//!   [`AuxMode::Overwrite`] (wrap freely: the flight recorder) or [`AuxMode::FullTrace`] (never
//!   write at or beyond `limit`; when the next packet does not fit, call the writer's
//!   [`OnFull`] slow path, which may publish the data (perf_aux_output_end) and grant new space
//!   (perf_aux_output_begin) by returning a new limit, or return `None`: the writer then stops
//!   and counts what it drops until [`set_limit`] gives space again, and the trace says so with a
//!   LOST packet);
//! - [`pause`]s and [`resume`]s it (`pmu::stop(PERF_EF_PAUSE)` / `pmu::start(PERF_EF_RESUME)`):
//!   paused = nothing written; PAUSED and RESUMED packets mark the boundaries. A paused thread
//!   is not observed at all unless [`WriterConfig::track_paused`] or a shadow stack user asks
//!   for the calls opened meanwhile (see [`pause`]);
//! - reads [`aux_head`], the position after the last complete packet, to copy into the user
//!   page's aux_head at perf_aux_output_end. The head is stored after the packet's bytes, so it
//!   is always at a packet boundary, also when read from a signal handler that interrupted the
//!   writer in the middle of a packet;
//! - [`uninstall`]s it (`pmu::stop`/`del`), which writes STOPPED and returns the final head.
//!
//! Positions (`aux_head`, limits) are 64-bit stream offsets that only grow, like the kernel's
//! aux_head; byte `p` of the stream lives at `base[p & (size - 1)]`.
//!
//! # Signal safety (the trace's NMI)
//!
//! A signal handler runs like the kernel's NMI: between any two instructions of its thread,
//! never concurrently with it, and to completion before the thread goes on. It may enter probes
//! and make control calls ([`install`], [`uninstall`], [`pause`], [`resume`], [`set_limit`]).
//! The protocol is one per-thread `busy` byte:
//!
//! - **Every probe event and every control call runs inside a busy section, and reads the
//!   writer's state (mode, base, mask, limit, head, epoch, paused, installed) only after taking
//!   it.** `begin` loads `busy`, and if it is 0 stores 1, then a compiler fence keeps every
//!   state access below the store.
//! - A handler that runs *before* the store of 1 (also between the load and the store) runs to
//!   completion first: whatever it changed (even a removed writer, or another region installed)
//!   is what the interrupted code then reads. Nothing read before `begin` is used after it, so
//!   there is no stale base, limit or mode. (The earlier protocol read the mode before `begin`:
//!   a handler's `uninstall` in between made the probe write through the cleared base.)
//! - A handler that runs *after* the store finds `busy` set: its probe events write nothing and
//!   are counted lost ([`crate::format::LostKind::Nested`]; their returns too), reported by a
//!   LOST packet before the next SYNC or, at the end, before STOPPED; [`pause`], [`resume`],
//!   [`set_limit`], [`enable_shadow_stack`] and [`disable_shadow_stack`] are recorded in
//!   `pending` and applied (and only then validated) by `end`, once the interrupted event is
//!   complete; [`install`] and [`uninstall`] fail with [`WriterError::Busy`] (the core
//!   retries). So nothing the section read can change until `end` stores 0.
//! - `end` stores 0 behind a compiler fence, then applies pending requests, each in its own
//!   section. A handler after the store of 0 is again the first case.
//!
//! Hence an ENTER or EXIT and its shadow stack update are one section (no SYNC ever shows one
//! without the other), a call opened while paused (and followed: `track_paused` or a shadow
//! stack user) is on the stack before any SYNC a resume writes or after it (never half), and a
//! guard's depth and epoch come from the same shadow stack. Every store to the slot is made
//! inside a section too, so a handler's pause or resume cannot interleave with a decision to
//! publish or clear it. The handler may also read: [`aux_head`] (the head is stored after the
//! packet's bytes, so it is at a packet boundary), [`status`] and [`callchain`] (the shadow
//! stack stores the new depth before the frame, so a reader sees a consistent prefix) are
//! async-signal-safe; so are [`install`] and [`enable_shadow_stack`] on a thread's first use,
//! which makes its state without allocating (`lifetime`'s module doc). The on_full slow path
//! runs inside the section: probes it enters are lost and control calls it makes are deferred.
//!
//! All fields are atomics accessed with relaxed loads and stores (plain moves on x86_64: no
//! read-modify-write on the hot path) with compiler fences, which is what makes the signal
//! handler's view well defined. The crate's tests raise a real signal at each point of this
//! argument (`writer/signal_tests.rs`, through test-only points) and churn the writer from a
//! 20 µs timer signal (`tests/signals.rs`).
//!
//! # Hot path
//!
//! With no writer and no hook: the slot load (the one thread-local access of an entry), the
//! hook-word load, a branch, and a test of the guard's flag bits on return. Paused: the same,
//! since pausing clears the slot; with `track_paused` (or a shadow stack user) the busy section
//! (a load and two stores of `busy`, a load of `pending`), one comparison of the mode, and the
//! shadow stack push/pop, all inline. Tracing: read the clock (unless `timestamp_every` says
//! to reuse the last reading), compare the head with
//! `fast_end` (the next SYNC position and the limit in one), and when the delta is below 128
//! ticks and the probe id below 128 (the common case) store the two-byte packet with one
//! 2-byte store; anything else (a due SYNC, full-trace space, long ids or deltas, a packet
//! that straddles the end of the region) takes an out-of-line general path, which builds the
//! packet in a register ([`format::pack_event`]) and stores it with one unaligned 16-byte
//! store when it does not straddle the end. Only the packet's own bytes are meaningful: up to
//! 15 bytes after the head are scratch (in full-trace mode they are within the granted space;
//! in overwrite mode they are the oldest bytes, which a snapshot reader resyncs past anyway).
//! Every field these paths touch is in the first cache line of the thread's state.

#[cfg(test)]
use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::{Relaxed, Release, SeqCst};
use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, compiler_fence,
};

use thiserror::Error;

use crate::clock::{self, ClockSource};
use crate::format::{self, LostKind, MAX_EVENT, SyncHeader, TimeConv};
use crate::probe::{GUARD_LOST, GUARD_OBSERVED, Probe, ProbeGuard, ProbeId};
use crate::shadow::{SHADOW_CAP, ShadowStack};

/// Smallest AUX region the writer accepts: room for the largest SYNC and many packets.
pub const MIN_REGION: usize = 256;
/// Default `sync_period`: a SYNC at least every 512 bytes of stream.
pub const DEFAULT_SYNC_PERIOD: u32 = 512;
/// Ticks after which a SYNC re-measures its clock anchor (about 5 ms of TSC at 3 GHz).
const ANCHOR_REFRESH_TICKS: u64 = 1 << 24;

/// Errors of the writer's control calls.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum WriterError {
    /// The region's size is not a power of two of at least [`MIN_REGION`] bytes.
    #[error("AUX region size {0} is not a power of two >= 256")]
    BadRegionSize(usize),
    /// The region's base pointer is null.
    #[error("AUX region base is null")]
    NullRegion,
    /// This thread already has a writer.
    #[error("this thread already has a trace writer installed")]
    AlreadyInstalled,
    /// This thread has no writer.
    #[error("this thread has no trace writer installed")]
    NotInstalled,
    /// The call came from a signal handler (or the on_full slow path) that interrupted the
    /// writer in the middle of a packet.
    #[error("the trace writer is in the middle of a packet (called from a signal handler?)")]
    Busy,
    /// A full-trace limit lies before the head or more than the region's size beyond it.
    #[error("full-trace limit {limit} outside [aux_head {head}, aux_head + size {size}]")]
    BadLimit {
        /// The limit asked for.
        limit: u64,
        /// The writer's head.
        head: u64,
        /// The region's size.
        size: usize,
    },
    /// `timestamp_every` is 0.
    #[error("timestamp_every must be at least 1")]
    BadTimestampEvery,
    /// `sync_period` below the largest SYNC would make a stream of SYNCs.
    #[error("sync_period {0} is below the minimum of 128 bytes")]
    BadSyncPeriod(u32),
}

/// The AUX memory a writer fills.
#[derive(Debug)]
pub struct AuxRegion {
    base: NonNull<u8>,
    size: usize,
}

// SAFETY: an AuxRegion is only an address and a size; the constructor's contract makes the
// memory the writer's while installed, whichever thread built the region.
unsafe impl Send for AuxRegion {}

impl AuxRegion {
    /// A region of `size` bytes at `base`.
    ///
    /// # Safety
    ///
    /// From [`install`] until [`uninstall`] returns (or the installing thread exits), `base ..
    /// base + size` must stay valid for writes, and nothing else may write it. In full-trace
    /// mode the writer only writes stream positions below the limit the core grants, so the
    /// core may hand out and read back the rest (the consumer's unread data) concurrently.
    /// Readers of bytes the writer may be writing (an overwrite-mode snapshot) must stop or
    /// pause the writer first, or read from a signal handler of the writer's own thread.
    pub unsafe fn new(base: *mut u8, size: usize) -> Result<AuxRegion, WriterError> {
        if !size.is_power_of_two() || size < MIN_REGION {
            return Err(WriterError::BadRegionSize(size));
        }
        let base = NonNull::new(base).ok_or(WriterError::NullRegion)?;
        Ok(AuxRegion { base, size })
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Base address.
    pub fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }
}

/// How the writer treats the end of its space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuxMode {
    /// Wrap freely, overwriting the oldest bytes (PERF_AUX_FLAG_OVERWRITE, snapshot mode).
    Overwrite,
    /// Never write at or beyond `limit` (a stream position, at most `aux_head + size`).
    FullTrace {
        /// The first stream position the writer may not write.
        limit: u64,
    },
}

/// The full-trace slow path: called with the head and the bytes the next packet needs when they
/// do not fit below the limit. Returns the new limit (after perf_aux_output_end/begin), or
/// `None` to stop writing until [`set_limit`]. Runs inside the writer's busy section: probes it
/// enters are counted as lost, and control calls it makes are deferred.
pub type OnFull = fn(aux_head: u64, needed: u64) -> Option<u64>;

/// What [`install`] sets up.
#[derive(Debug)]
pub struct WriterConfig {
    /// The AUX memory.
    pub region: AuxRegion,
    /// Overwrite or full-trace.
    pub mode: AuxMode,
    /// Stream position of the first byte to write (the AUX area's aux_head).
    pub aux_head: u64,
    /// Bytes of stream after which a SYNC is due (>= 128; [`DEFAULT_SYNC_PERIOD`]).
    pub sync_period: u32,
    /// Start paused (`aux_start_paused`): nothing is written before [`resume`].
    pub start_paused: bool,
    /// The timestamp clock.
    pub clock: ClockSource,
    /// Full-trace slow path.
    pub on_full: Option<OnFull>,
    /// Read the clock for one ENTER/EXIT in this many (1: every packet). Like Intel PT's
    /// timing packets, coarser timestamps trade precision for speed where the clock is slow
    /// (BENCHMARKS.md: `rdtsc` costs ~30 ns on the test VM); the packets in between carry a
    /// delta of 0, so a decoder shows them at the last measured time, as perf does for PT.
    pub timestamp_every: u32,
    /// Follow calls while paused, so that the SYNC a resume writes names the calls opened
    /// meanwhile (see [`pause`]). Off: a paused thread is not observed at all, and a paused
    /// call costs what a call with no writer costs (about 0.8 ns against 2.5 ns,
    /// BENCHMARKS.md); the trace after a resume then knows the calls that were open when it
    /// paused, as Intel PT's decoder knows nothing of what ran while tracing was off.
    pub track_paused: bool,
}

impl WriterConfig {
    /// An overwrite-mode configuration over `region` with the defaults.
    pub fn overwrite(region: AuxRegion) -> WriterConfig {
        WriterConfig {
            region,
            mode: AuxMode::Overwrite,
            aux_head: 0,
            sync_period: DEFAULT_SYNC_PERIOD,
            start_paused: false,
            clock: ClockSource::default(),
            on_full: None,
            timestamp_every: 1,
            track_paused: false,
        }
    }

    /// A full-trace configuration over `region`, with the whole region as space.
    pub fn full_trace(region: AuxRegion, on_full: Option<OnFull>) -> WriterConfig {
        let limit = region.size as u64;
        WriterConfig {
            region,
            mode: AuxMode::FullTrace { limit },
            aux_head: 0,
            sync_period: DEFAULT_SYNC_PERIOD,
            start_paused: false,
            clock: ClockSource::default(),
            on_full,
            timestamp_every: 1,
            track_paused: false,
        }
    }
}

/// The writer's counters, from [`status`] and [`uninstall`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WriterStatus {
    /// Position after the last complete packet.
    pub aux_head: u64,
    /// Current full-trace limit (`u64::MAX` in overwrite mode).
    pub limit: u64,
    /// Paused by [`pause`].
    pub paused: bool,
    /// Stopped for lack of space (full-trace).
    pub full_stopped: bool,
    /// Probe events dropped because a signal handler hit a busy writer.
    pub lost_nested: u64,
    /// Probe events dropped for lack of space.
    pub lost_full: u64,
    /// SYNC packets written.
    pub syncs: u64,
}

/// Mode byte values.
const TRACING: u8 = 0;
const FULL: u8 = 1;
/// From here up nothing is written: the paused path is one comparison (`mode >= PAUSED`).
const PAUSED: u8 = 2;
const SHADOW_ONLY: u8 = 3;

/// Pending request bits (set while busy, applied after the packet).
const REQ_PAUSE: u32 = 1;
const REQ_RESUME: u32 = 2;
const REQ_LIMIT: u32 = 4;
const REQ_OBSERVE: u32 = 8;
const REQ_UNOBSERVE: u32 = 16;

/// Everything the probes of one thread touch. Reached through the thread's slot only, by the
/// thread itself and its signal handlers. `repr(C)` and 64-byte aligned so that every field
/// the ENTER/EXIT fast path reads or writes sits in the first cache line, and the shadow
/// stack's depth and innermost frames start the second (the order is checked by a test).
#[repr(C, align(64))]
pub(crate) struct ThreadTrace {
    // Hot line: 4 x 1 + 4 x 4 + 5 x 8 = 60 bytes.
    mode: AtomicU8,
    busy: AtomicU8,
    clock_tsc: AtomicBool,
    installed: AtomicBool,
    epoch: AtomicU32,
    pending: AtomicU32,
    ts_countdown: AtomicU32,
    ts_every: AtomicU32,
    base: AtomicPtr<u8>,
    mask: AtomicU64,
    head: AtomicU64,
    /// `min(next_sync, limit - 15)`: the hot path's one comparison (head below it: no SYNC due
    /// and room for the largest ENTER/EXIT).
    fast_end: AtomicU64,
    last_ticks: AtomicU64,
    pub(crate) shadow: ShadowStack,
    // Cold fields.
    limit: AtomicU64,
    next_sync: AtomicU64,
    paused: AtomicBool,
    full_stopped: AtomicBool,
    /// The shadow stack is live (its epoch names the current stream of guards): from the
    /// first install or [`enable_shadow_stack`] until nothing needs it. The slot may still be
    /// null meanwhile (paused without `track_paused`).
    observing: AtomicBool,
    track_paused: AtomicBool,
    shadow_users: AtomicU32,
    sync_period: AtomicU64,
    on_full: AtomicUsize,
    pending_limit: AtomicU64,
    conv_anchor_ticks: AtomicU64,
    conv_anchor_ns: AtomicU64,
    conv_mult: AtomicU32,
    conv_shift: AtomicU8,
    tid: u32,
    lost_nested: AtomicU64,
    lost_full: AtomicU64,
    reported_nested: AtomicU64,
    reported_full: AtomicU64,
    syncs: AtomicU64,
}

mod lifetime;
pub use lifetime::prepare;
use lifetime::{SLOT, existing, thread_trace};
pub(crate) use lifetime::{slot, thread_trace_ptr};

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    tid as u32
}

impl ThreadTrace {
    fn new() -> ThreadTrace {
        ThreadTrace {
            mode: AtomicU8::new(SHADOW_ONLY),
            busy: AtomicU8::new(0),
            epoch: AtomicU32::new(0),
            base: AtomicPtr::new(ptr::null_mut()),
            mask: AtomicU64::new(0),
            head: AtomicU64::new(0),
            limit: AtomicU64::new(0),
            next_sync: AtomicU64::new(0),
            fast_end: AtomicU64::new(0),
            last_ticks: AtomicU64::new(0),
            pending: AtomicU32::new(0),
            clock_tsc: AtomicBool::new(false),
            ts_countdown: AtomicU32::new(0),
            ts_every: AtomicU32::new(1),
            shadow: ShadowStack::new(),
            installed: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            full_stopped: AtomicBool::new(false),
            observing: AtomicBool::new(false),
            track_paused: AtomicBool::new(false),
            shadow_users: AtomicU32::new(0),
            sync_period: AtomicU64::new(u64::from(DEFAULT_SYNC_PERIOD)),
            on_full: AtomicUsize::new(0),
            pending_limit: AtomicU64::new(0),
            conv_anchor_ticks: AtomicU64::new(0),
            conv_anchor_ns: AtomicU64::new(0),
            conv_mult: AtomicU32::new(1),
            conv_shift: AtomicU8::new(0),
            tid: gettid(),
            lost_nested: AtomicU64::new(0),
            lost_full: AtomicU64::new(0),
            reported_nested: AtomicU64::new(0),
            reported_full: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        }
    }

    // ---- the probes' side ----

    /// One probe entry, wholly inside the busy section: the mode (and through it base, mask,
    /// limit) is read only after `begin`, so no control call from a signal handler can change
    /// it under the entry (module doc, "Signal safety").
    #[inline(always)]
    pub(crate) fn enter(&self, probe: &'static Probe, flags: u8) -> ProbeGuard {
        #[cfg(test)]
        at_point(Point::EnterBefore);
        if !self.begin() {
            return self.enter_nested(probe, flags);
        }
        #[cfg(test)]
        at_point(Point::EnterInside);
        let mode = self.mode.load(Relaxed);
        let depth = if mode >= PAUSED {
            self.shadow.push(probe)
        } else if mode == TRACING {
            self.trace_enter(probe)
        } else {
            self.count_lost_full();
            self.shadow.push(probe)
        };
        // Read inside the section: the guard and its depth belong to the same shadow stack.
        let epoch = self.epoch.load(Relaxed);
        self.end();
        ProbeGuard {
            probe,
            depth,
            epoch,
            flags: flags | GUARD_OBSERVED,
            _not_send: std::marker::PhantomData,
        }
    }

    /// A signal handler's probe on a busy writer: neither written nor pushed, and its return is
    /// counted lost too.
    #[cold]
    #[inline(never)]
    fn enter_nested(&self, probe: &'static Probe, flags: u8) -> ProbeGuard {
        self.count_lost_nested();
        ProbeGuard {
            flags: flags | GUARD_LOST,
            epoch: self.epoch.load(Relaxed),
            ..ProbeGuard::idle(probe)
        }
    }

    /// One probe return, wholly inside the busy section (as [`ThreadTrace::enter`]).
    #[inline(always)]
    pub(crate) fn exit(&self, guard: &ProbeGuard) {
        #[cfg(test)]
        at_point(Point::ExitBefore);
        if !self.begin() {
            self.exit_nested(guard);
            return;
        }
        #[cfg(test)]
        at_point(Point::ExitInside);
        // A guard from before the last install belongs to another stream and shadow stack.
        if self.epoch.load(Relaxed) == guard.epoch {
            if guard.flags & GUARD_OBSERVED == 0 {
                self.count_lost_nested();
            } else {
                let mode = self.mode.load(Relaxed);
                if mode < PAUSED {
                    if mode == TRACING {
                        self.trace_exit();
                    } else {
                        self.count_lost_full();
                    }
                }
                self.shadow.pop_to(guard.depth);
            }
        }
        self.end();
    }

    /// A return on a busy writer (a signal handler's call, entered while the writer was busy
    /// too): counted lost. The interrupted code holds the section, so nothing changes the
    /// epoch or the stack under this.
    #[cold]
    #[inline(never)]
    fn exit_nested(&self, guard: &ProbeGuard) {
        if self.epoch.load(Relaxed) != guard.epoch {
            return;
        }
        self.count_lost_nested();
        if guard.flags & GUARD_OBSERVED != 0 {
            self.shadow.pop_to(guard.depth);
        }
    }

    /// ENTER then the shadow push (busy held by the caller), so that a SYNC written before the
    /// ENTER shows the stack without the new frame. Out of line: the tracked paused path stays
    /// small, and inlining it measured no faster (the two clock reads dominate).
    #[inline(never)]
    fn trace_enter(&self, probe: &'static Probe) -> u32 {
        self.emit_event(probe.current_id());
        self.shadow.push(probe)
    }

    /// EXIT (busy held by the caller); the caller pops after it, so a SYNC before the EXIT
    /// still lists the returning frame.
    #[inline(never)]
    fn trace_exit(&self) {
        self.emit_event(0);
    }

    #[cold]
    fn count_lost_full(&self) {
        self.lost_full.fetch_add(1, Relaxed);
    }

    #[cold]
    fn count_lost_nested(&self) {
        self.lost_nested.fetch_add(1, Relaxed);
        // Report it soon: the next packet starts with LOST + SYNC.
        self.next_sync.store(0, Relaxed);
        self.fast_end.store(0, Relaxed);
    }

    /// Recomputes `fast_end` after `next_sync` or `limit` changed.
    fn update_fast_end(&self) {
        let limit = self
            .limit
            .load(Relaxed)
            .saturating_sub(MAX_EVENT as u64 - 1);
        self.fast_end
            .store(self.next_sync.load(Relaxed).min(limit), Relaxed);
    }

    #[inline(always)]
    fn now(&self) -> u64 {
        if self.clock_tsc.load(Relaxed) {
            clock::tsc()
        } else {
            clock::monotonic_ns()
        }
    }

    /// Enters the busy section; false if it was busy (a signal handler on a busy writer).
    #[inline(always)]
    fn begin(&self) -> bool {
        if self.busy.load(Relaxed) != 0 {
            return false;
        }
        self.busy.store(1, Relaxed);
        // A signal handler that ran before this point has finished; one that runs after it
        // sees busy. Keep the compiler from moving the section's accesses above the store.
        compiler_fence(SeqCst);
        true
    }

    #[inline(always)]
    fn end(&self) {
        compiler_fence(SeqCst);
        self.busy.store(0, Relaxed);
        compiler_fence(SeqCst);
        if self.pending.load(Relaxed) != 0 {
            self.apply_pending();
        }
    }

    /// Writes ENTER of probe `id`, or EXIT when `id` is 0 (busy section held by the caller).
    ///
    /// The common packet is two bytes: a one-byte header (EXIT, or a short ENTER of a probe
    /// id below 128) and a delta below 128 ticks, written with one 2-byte store when no SYNC
    /// is due, there is room, and the two bytes do not straddle the end of the region.
    /// Everything else takes [`ThreadTrace::emit_event_general`].
    #[inline(always)]
    fn emit_event(&self, id: u32) {
        let now = self.event_ticks();
        let head = self.head.load(Relaxed);
        let last = self.last_ticks.load(Relaxed);
        let delta = now.saturating_sub(last);
        let mask = self.mask.load(Relaxed);
        let off = head & mask;
        if head < self.fast_end.load(Relaxed) && delta < 0x80 && id < 0x80 && off != mask {
            let header = if id == 0 {
                format::EXIT
            } else {
                format::ENTER_SHORT | id as u8
            };
            let packet = u16::from(header) | (delta as u16) << 8;
            let base = self.base.load(Relaxed);
            // off < mask, so both bytes are inside the region the core lent to this writer
            // (AuxRegion::new's contract); in full-trace mode head < fast_end <= limit - 15, so
            // they are granted space.
            let at = base.wrapping_add(off as usize).cast::<u16>();
            // SAFETY: `at` and `at + 1` are inside the lent region (see above).
            unsafe { ptr::write_unaligned(at, packet.to_le()) };
            if now > last {
                self.last_ticks.store(now, Relaxed);
            }
            self.publish(head + 2);
        } else {
            self.emit_event_general(id, now);
        }
    }

    /// The clock reading for the next ENTER/EXIT: a fresh one every `timestamp_every` events,
    /// else the last measured time (delta 0).
    #[inline(always)]
    fn event_ticks(&self) -> u64 {
        let left = self.ts_countdown.load(Relaxed);
        if left == 0 {
            self.ts_countdown
                .store(self.ts_every.load(Relaxed) - 1, Relaxed);
            self.now()
        } else {
            self.ts_countdown.store(left - 1, Relaxed);
            self.last_ticks.load(Relaxed)
        }
    }

    /// Any ENTER/EXIT: SYNC or space due first, long ids and deltas, wrapping packets.
    #[inline(never)]
    fn emit_event_general(&self, id: u32, now: u64) {
        let mut head = self.head.load(Relaxed);
        if head >= self.fast_end.load(Relaxed) {
            match self.prepare_cold(head, now) {
                Some(h) => head = h,
                None => {
                    self.lost_full.fetch_add(1, Relaxed);
                    return;
                }
            }
        }
        let last = self.last_ticks.load(Relaxed);
        let (packet, n) = format::pack_event(id, now.saturating_sub(last));
        self.store_event(head, packet, n);
        if now > last {
            self.last_ticks.store(now, Relaxed);
        }
        self.publish(head + n as u64);
    }

    /// Stores the head after the packet's bytes (see the module doc).
    #[inline(always)]
    fn publish(&self, head: u64) {
        compiler_fence(Release);
        self.head.store(head, Release);
    }

    #[inline(always)]
    fn store_event(&self, head: u64, packet: u128, n: usize) {
        let mask = self.mask.load(Relaxed);
        let base = self.base.load(Relaxed);
        let off = (head & mask) as usize;
        if off + MAX_EVENT <= mask as usize + 1 {
            // SAFETY: off + 16 <= size, so the 16 bytes are inside the region, which the core
            // lent to this writer (AuxRegion::new's contract); in full-trace mode the caller
            // checked head + MAX_EVENT <= limit, so the scratch bytes are granted space too.
            unsafe { ptr::write_unaligned(base.wrapping_add(off).cast::<u128>(), packet.to_le()) };
        } else {
            self.store_bytes(head, &packet.to_le_bytes()[..n]);
        }
    }

    /// Stores `bytes` at stream position `head`, wrapping at the end of the region.
    fn store_bytes(&self, head: u64, bytes: &[u8]) {
        let mask = self.mask.load(Relaxed);
        let base = self.base.load(Relaxed);
        let size = mask as usize + 1;
        let off = (head & mask) as usize;
        let first = bytes.len().min(size - off);
        // SAFETY: off < size and first <= size - off: the copy stays inside the region lent by
        // the core; `bytes` is a local buffer that cannot overlap it.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), base.wrapping_add(off), first) };
        let rest = bytes.len() - first;
        if rest > 0 {
            // SAFETY: rest <= bytes.len() <= MAX_SYNC < MIN_REGION <= size, so it fits at the
            // region's start.
            unsafe { ptr::copy_nonoverlapping(bytes[first..].as_ptr(), base, rest) };
        }
    }

    /// Makes room for the next event (full-trace) and writes the due LOST and SYNC packets.
    /// Returns the head to write the event at, or None when there is no space.
    #[cold]
    #[inline(never)]
    fn prepare_cold(&self, head: u64, now: u64) -> Option<u64> {
        let need_sync = head >= self.next_sync.load(Relaxed);
        let needed = if need_sync {
            (format::MAX_SYNC + 2 * format::MAX_LOST) as u64
        } else {
            0
        } + MAX_EVENT as u64;
        if !self.ensure_space(head, needed) {
            return None;
        }
        if need_sync {
            // A fresh reading: `now` may be the last measured time (timestamp_every > 1).
            self.write_lost_and_sync(now.max(self.now()));
        }
        Some(self.head.load(Relaxed))
    }

    /// True when `needed` bytes fit below the limit, asking the core's on_full if they do not.
    fn ensure_space(&self, head: u64, needed: u64) -> bool {
        if head.saturating_add(needed) <= self.limit.load(Relaxed) {
            return true;
        }
        let f = self.on_full.load(Relaxed);
        if f != 0 {
            // SAFETY: on_full holds either 0 or an `OnFull` fn pointer stored by `install`.
            let on_full: OnFull = unsafe { std::mem::transmute::<usize, OnFull>(f) };
            if let Some(limit) = on_full(head, needed) {
                self.limit.store(limit, Relaxed);
                self.update_fast_end();
                if head.saturating_add(needed) <= limit {
                    return true;
                }
            }
        }
        self.full_stopped.store(true, Relaxed);
        self.update_mode();
        false
    }

    /// Writes LOST for the drops not reported yet (the caller made room: 2 x MAX_LOST);
    /// returns the head after them and the last timestamp. Does not publish the head.
    fn write_lost(&self, now: u64) -> (u64, u64) {
        let mut head = self.head.load(Relaxed);
        let mut last = self.last_ticks.load(Relaxed);
        for (kind, lost, reported) in [
            (LostKind::Nested, &self.lost_nested, &self.reported_nested),
            (LostKind::Full, &self.lost_full, &self.reported_full),
        ] {
            let total = lost.load(Relaxed);
            let done = reported.load(Relaxed);
            if total != done {
                let mut buf = [0u8; format::MAX_LOST];
                let n = format::encode_lost(&mut buf, kind, total - done, now.saturating_sub(last));
                self.store_bytes(head, &buf[..n]);
                head += n as u64;
                last = last.max(now);
                reported.store(total, Relaxed);
            }
        }
        (head, last)
    }

    /// Writes LOST for unreported drops, then a SYNC. Caller is in the busy section and made
    /// room for both.
    fn write_lost_and_sync(&self, now: u64) {
        let (mut head, last) = self.write_lost(now);
        let conv = self.refresh_anchor(now);
        let mut ids = [0u32; format::MAX_SYNC_FRAMES];
        let (depth, first, n) = self.shadow.sync_frames(&mut ids);
        let mut buf = [0u8; format::MAX_SYNC];
        let header = SyncHeader {
            flags: if self.clock_tsc.load(Relaxed) {
                format::SYNC_FLAG_TSC
            } else {
                0
            },
            tid: self.tid,
            depth,
            first,
            ticks: now.max(last),
            conv,
        };
        let n = format::encode_sync(&mut buf, &header, &ids[..n]);
        self.store_bytes(head, &buf[..n]);
        head += n as u64;
        self.last_ticks.store(now.max(last), Relaxed);
        self.next_sync
            .store(head + self.sync_period.load(Relaxed), Relaxed);
        self.update_fast_end();
        self.syncs.fetch_add(1, Relaxed);
        self.publish(head);
    }

    fn refresh_anchor(&self, now: u64) -> TimeConv {
        if self.clock_tsc.load(Relaxed)
            && now.wrapping_sub(self.conv_anchor_ticks.load(Relaxed)) > ANCHOR_REFRESH_TICKS
        {
            self.set_conv(clock::anchor(ClockSource::Tsc));
        }
        TimeConv {
            anchor_ticks: self.conv_anchor_ticks.load(Relaxed),
            anchor_ns: self.conv_anchor_ns.load(Relaxed),
            mult: self.conv_mult.load(Relaxed),
            shift: self.conv_shift.load(Relaxed),
        }
    }

    fn set_conv(&self, c: TimeConv) {
        self.conv_anchor_ticks.store(c.anchor_ticks, Relaxed);
        self.conv_anchor_ns.store(c.anchor_ns, Relaxed);
        self.conv_mult.store(c.mult, Relaxed);
        self.conv_shift.store(c.shift, Relaxed);
    }

    /// Writes a PAUSED/RESUMED/STOPPED packet (busy section held by the caller); false when
    /// there was no space.
    fn write_boundary(&self, header: u8) -> bool {
        let head = self.head.load(Relaxed);
        if !self.full_stopped.load(Relaxed)
            && head.saturating_add(format::MAX_BOUNDARY as u64) <= self.limit.load(Relaxed)
        {
            let now = self.now();
            let last = self.last_ticks.load(Relaxed);
            let mut buf = [0u8; format::MAX_BOUNDARY];
            let n = format::encode_boundary(&mut buf, header, now.saturating_sub(last));
            self.store_bytes(head, &buf[..n]);
            self.last_ticks.store(now.max(last), Relaxed);
            self.publish(head + n as u64);
            true
        } else {
            false
        }
    }

    fn update_mode(&self) {
        let mode = if !self.installed.load(Relaxed) {
            SHADOW_ONLY
        } else if self.paused.load(Relaxed) {
            PAUSED
        } else if self.full_stopped.load(Relaxed) {
            FULL
        } else {
            TRACING
        };
        self.mode.store(mode, Relaxed);
        self.publish_slot();
    }

    /// Points the slot at this ThreadTrace while probes have something to do here, else
    /// clears it. A writer paused without `track_paused`, with no shadow stack user, has
    /// nothing to do: its probes take the unobserved path (their guards are idle, so the
    /// calls opened while paused are not on the shadow stack and their returns are not
    /// written), while the guards of calls opened before the pause still pop their frames
    /// ([`ProbeGuard`]'s drop finds this ThreadTrace through TRACE).
    fn publish_slot(&self) {
        let idle_pause = self.mode.load(Relaxed) == PAUSED
            && !self.track_paused.load(Relaxed)
            && self.shadow_users.load(Relaxed) == 0;
        let live = self.observing.load(Relaxed) && !idle_pause;
        #[cfg(test)]
        at_point(Point::SlotDecided);
        SLOT.with(|s| s.set(if live { self } else { ptr::null() }));
    }

    /// Starts observing on this thread (fresh shadow stack, new epoch) if it was not. Busy
    /// held by the caller, so that no probe event is between its push and its guard's epoch.
    fn observe(&self) {
        if !self.observing.load(Relaxed) {
            self.epoch
                .store(self.epoch.load(Relaxed).wrapping_add(1).max(1), Relaxed);
            self.shadow.reset();
            self.observing.store(true, Relaxed);
        }
        self.publish_slot();
    }

    /// [`ThreadTrace::observe`] in a busy section, or deferred to the end of the one a signal
    /// handler interrupted (observe may reset the shadow stack, which must not happen inside
    /// an interrupted probe event).
    fn observe_in_section(&self) {
        if self.begin() {
            self.observe();
            self.end();
        } else {
            self.pending.fetch_or(REQ_OBSERVE, Relaxed);
        }
    }

    /// [`ThreadTrace::unobserve_if_idle`] in a busy section (deferred if busy), for callers
    /// outside one: the slot it publishes must not race a handler's pause or resume, which
    /// publishes it too.
    fn unobserve_in_section(&self) {
        if self.begin() {
            self.unobserve_if_idle();
            self.end();
        } else {
            self.pending.fetch_or(REQ_UNOBSERVE, Relaxed);
        }
    }

    /// Busy held by the caller.
    fn unobserve_if_idle(&self) {
        if !self.installed.load(Relaxed) && self.shadow_users.load(Relaxed) == 0 {
            self.observing.store(false, Relaxed);
        }
        self.publish_slot();
    }

    #[cold]
    #[inline(never)]
    fn apply_pending(&self) {
        let req = self.pending.swap(0, Relaxed);
        if req & REQ_LIMIT != 0 {
            let _ = self.set_limit_now(self.pending_limit.load(Relaxed));
        }
        if req & REQ_PAUSE != 0 {
            self.pause_now();
        }
        if req & REQ_RESUME != 0 {
            self.resume_now();
        }
        // Each in a section of its own; a handler that holds one (this runs from `end`, which a
        // handler may interrupt) gets the request back, to apply at its own `end`.
        if req & REQ_OBSERVE != 0 {
            self.observe_in_section();
        }
        if req & REQ_UNOBSERVE != 0 {
            self.unobserve_in_section();
        }
    }

    /// Control calls check the state only inside the busy section: a handler that ran before
    /// `begin` may have changed it (module doc, "Signal safety").
    fn pause_now(&self) -> bool {
        #[cfg(test)]
        at_point(Point::ControlBefore);
        if !self.begin() {
            self.pending.fetch_or(REQ_PAUSE, Relaxed);
            return true;
        }
        if !self.installed.load(Relaxed) || self.paused.load(Relaxed) {
            self.end();
            return false;
        }
        if self.mode.load(Relaxed) == TRACING {
            self.write_boundary(format::PAUSED);
        }
        self.paused.store(true, Relaxed);
        self.update_mode();
        self.end();
        true
    }

    fn resume_now(&self) -> bool {
        #[cfg(test)]
        at_point(Point::ControlBefore);
        if !self.begin() {
            self.pending.fetch_or(REQ_RESUME, Relaxed);
            return true;
        }
        if !self.installed.load(Relaxed) || !self.paused.load(Relaxed) {
            self.end();
            return false;
        }
        self.paused.store(false, Relaxed);
        self.update_mode();
        if self.mode.load(Relaxed) == TRACING {
            self.write_resume_sync(true);
        }
        self.end();
        true
    }

    /// LOST/SYNC then RESUMED (if `boundary`): the start of a decodable stretch, with the
    /// boundary visible to a decoder that starts at that SYNC. Busy held.
    fn write_resume_sync(&self, boundary: bool) {
        let head = self.head.load(Relaxed);
        let needed =
            (format::MAX_BOUNDARY + format::MAX_SYNC + 2 * format::MAX_LOST + MAX_EVENT) as u64;
        if !self.ensure_space(head, needed) {
            return;
        }
        let now = self.now();
        self.write_lost_and_sync(now);
        if boundary {
            self.write_boundary(format::RESUMED);
        }
    }

    /// Validates and applies a new limit; deferred (and validated when applied) when it
    /// interrupts a packet.
    fn set_limit_now(&self, limit: u64) -> Result<(), WriterError> {
        #[cfg(test)]
        at_point(Point::ControlBefore);
        if !self.begin() {
            self.pending_limit.store(limit, Relaxed);
            self.pending.fetch_or(REQ_LIMIT, Relaxed);
            return Ok(());
        }
        if !self.installed.load(Relaxed) {
            self.end();
            return Err(WriterError::NotInstalled);
        }
        if self.limit.load(Relaxed) == u64::MAX {
            // Overwrite mode has no limit to move.
            self.end();
            return Ok(());
        }
        let head = self.head.load(Relaxed);
        let size = self.mask.load(Relaxed) + 1;
        if limit < head || limit - head > size {
            self.end();
            return Err(WriterError::BadLimit {
                limit,
                head,
                size: size as usize,
            });
        }
        self.limit.store(limit, Relaxed);
        self.update_fast_end();
        if self.full_stopped.load(Relaxed)
            && self
                .head
                .load(Relaxed)
                .saturating_add((format::MAX_SYNC + 2 * format::MAX_LOST + MAX_EVENT) as u64)
                <= limit
        {
            self.full_stopped.store(false, Relaxed);
            self.update_mode();
            if self.mode.load(Relaxed) == TRACING {
                // The dropped stretch is reported and a SYNC restarts the stream.
                self.write_resume_sync(false);
            }
        }
        self.end();
        Ok(())
    }

    fn status(&self) -> WriterStatus {
        WriterStatus {
            aux_head: self.head.load(Relaxed),
            limit: self.limit.load(Relaxed),
            paused: self.paused.load(Relaxed),
            full_stopped: self.full_stopped.load(Relaxed),
            lost_nested: self.lost_nested.load(Relaxed),
            lost_full: self.lost_full.load(Relaxed),
            syncs: self.syncs.load(Relaxed),
        }
    }
}

/// Installs a writer on the calling thread (`pmu::start`). Unless `start_paused`, the stream
/// starts with a SYNC at once.
pub fn install(config: WriterConfig) -> Result<(), WriterError> {
    let tt = thread_trace().ok_or(WriterError::NotInstalled)?;
    // The whole setup is one busy section: a handler's probes on this thread are counted lost
    // meanwhile, its control calls deferred (pause, resume, set_limit) or refused (install,
    // uninstall), so it never sees a half-built writer.
    if !tt.begin() {
        return Err(WriterError::Busy);
    }
    let result = install_busy(tt, config);
    tt.end();
    result
}

fn install_busy(tt: &'static ThreadTrace, config: WriterConfig) -> Result<(), WriterError> {
    if tt.installed.load(Relaxed) {
        return Err(WriterError::AlreadyInstalled);
    }
    if config.sync_period < 128 {
        return Err(WriterError::BadSyncPeriod(config.sync_period));
    }
    if config.timestamp_every == 0 {
        return Err(WriterError::BadTimestampEvery);
    }
    let size = config.region.size;
    let head = config.aux_head;
    let limit = match config.mode {
        AuxMode::Overwrite => u64::MAX,
        AuxMode::FullTrace { limit } => {
            if limit < head || limit - head > size as u64 {
                return Err(WriterError::BadLimit { limit, head, size });
            }
            limit
        }
    };
    let source = config.clock.effective();
    tt.clock_tsc.store(source == ClockSource::Tsc, Relaxed);
    tt.set_conv(clock::anchor(source));
    tt.base.store(config.region.base.as_ptr(), Relaxed);
    tt.mask.store(size as u64 - 1, Relaxed);
    tt.head.store(head, Release);
    tt.limit.store(limit, Relaxed);
    tt.next_sync.store(0, Relaxed);
    tt.fast_end.store(0, Relaxed);
    tt.last_ticks.store(0, Relaxed);
    tt.sync_period.store(u64::from(config.sync_period), Relaxed);
    tt.ts_every.store(config.timestamp_every, Relaxed);
    tt.ts_countdown.store(0, Relaxed);
    tt.on_full
        .store(config.on_full.map_or(0, |f| f as usize), Relaxed);
    tt.lost_nested.store(0, Relaxed);
    tt.lost_full.store(0, Relaxed);
    tt.reported_nested.store(0, Relaxed);
    tt.reported_full.store(0, Relaxed);
    tt.syncs.store(0, Relaxed);
    tt.paused.store(config.start_paused, Relaxed);
    tt.track_paused.store(config.track_paused, Relaxed);
    tt.full_stopped.store(false, Relaxed);
    tt.installed.store(true, Relaxed);
    tt.observe();
    tt.update_mode();
    if tt.mode.load(Relaxed) == TRACING {
        tt.write_resume_sync(false);
    }
    Ok(())
}

/// Removes the calling thread's writer (`pmu::stop`/`del`): writes STOPPED (when there is
/// space) and returns the final counters; `aux_head` is the end of the stream.
pub fn uninstall() -> Result<WriterStatus, WriterError> {
    let tt = existing().ok_or(WriterError::NotInstalled)?;
    #[cfg(test)]
    at_point(Point::ControlBefore);
    if !tt.begin() {
        return Err(WriterError::Busy);
    }
    // Checked inside the section: a handler may have removed the writer just before it.
    if !tt.installed.load(Relaxed) {
        tt.end();
        return Err(WriterError::NotInstalled);
    }
    // Drops not reported yet go into the stream before its end.
    let room = (2 * format::MAX_LOST + format::MAX_BOUNDARY) as u64;
    if !tt.full_stopped.load(Relaxed)
        && tt.head.load(Relaxed).saturating_add(room) <= tt.limit.load(Relaxed)
    {
        let now = tt.now();
        let (head, last) = tt.write_lost(now);
        tt.last_ticks.store(last, Relaxed);
        tt.publish(head);
    }
    tt.write_boundary(format::STOPPED);
    tt.installed.store(false, Relaxed);
    tt.update_mode();
    let status = tt.status();
    tt.base.store(ptr::null_mut(), Relaxed);
    tt.unobserve_if_idle();
    // Requests deferred during the section find no writer when applied.
    tt.end();
    Ok(status)
}

/// Pauses the calling thread's writer (`pmu::stop(PERF_EF_PAUSE)`): writes PAUSED, then
/// nothing until [`resume`]. The calls open at the pause stay on the shadow stack (their
/// returns while paused pop them), so the SYNC at resume names those still open. Calls opened
/// while paused are followed only with [`WriterConfig::track_paused`] or a shadow stack user
/// ([`enable_shadow_stack`]); otherwise the thread is not observed until the resume, which
/// keeps a paused call as cheap as an unobserved one, and those calls and their returns are
/// not in the trace. Returns whether the state changed (or the change was deferred because
/// the call interrupted a packet).
pub fn pause() -> bool {
    existing().is_some_and(ThreadTrace::pause_now)
}

/// Resumes the calling thread's writer (`pmu::start(PERF_EF_RESUME)`): writes a SYNC and
/// RESUMED. Returns whether the state changed (or the change was deferred).
pub fn resume() -> bool {
    existing().is_some_and(ThreadTrace::resume_now)
}

/// Gives a stopped or running full-trace writer space up to `limit` (perf_aux_output_begin's
/// new handle). A writer stopped for lack of space writes LOST and SYNC and continues.
pub fn set_limit(limit: u64) -> Result<(), WriterError> {
    existing()
        .ok_or(WriterError::NotInstalled)?
        .set_limit_now(limit)
}

/// The calling thread's writer head: the position after the last complete packet (what the
/// core copies into aux_head). Safe to call from a signal handler.
pub fn aux_head() -> Option<u64> {
    let t = existing()?;
    t.installed.load(Relaxed).then(|| t.head.load(Relaxed))
}

/// The calling thread's writer counters.
pub fn status() -> Option<WriterStatus> {
    existing()
        .filter(|t| t.installed.load(Relaxed))
        .map(ThreadTrace::status)
}

/// Keeps the calling thread's shadow stack maintained without a writer (for callchains of
/// samples taken at hooked probes), and while its writer is paused. Counted: pair with
/// [`disable_shadow_stack`]. Enabled during a pause without `track_paused`, the stack does not
/// know the calls opened since the pause (their guards are idle); it follows calls from here on.
/// The core enables it when a callchain sampler is added, before the sampler can fire.
pub fn enable_shadow_stack() {
    if let Some(tt) = thread_trace() {
        tt.shadow_users.fetch_add(1, Relaxed);
        tt.observe_in_section();
    }
}

/// Undoes one [`enable_shadow_stack`].
pub fn disable_shadow_stack() {
    if let Some(tt) = existing() {
        // One read-modify-write: a handler's enable or disable may land anywhere around it.
        let _ = tt
            .shadow_users
            .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
        tt.unobserve_in_section();
    }
}

/// One frame of a callchain built from the shadow stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The probe of the open call.
    pub id: ProbeId,
    /// An address inside the instrumented function (see [`Probe::addr`]).
    pub addr: u64,
}

/// What [`callchain`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Callchain {
    /// Open traced calls.
    pub depth: u32,
    /// Frames written to the caller's buffer, innermost first.
    pub written: usize,
    /// Calls that went deeper than the shadow stack's bound since it was reset.
    pub overflows: u64,
}

/// Copies the calling thread's open calls into `out`, innermost first (PERF_SAMPLE_CALLCHAIN
/// order). Frames deeper than the shadow stack's bound ([`SHADOW_CAP`]) are not known. Safe to
/// call from a signal handler; allocates nothing.
pub fn callchain(out: &mut [Frame]) -> Callchain {
    match existing() {
        Some(t) if t.observing.load(Relaxed) => t.shadow.callchain(out),
        _ => Callchain::default(),
    }
}

/// The shadow stack's bound.
pub const SHADOW_DEPTH: usize = SHADOW_CAP;

/// Where a test runs a closure in place of a signal landing there (see `signal_tests`).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Point {
    /// A probe entry read the slot and has not looked at it yet.
    ProbeSlotRead,
    /// A probe event found the thread observed and is about to take the busy section.
    EnterBefore,
    /// A probe entry holds the busy section and has not read the mode yet.
    EnterInside,
    /// As `EnterBefore`, for a return.
    ExitBefore,
    /// As `EnterInside`, for a return.
    ExitInside,
    /// A control call (pause, resume, set_limit, uninstall) is about to take the busy section.
    ControlBefore,
    /// `publish_slot` decided what the slot holds and has not stored it.
    SlotDecided,
    /// The thread's ThreadTrace is being released: TRACE is cleared, the slot not yet.
    Release,
}

/// A point and the closure to run there.
#[cfg(test)]
type Armed = Option<(Point, fn())>;

#[cfg(test)]
thread_local! {
    /// The one-shot closure to run at a point.
    static AT_POINT: Cell<Armed> = const { Cell::new(None) };
}

/// Arms `f` to run once when this thread next reaches `point`.
#[cfg(test)]
pub(crate) fn arm_point(point: Point, f: fn()) {
    AT_POINT.with(|a| a.set(Some((point, f))));
}

#[cfg(test)]
pub(crate) fn at_point(point: Point) {
    if let Some((p, f)) = AT_POINT.with(Cell::get)
        && p == point
    {
        AT_POINT.with(|a| a.set(None));
        f();
    }
}

#[cfg(test)]
mod signal_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{Event, decode};

    /// The layout the hot path relies on (ThreadTrace's doc): its fields in the first cache
    /// line, the shadow stack's depth at the start of the second.
    #[test]
    fn hot_fields_share_one_cache_line() {
        use std::mem::offset_of;
        assert_eq!(std::mem::align_of::<ThreadTrace>(), 64);
        assert!(offset_of!(ThreadTrace, last_ticks) + 8 <= 64);
        assert_eq!(offset_of!(ThreadTrace, shadow), 64);
        assert_eq!(offset_of!(ShadowStack, depth), 0);
    }

    static WRAP: Probe = Probe::new("writer_wrap");

    /// Packets that straddle the end of an overwrite region (format doc: byte `p` of the
    /// stream is at `base[p & (size - 1)]`) decode as the same events wherever they land,
    /// including the two-byte fast path's last byte (offset size - 1).
    #[test]
    fn packets_across_the_region_end_decode_at_every_offset() {
        WRAP.id().unwrap();
        for start in 120..200u64 {
            let mut aux = vec![0u8; MIN_REGION];
            // SAFETY: `aux` outlives the writer, uninstalled below.
            let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
            let mut cfg = WriterConfig::overwrite(region);
            cfg.aux_head = start;
            // Every packet carries delta 0 after the first: two-byte ENTER/EXIT.
            cfg.timestamp_every = 1000;
            install(cfg).unwrap();
            for _ in 0..20 {
                let _g = WRAP.enter();
            }
            let end = uninstall().unwrap().aux_head;
            assert!(
                end - start < MIN_REGION as u64,
                "the stream fits the region"
            );
            let stream: Vec<u8> = (start..end)
                .map(|p| aux[(p & (MIN_REGION as u64 - 1)) as usize])
                .collect();
            let events = decode(&stream);
            let id = WRAP.id().unwrap().0;
            let calls = events
                .iter()
                .filter(|e| matches!(e, Event::Enter { id: i, .. } if *i == id))
                .count();
            let exits = events
                .iter()
                .filter(|e| matches!(e, Event::Exit { id: Some(i), .. } if *i == id))
                .count();
            assert_eq!((calls, exits), (20, 20), "start {start}: {events:?}");
            assert!(matches!(events.last(), Some(Event::Stopped { .. })));
        }
    }

    #[test]
    fn uninstall_reports_unreported_drops_before_stopped() {
        let mut aux = vec![0u8; 1024];
        // SAFETY: `aux` outlives the writer, uninstalled below.
        let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
        install(WriterConfig::full_trace(region, None)).unwrap();
        let tt = existing().unwrap();
        // As a signal handler hitting a busy writer three times would.
        for _ in 0..3 {
            tt.count_lost_nested();
        }
        let end = uninstall().unwrap().aux_head as usize;
        let events = decode(&aux[..end]);
        assert!(matches!(events[0], Event::Sync { .. }));
        assert!(matches!(
            events[1],
            Event::Lost {
                kind: LostKind::Nested,
                count: 3,
                ..
            }
        ));
        assert!(matches!(events[2], Event::Stopped { .. }));
        assert_eq!(events.len(), 3);
    }
}
