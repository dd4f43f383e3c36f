//! A stream's ticks to CLOCK_MONOTONIC ns across its SYNCs, continuous where the writer
//! re-anchors (the reader's side of the clock module's "How trace times map").
//!
//! Each SYNC carries the writer's current [`TimeConv`], and the writer takes a fresh anchor
//! every few ms (`ANCHOR_REFRESH_TICKS`). Two anchors never map the same tick to the same ns
//! exactly: each has the error of its pair's bracket, and the older one has drifted by the
//! rate's error times its age (recorded under 4 busy loops: steps of up to 350 ns at the first
//! refresh, 30 ms after the install-time anchor). Switching conversions at the SYNC would
//! step the thread's times by that much: a call open across the SYNC would last that much
//! longer or shorter, and a short one (a `fib` leaf takes 10 to 40 ns) would end before it
//! began, which the views clamp to "0 ns", though ticks (and time) moved forward.
//!
//! So where a SYNC continues the stream, the clock keeps the previous mapping's time at the
//! SYNC and slews from there to the new anchor's: the difference shrinks by 1 ns every
//! [`SLEW_RATIO`] ns, then the new conversion holds exactly. Times stay non-decreasing in
//! ticks, a duration is off by at most 1/[`SLEW_RATIO`] of itself, and agreement with the
//! perf clock right after the SYNC is the previous anchor's, as just before it. A step larger
//! than [`MAX_SLEW_NS`] (an anchor badly off) is taken at once: agreement with the perf clock
//! matters more than continuity then. A SYNC that starts a window (first one, or after
//! skipped bytes) has nothing to be continuous with and applies its conversion as is.

use crate::format::TimeConv;

/// The slew: the correction shrinks by 1 ns per this many ns of stream time (0.1%).
pub(crate) const SLEW_RATIO: u64 = 1000;

/// Largest step between two anchors that is slewed (it takes 100 ms of stream time to
/// absorb); larger ones are stepped.
pub(crate) const MAX_SLEW_NS: u64 = 100_000;

/// Ticks to ns for one stream, with the slew described in the module doc.
#[derive(Clone, Debug)]
pub(crate) struct StreamClock {
    conv: TimeConv,
    /// ns to add to `conv`'s time at `since`; shrinks to 0 over `|correction| * SLEW_RATIO` ns.
    correction: i64,
    /// `conv`'s time at the SYNC that started the slew.
    since: u64,
}

impl StreamClock {
    pub(crate) fn new() -> StreamClock {
        StreamClock {
            conv: TimeConv::IDENTITY,
            correction: 0,
            since: 0,
        }
    }

    /// Applies a SYNC's conversion at its `ticks`. `continues`: the SYNC follows the packets
    /// decoded before it in the same stream (no skipped bytes), so their times are the ones to
    /// stay continuous with.
    pub(crate) fn sync(&mut self, conv: TimeConv, ticks: u64, continues: bool) {
        let before = self.ns(ticks);
        self.conv = conv;
        self.correction = 0;
        if continues {
            let after = conv.to_ns(ticks);
            let step = i128::from(before) - i128::from(after);
            if step.unsigned_abs() <= u128::from(MAX_SLEW_NS) {
                self.correction = step as i64;
                self.since = after;
            }
        }
    }

    /// CLOCK_MONOTONIC ns of `ticks` (at or after the last SYNC's).
    #[inline]
    pub(crate) fn ns(&mut self, ticks: u64) -> u64 {
        let t = self.conv.to_ns(ticks);
        if self.correction == 0 {
            t
        } else {
            self.slewed(t)
        }
    }

    /// `t` (the new conversion's time) with what is left of the correction. Out of line: the
    /// decoder's per-packet path is the branch above.
    #[inline(never)]
    fn slewed(&mut self, t: u64) -> u64 {
        let span = self.correction.unsigned_abs() * SLEW_RATIO;
        let elapsed = t.saturating_sub(self.since);
        if elapsed >= span {
            // Absorbed: the new conversion alone from here (ticks only move forward).
            self.correction = 0;
            return t;
        }
        // Truncated toward 0: the correction drops by at most ceil(d / SLEW_RATIO) <= d over
        // d ns, so times never decrease.
        let left = i128::from(self.correction) * i128::from(span - elapsed) / i128::from(span);
        t.saturating_add_signed(left as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 ns per tick from `anchor_ns` at tick 0.
    fn conv(anchor_ns: u64) -> TimeConv {
        TimeConv {
            anchor_ticks: 0,
            anchor_ns,
            mult: 1,
            shift: 0,
        }
    }

    #[test]
    fn a_step_back_is_slewed_without_time_going_back() {
        let mut c = StreamClock::new();
        c.sync(conv(1_000_000), 0, false);
        assert_eq!(c.ns(500), 1_000_500);
        // The new anchor maps tick 1000 300 ns earlier than the old one.
        c.sync(conv(999_700), 1000, true);
        assert_eq!(c.ns(1000), 1_001_000, "continuous at the SYNC");
        let mut last = 0;
        for t in 1000..1000 + 300 * SLEW_RATIO + 10 {
            let ns = c.ns(t);
            assert!(ns >= last, "tick {t}: {ns} < {last}");
            last = ns;
        }
        assert_eq!(
            c.ns(1000 + 300 * SLEW_RATIO),
            999_700 + 1000 + 300 * SLEW_RATIO
        );
        assert_eq!(
            c.ns(1_000_000_000),
            999_700 + 1_000_000_000,
            "new anchor holds"
        );
    }

    #[test]
    fn a_step_forward_is_slewed_too() {
        let mut c = StreamClock::new();
        c.sync(conv(1_000_000), 0, false);
        c.sync(conv(1_000_100), 1000, true);
        assert_eq!(c.ns(1000), 1_001_000);
        // 10 ns of ticks: 10 ns, plus the slew's 0.1% rounded (the correction truncates).
        assert!((1_001_010..=1_001_011).contains(&c.ns(1010)));
        assert_eq!(
            c.ns(1000 + 100 * SLEW_RATIO),
            1_000_100 + 1000 + 100 * SLEW_RATIO
        );
    }

    #[test]
    fn a_new_window_or_a_large_step_takes_the_anchor_as_is() {
        let mut c = StreamClock::new();
        c.sync(conv(1_000_000), 0, false);
        c.sync(conv(999_000), 1000, false);
        assert_eq!(c.ns(1000), 1_000_000);
        c.sync(conv(999_000 - MAX_SLEW_NS - 1), 2000, true);
        assert_eq!(c.ns(2000), 999_000 - MAX_SLEW_NS - 1 + 2000);
    }
}
