//! The hot path: a probe's entry and return on an observed thread (each one busy section),
//! and the ENTER/EXIT packet, two bytes with one store in the common case (module doc of
//! `writer`, "Hot path"). Everything that is not the common case leaves for `packets`.

use std::ptr;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::atomic::compiler_fence;

#[cfg(test)]
use super::test_points::{Point, at_point};
use super::thread::{PAUSED, TIMING_SPARSE, TIMING_UNTIMED_EXITS, TRACING, ThreadTrace};
use crate::format::{self, MAX_EVENT};
use crate::probe::{GUARD_LOST, GUARD_OBSERVED, OpenCall, Probe};

impl ThreadTrace {
    // ---- the probes' side ----

    /// One probe entry, wholly inside the busy section: the mode (and through it base, mask,
    /// limit) is read only after `begin`, so no control call from a signal handler can change
    /// it under the entry (module doc, "Signal safety").
    #[inline(always)]
    pub(crate) fn enter(&self, probe: &'static Probe, flags: u8) -> OpenCall {
        self.enter_with::<false>(probe, flags)
    }

    /// [`ThreadTrace::enter`] with the ENTER written inline when `INLINE`: for a caller that
    /// is one entry site of every call ([`crate::Lane`], the compilers' hooks), where the
    /// out-of-line call's saved registers cost more than the code it adds; a probe's own
    /// entry, inlined at every probe, stays small.
    #[inline(always)]
    pub(crate) fn enter_with<const INLINE: bool>(
        &self,
        probe: &'static Probe,
        flags: u8,
    ) -> OpenCall {
        #[cfg(test)]
        at_point(Point::EnterBefore);
        if !self.begin() {
            return self.enter_nested(flags);
        }
        #[cfg(test)]
        at_point(Point::EnterInside);
        let mode = self.mode.load(Relaxed);
        let depth = if mode >= PAUSED {
            self.shadow.push(probe)
        } else if mode == TRACING {
            if INLINE {
                self.emit_event(probe.current_id());
                self.shadow.push(probe)
            } else {
                self.trace_enter(probe)
            }
        } else if self.drop_full() {
            self.trace_enter(probe)
        } else {
            self.shadow.push(probe)
        };
        // Read inside the section: the guard and its depth belong to the same shadow stack.
        let epoch = self.epoch.load(Relaxed);
        self.end();
        OpenCall {
            depth,
            epoch,
            flags: flags | GUARD_OBSERVED,
        }
    }

    /// A signal handler's probe on a busy writer: neither written nor pushed, and its return is
    /// counted lost too.
    #[cold]
    #[inline(never)]
    pub(super) fn enter_nested(&self, flags: u8) -> OpenCall {
        self.count_lost_nested();
        OpenCall {
            depth: 0,
            epoch: self.epoch.load(Relaxed),
            flags: flags | GUARD_LOST,
        }
    }

    /// One probe return, wholly inside the busy section (as [`ThreadTrace::enter`]).
    #[inline(always)]
    pub(crate) fn exit(&self, guard: OpenCall) {
        self.exit_with::<false>(guard)
    }

    /// [`ThreadTrace::exit`], the EXIT written inline when `INLINE` (as
    /// [`ThreadTrace::enter_with`]).
    #[inline(always)]
    pub(crate) fn exit_with<const INLINE: bool>(&self, guard: OpenCall) {
        #[cfg(test)]
        at_point(Point::ExitBefore);
        if !self.begin() {
            // Scalars, not the OpenCall: a struct argument to an out-of-line call is spilled
            // to the stack on every return, also when this branch is not taken.
            self.exit_nested(guard.depth, guard.epoch, guard.flags);
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
                        if INLINE {
                            self.emit_event(0);
                        } else {
                            self.trace_exit();
                        }
                    } else if self.drop_full() {
                        self.trace_exit();
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
    pub(super) fn exit_nested(&self, depth: u32, epoch: u32, flags: u8) {
        if self.epoch.load(Relaxed) != epoch {
            return;
        }
        self.count_lost_nested();
        if flags & GUARD_OBSERVED != 0 {
            self.shadow.pop_to(depth);
        }
    }

    /// ENTER then the shadow push (busy held by the caller), so that a SYNC written before the
    /// ENTER shows the stack without the new frame. Out of line: the tracked paused path stays
    /// small, and inlining it measured no faster (the two clock reads dominate).
    #[inline(never)]
    pub(super) fn trace_enter(&self, probe: &'static Probe) -> u32 {
        self.emit_event(probe.current_id());
        self.shadow.push(probe)
    }

    /// EXIT (busy held by the caller); the caller pops after it, so a SYNC before the EXIT
    /// still lists the returning frame.
    #[inline(never)]
    pub(super) fn trace_exit(&self) {
        self.emit_event(0);
    }

    /// Writes ENTER of probe `id`, or EXIT when `id` is 0 (busy section held by the caller).
    ///
    /// The common packet is two bytes: a one-byte header (EXIT, or a short ENTER of a probe
    /// id below 128) and a delta below 128 ticks, written with one 2-byte store when no SYNC
    /// is due, there is room, and the two bytes do not straddle the end of the region.
    /// Everything else takes [`ThreadTrace::emit_event_general`].
    #[inline(always)]
    pub(super) fn emit_event(&self, id: u32) {
        let now = self.event_ticks(id);
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

    /// The clock reading for the next ENTER/EXIT (probe `id`, 0 for EXIT): a fresh one when
    /// the timing mode times this packet (every packet in [`super::Timing::Full`]; ENTERs in
    /// `EntryOnly`; one in `every` in `Periodic`), else the last time (delta 0, untimed). In
    /// the sparse modes a fresh reading is at least one tick after the last, so that delta 0
    /// always means untimed (format module doc, "Sparse timing").
    #[inline(always)]
    pub(super) fn event_ticks(&self, id: u32) -> u64 {
        let left = self.ts_countdown.load(Relaxed);
        let last = self.last_ticks.load(Relaxed);
        // Counting down (the sparse modes' common case): one test and one store.
        if left != 0 {
            self.ts_countdown.store(left - 1, Relaxed);
            return last;
        }
        let timing = self.timing.load(Relaxed);
        if id != 0 || timing & TIMING_UNTIMED_EXITS == 0 {
            self.ts_countdown
                .store(self.ts_every.load(Relaxed) - 1, Relaxed);
            self.now()
                .max(last.saturating_add(u64::from(timing / TIMING_SPARSE)))
        } else {
            // An untimed EXIT at the end of the countdown: it stays at 0 for the next ENTER.
            last
        }
    }

    /// Any ENTER/EXIT: SYNC or space due first, long ids and deltas, wrapping packets.
    #[inline(never)]
    pub(super) fn emit_event_general(&self, id: u32, now: u64) {
        // Timed (a fresh reading, event_ticks) unless it repeats the last time; decided before
        // a SYNC below moves the last time.
        let timed = now > self.last_ticks.load(Relaxed);
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
        let mut delta = now.saturating_sub(last);
        if timed {
            // A SYNC just written may carry a reading later than `now`: a timed packet still
            // says it is timed (delta >= 1 in the sparse modes).
            delta = delta.max(u64::from(self.timing.load(Relaxed) / TIMING_SPARSE));
        }
        let (packet, n) = format::pack_event(id, delta);
        self.store_event(head, packet, n);
        if delta > 0 {
            self.last_ticks.store(last + delta, Relaxed);
        }
        self.publish(head + n as u64);
    }

    /// Stores the head after the packet's bytes (see the module doc), and into the head's
    /// mirror if there is one ([`super::set_head_mirror`]).
    #[inline(always)]
    pub(super) fn publish(&self, head: u64) {
        compiler_fence(Release);
        self.head.store(head, Release);
        // A test, not a second store into `head` when there is no mirror: that store cost
        // a probe of the periodic mode 0.4 ns (examples/hotpath, AMD EPYC).
        let mirror = self.head_mirror.load(Relaxed);
        if !mirror.is_null() {
            // SAFETY: the word `set_head_mirror`'s contract keeps valid for atomic stores
            // until this thread clears the mirror.
            unsafe { (*mirror).store(head, Release) };
        }
    }

    #[inline(always)]
    pub(super) fn store_event(&self, head: u64, packet: u128, n: usize) {
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
    pub(super) fn store_bytes(&self, head: u64, bytes: &[u8]) {
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
}
