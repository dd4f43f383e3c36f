//! The per-thread writer state ([`ThreadTrace`]): its layout (the hot fields in one cache
//! line), the busy section that makes it signal-safe (module doc of `writer`, "Signal
//! safety"), the mode byte, and the slot through which probes find it.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, compiler_fence,
};

use super::config::{DEFAULT_SYNC_PERIOD, WriterStatus};
#[cfg(test)]
use super::test_points::{Point, at_point};
use crate::clock;
use crate::format::MAX_EVENT;
use crate::shadow::ShadowStack;

thread_local! {
    /// The writer slot: this thread's ThreadTrace while something observes the thread, else
    /// null. No destructor, so reading it is one thread-local load.
    pub(super) static SLOT: Cell<*const ThreadTrace> = const { Cell::new(ptr::null()) };
}

/// Mode byte values.
pub(super) const TRACING: u8 = 0;
pub(super) const FULL: u8 = 1;
/// From here up nothing is written: the paused path is one comparison (`mode >= PAUSED`).
pub(super) const PAUSED: u8 = 2;
pub(super) const SHADOW_ONLY: u8 = 3;

/// Timing bit: EXITs read no clock ([`super::Timing::EntryOnly`]).
pub(super) const TIMING_UNTIMED_EXITS: u8 = 1;
/// Timing bit: some ENTER/EXIT are untimed, so timed ones carry delta >= 1 and SYNCs say so
/// (format module doc, "Sparse timing"). Also the least delta of a timed packet (`>> 1`).
pub(super) const TIMING_SPARSE: u8 = 2;

/// Pending request bits (set while busy, applied after the packet).
pub(super) const REQ_PAUSE: u32 = 1;
pub(super) const REQ_RESUME: u32 = 2;
pub(super) const REQ_LIMIT: u32 = 4;
pub(super) const REQ_OBSERVE: u32 = 8;
pub(super) const REQ_UNOBSERVE: u32 = 16;
pub(super) const REQ_PARK: u32 = 32;

/// Everything the probes of one thread touch. Reached through the thread's slot only, by the
/// thread itself and its signal handlers. `repr(C)` and 64-byte aligned so that every field
/// the ENTER/EXIT fast path reads or writes sits in the first cache line, and the shadow
/// stack's depth and innermost frames start the second (the order is checked by a test).
#[repr(C, align(64))]
pub(crate) struct ThreadTrace {
    // Hot line: 6 x 1 + 4 x 4 + 5 x 8 = 62 bytes.
    pub(super) mode: AtomicU8,
    pub(super) busy: AtomicU8,
    pub(super) clock_tsc: AtomicBool,
    pub(super) installed: AtomicBool,
    /// [`TIMING_UNTIMED_EXITS`] and [`TIMING_SPARSE`] bits.
    pub(super) timing: AtomicU8,
    /// The slot points here ([`crate::Lane`]'s test of the slot, without its thread-local).
    pub(crate) live: AtomicBool,
    pub(super) epoch: AtomicU32,
    pub(super) pending: AtomicU32,
    pub(super) ts_countdown: AtomicU32,
    pub(super) ts_every: AtomicU32,
    pub(super) base: AtomicPtr<u8>,
    pub(super) mask: AtomicU64,
    pub(super) head: AtomicU64,
    /// `min(next_sync, limit - 15)`: the hot path's one comparison (head below it: no SYNC due
    /// and room for the largest ENTER/EXIT).
    pub(super) fast_end: AtomicU64,
    pub(super) last_ticks: AtomicU64,
    pub(crate) shadow: ShadowStack,
    // Cold fields.
    pub(super) limit: AtomicU64,
    pub(super) next_sync: AtomicU64,
    pub(super) paused: AtomicBool,
    pub(super) full_stopped: AtomicBool,
    /// The shadow stack is live (its epoch names the current stream of guards): from the
    /// first install or [`enable_shadow_stack`] until nothing needs it. The slot may still be
    /// null meanwhile (paused without `track_paused`).
    pub(super) observing: AtomicBool,
    pub(super) track_paused: AtomicBool,
    /// Paused by [`super::park`] (a stop from another thread): the stream said STOPPED, so
    /// the resume that starts it again writes a SYNC without RESUMED.
    pub(super) parked: AtomicBool,
    pub(super) shadow_users: AtomicU32,
    pub(super) sync_period: AtomicU64,
    pub(super) on_full: AtomicUsize,
    pub(super) pending_limit: AtomicU64,
    pub(super) conv_anchor_ticks: AtomicU64,
    pub(super) conv_anchor_ns: AtomicU64,
    pub(super) conv_mult: AtomicU32,
    pub(super) conv_shift: AtomicU8,
    pub(super) tid: u32,
    pub(super) lost_nested: AtomicU64,
    pub(super) lost_full: AtomicU64,
    pub(super) reported_nested: AtomicU64,
    pub(super) reported_full: AtomicU64,
    pub(super) syncs: AtomicU64,
    /// A word the head is also stored into after every packet (null: none), for a caller
    /// whose reader sees that word only ([`super::set_head_mirror`]). Read by every packet's
    /// publish, yet past the first line, which the fast path's fields fill: one more line per
    /// packet (measured within noise on a direct probe, 6.25-6.48 ns against 6.11-6.39).
    pub(super) head_mirror: AtomicPtr<AtomicU64>,
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    tid as u32
}

impl ThreadTrace {
    pub(super) fn new() -> ThreadTrace {
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
            timing: AtomicU8::new(0),
            live: AtomicBool::new(false),
            ts_countdown: AtomicU32::new(0),
            ts_every: AtomicU32::new(1),
            shadow: ShadowStack::new(),
            installed: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            full_stopped: AtomicBool::new(false),
            observing: AtomicBool::new(false),
            track_paused: AtomicBool::new(false),
            parked: AtomicBool::new(false),
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
            head_mirror: AtomicPtr::new(ptr::null_mut()),
        }
    }

    #[cold]
    pub(super) fn count_lost_nested(&self) {
        self.lost_nested.fetch_add(1, Relaxed);
        // Report it soon: the next packet starts with LOST + SYNC.
        self.next_sync.store(0, Relaxed);
        self.fast_end.store(0, Relaxed);
    }

    /// Recomputes `fast_end` after `next_sync` or `limit` changed.
    pub(super) fn update_fast_end(&self) {
        let limit = self
            .limit
            .load(Relaxed)
            .saturating_sub(MAX_EVENT as u64 - 1);
        self.fast_end
            .store(self.next_sync.load(Relaxed).min(limit), Relaxed);
    }

    #[inline(always)]
    pub(super) fn now(&self) -> u64 {
        if self.clock_tsc.load(Relaxed) {
            clock::tsc()
        } else {
            clock::monotonic_ns()
        }
    }

    /// Enters the busy section; false if it was busy (a signal handler on a busy writer).
    #[inline(always)]
    pub(super) fn begin(&self) -> bool {
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
    pub(super) fn end(&self) {
        compiler_fence(SeqCst);
        self.busy.store(0, Relaxed);
        compiler_fence(SeqCst);
        if self.pending.load(Relaxed) != 0 {
            self.apply_pending();
        }
    }

    pub(super) fn update_mode(&self) {
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
    pub(super) fn publish_slot(&self) {
        let idle_pause = self.mode.load(Relaxed) == PAUSED
            && !self.track_paused.load(Relaxed)
            && self.shadow_users.load(Relaxed) == 0;
        let live = self.observing.load(Relaxed) && !idle_pause;
        #[cfg(test)]
        at_point(Point::SlotDecided);
        self.live.store(live, Relaxed);
        SLOT.with(|s| s.set(if live { self } else { ptr::null() }));
    }

    /// Starts observing on this thread (fresh shadow stack, new epoch) if it was not. Busy
    /// held by the caller, so that no probe event is between its push and its guard's epoch.
    pub(super) fn observe(&self) {
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
    pub(super) fn observe_in_section(&self) {
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
    pub(super) fn unobserve_in_section(&self) {
        if self.begin() {
            self.unobserve_if_idle();
            self.end();
        } else {
            self.pending.fetch_or(REQ_UNOBSERVE, Relaxed);
        }
    }

    /// Busy held by the caller.
    pub(super) fn unobserve_if_idle(&self) {
        if !self.installed.load(Relaxed) && self.shadow_users.load(Relaxed) == 0 {
            self.observing.store(false, Relaxed);
        }
        self.publish_slot();
    }

    #[cold]
    #[inline(never)]
    pub(super) fn status(&self) -> WriterStatus {
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
