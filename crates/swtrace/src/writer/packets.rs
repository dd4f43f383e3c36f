//! The cold packets: LOST and SYNC (with the clock anchor, refreshed every few ms), the
//! PAUSED/RESUMED/STOPPED boundaries, and full-trace space (the core's [`OnFull`] slow path).

use std::sync::atomic::Ordering::Relaxed;

use super::config::OnFull;
use super::thread::{TIMING_SPARSE, TRACING, ThreadTrace};
use crate::clock::{self, ClockSource};
use crate::format::{self, LostKind, MAX_EVENT, SyncHeader, TimeConv};

/// Events a writer stopped for lack of space drops between two asks for space
/// ([`ThreadTrace::drop_full`]): often enough that the trace resumes soon after the consumer
/// read the area (a few microseconds of a busy thread's calls), rarely enough that a stopped
/// writer's probes stay about as cheap as counting.
pub const FULL_RETRY_EVERY: u64 = 1024;

/// Ticks after which a SYNC re-measures its clock anchor (about 5 ms of TSC at 3 GHz).
const ANCHOR_REFRESH_TICKS: u64 = 1 << 24;

impl ThreadTrace {
    /// Makes room for the next event (full-trace) and writes the due LOST and SYNC packets.
    /// Returns the head to write the event at, or None when there is no space.
    #[cold]
    #[inline(never)]
    pub(super) fn prepare_cold(&self, head: u64, now: u64) -> Option<u64> {
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
            // A fresh reading: `now` may be the last measured time (an untimed packet).
            self.write_lost_and_sync(now.max(self.now()));
        }
        Some(self.head.load(Relaxed))
    }

    /// True when `needed` bytes fit below the limit, asking the core's on_full if they do not.
    pub(super) fn ensure_space(&self, head: u64, needed: u64) -> bool {
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

    /// An ENTER or EXIT dropped by a writer stopped for lack of space (mode FULL), counted.
    /// Once in [`FULL_RETRY_EVERY`] drops the slow path is asked for space again: the consumer
    /// may have read the area since, and a driver restarts at its next
    /// `perf_aux_output_begin`. Given the space, the stream starts again with LOST (the drops)
    /// and a SYNC, the mode is TRACING, and this event is not lost after all: true, and the
    /// caller writes it. Busy section held by the caller.
    #[cold]
    #[inline(never)]
    pub(super) fn drop_full(&self) -> bool {
        let dropped = self.lost_full.fetch_add(1, Relaxed) + 1;
        if !dropped.is_multiple_of(FULL_RETRY_EVERY) {
            return false;
        }
        self.lost_full.fetch_sub(1, Relaxed);
        if self.restart_full() {
            return true;
        }
        self.lost_full.fetch_add(1, Relaxed);
        false
    }

    /// Asks the slow path for space to go on after a stop for lack of it; with room for the
    /// LOST and SYNC that restart the stream and the event after them, writes them and
    /// returns true.
    fn restart_full(&self) -> bool {
        let f = self.on_full.load(Relaxed);
        if f == 0 {
            return false;
        }
        // SAFETY: on_full holds either 0 or an `OnFull` fn pointer stored by `install`.
        let on_full: OnFull = unsafe { std::mem::transmute::<usize, OnFull>(f) };
        let head = self.head.load(Relaxed);
        let needed = (format::MAX_SYNC + 2 * format::MAX_LOST + MAX_EVENT) as u64;
        let Some(limit) = on_full(head, needed) else {
            return false;
        };
        // The slow path's word, checked as `set_limit` checks a new limit.
        let size = self.mask.load(Relaxed) + 1;
        if limit < head.saturating_add(needed) || limit - head > size {
            return false;
        }
        self.limit.store(limit, Relaxed);
        self.full_stopped.store(false, Relaxed);
        self.update_fast_end();
        self.update_mode();
        if self.mode.load(Relaxed) != TRACING {
            return false;
        }
        self.write_lost_and_sync(self.now());
        true
    }

    /// Writes LOST for the drops not reported yet (the caller made room: 2 x MAX_LOST);
    /// returns the head after them and the last timestamp. Does not publish the head.
    pub(super) fn write_lost(&self, now: u64) -> (u64, u64) {
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
    pub(super) fn write_lost_and_sync(&self, now: u64) {
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
            } | if self.timing.load(Relaxed) & TIMING_SPARSE != 0 {
                format::SYNC_FLAG_UNTIMED
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

    pub(super) fn refresh_anchor(&self, now: u64) -> TimeConv {
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

    pub(super) fn set_conv(&self, c: TimeConv) {
        self.conv_anchor_ticks.store(c.anchor_ticks, Relaxed);
        self.conv_anchor_ns.store(c.anchor_ns, Relaxed);
        self.conv_mult.store(c.mult, Relaxed);
        self.conv_shift.store(c.shift, Relaxed);
    }

    /// Writes TAG `value` for the innermost open call, in a busy section of its own; while
    /// tracing only (paused, stopped for space or busy, the tag is not written: it has nothing
    /// to tag in the stream). A due SYNC goes first, as before any packet: it lists the
    /// tagged call, so the TAG still belongs to it.
    pub(crate) fn tag(&self, value: u64) {
        if !self.begin() {
            return;
        }
        if self.mode.load(Relaxed) == TRACING {
            let mut head = self.head.load(Relaxed);
            let ready = head < self.fast_end.load(Relaxed)
                || match self.prepare_cold(head, self.last_ticks.load(Relaxed)) {
                    Some(h) => {
                        head = h;
                        true
                    }
                    None => false,
                };
            if ready {
                // As an ENTER/EXIT is stored (one 16-byte store where it fits): there is room
                // for MAX_EVENT bytes past the head, and a TAG is at most 11.
                let mut buf = [0u8; 16];
                let n = format::encode_tag(&mut buf, value);
                self.store_event(head, u128::from_le_bytes(buf), n);
                self.publish(head + n as u64);
            }
        }
        self.end();
    }

    /// Writes a PAUSED/RESUMED/STOPPED packet (busy section held by the caller); false when
    /// there was no space.
    pub(super) fn write_boundary(&self, header: u8) -> bool {
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
}
