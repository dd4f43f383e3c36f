//! Time off the CPU: a thread's context switches (the kernel's PERF_RECORD_SWITCH, which
//! `perfaux record` writes for a traced program and `perf record --switch-events` for any) as
//! the intervals it was switched out, and how much of a call's time fell in them.
//!
//! The record stream comes before the trace in the pass ([`crate::walk`]), so a thread's
//! switches are all in before its first call: they are sorted and made into intervals then,
//! and each call's share is two binary searches in the intervals' running sums.

use crate::event::ViewEvent;

/// The most switches kept, all threads together (16 bytes each as they come, and 24 per
/// interval made of them: some 60 MiB at most): a file with more is reported with the off-CPU
/// time of the first ones.
pub const MAX_SWITCHES: u64 = 1 << 21;

/// One thread's switches.
#[derive(Clone, Debug, Default)]
pub struct OffCpu {
    /// As they came: (time, switched out).
    raw: Vec<(u64, bool)>,
    /// Whether switches came after the intervals were made.
    dirty: bool,
    /// The intervals switched out, sorted and disjoint: their starts and ends, and the
    /// off-CPU time of all the intervals before each (`cum[i]`).
    starts: Vec<u64>,
    ends: Vec<u64>,
    cum: Vec<u64>,
}

impl OffCpu {
    /// A switch of the thread: out of the CPU (`out`) or back in.
    pub fn push(&mut self, time: u64, out: bool) {
        self.raw.push((time, out));
        self.dirty = true;
    }

    /// Whether the thread has no switches.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// Makes the intervals of all the switches pushed so far. Only time known to be off the
    /// CPU counts: a switch in without a switch out before it (the thread's first run) starts
    /// nothing, a switch out without its switch in (the thread's end) ends nothing, and of
    /// two switches out in a row (the switch in between lost: a PERF_RECORD_LOST says so) the
    /// later starts the interval, since the thread ran at some unknown time between them.
    fn build(&mut self) {
        self.dirty = false;
        self.raw.sort_unstable();
        self.starts.clear();
        self.ends.clear();
        self.cum.clear();
        let mut out_since = None;
        let mut total = 0u64;
        for &(t, out) in &self.raw {
            if out {
                out_since = Some(t);
                continue;
            }
            if let Some(s) = out_since.take() {
                let start = s.max(self.ends.last().copied().unwrap_or(0));
                if t > start {
                    self.starts.push(start);
                    self.ends.push(t);
                    self.cum.push(total);
                    total += t - start;
                }
            }
        }
    }

    /// The intervals switched out, in time order.
    pub fn intervals(&mut self) -> impl Iterator<Item = (u64, u64)> + '_ {
        if self.dirty {
            self.build();
        }
        self.starts.iter().copied().zip(self.ends.iter().copied())
    }

    /// The time in `[from, to]` the thread spent switched out.
    pub fn between(&mut self, from: u64, to: u64) -> u64 {
        if self.dirty {
            self.build();
        }
        self.before(to).saturating_sub(self.before(from))
    }

    /// The time before `t` spent switched out.
    fn before(&self, t: u64) -> u64 {
        let k = self.starts.partition_point(|&s| s < t);
        if k == 0 {
            return 0;
        }
        let i = k - 1;
        self.cum[i] + t.min(self.ends[i]) - self.starts[i]
    }
}

/// Every thread's switches, for the exports, which draw the intervals off the CPU once the
/// pass is over: [`MAX_SWITCHES`] at most, all threads together.
#[derive(Debug, Default)]
pub struct ThreadSwitches {
    /// tid -> (pid, switches).
    threads: std::collections::BTreeMap<u32, (u32, OffCpu)>,
    kept: u64,
}

impl ThreadSwitches {
    /// A switch of thread `tid` of process `pid`.
    pub fn push(&mut self, pid: u32, tid: u32, time: u64, out: bool) {
        if self.kept < MAX_SWITCHES {
            self.kept += 1;
            self.threads
                .entry(tid)
                .or_insert_with(|| (pid, OffCpu::default()))
                .1
                .push(time, out);
        }
    }

    /// [`Self::push`] for a [`ViewEvent::Switch`]; other events are not switches.
    pub fn push_event(&mut self, ev: &ViewEvent<'_>) {
        if let ViewEvent::Switch {
            pid,
            tid,
            time,
            out,
            ..
        } = *ev
        {
            self.push(pid, tid, time, out);
        }
    }

    /// Each thread's intervals off the CPU as (pid, tid, start, end), by thread, each
    /// thread's in time order; the switches are let go.
    pub fn take_intervals(&mut self) -> Vec<(u32, u32, u64, u64)> {
        let mut v = Vec::new();
        for (tid, (pid, off)) in std::mem::take(&mut self.threads) {
            let mut off = off;
            v.extend(off.intervals().map(|(s, e)| (pid, tid, s, e)));
        }
        self.kept = 0;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn off(switches: &[(u64, bool)]) -> OffCpu {
        let mut o = OffCpu::default();
        for &(t, out) in switches {
            o.push(t, out);
        }
        o
    }

    #[test]
    fn a_calls_share_is_the_overlap_with_the_intervals_switched_out() {
        // Out 10..20 and 30..45, given out of order (two CPUs' rings).
        let mut o = off(&[(30, true), (45, false), (10, true), (20, false)]);
        assert_eq!(o.between(0, 100), 25);
        assert_eq!(o.between(15, 35), 5 + 5);
        assert_eq!(o.between(21, 29), 0);
        assert_eq!(o.between(12, 18), 6);
        assert_eq!(o.between(40, 40), 0);
        assert_eq!(o.between(46, 1000), 0);
    }

    #[test]
    fn unpaired_switches_end_or_start_nothing() {
        // A first run (in with no out), a lost switch in (two outs: the later starts the
        // interval), an out at the end.
        let mut o = off(&[(5, false), (10, true), (12, true), (20, false), (50, true)]);
        assert_eq!(o.between(0, 100), 8);
        assert_eq!(o.intervals().collect::<Vec<_>>(), [(12, 20)]);
    }

    #[test]
    fn the_exports_get_each_threads_intervals_in_time_order() {
        let mut s = ThreadSwitches::default();
        for (tid, t, out) in [(7, 50, true), (3, 10, true), (7, 60, false), (3, 20, false)] {
            s.push(1, tid, t, out);
        }
        s.push(1, 7, 30, false);
        s.push(1, 7, 25, true);
        assert_eq!(
            s.take_intervals(),
            vec![(1, 3, 10, 20), (1, 7, 25, 30), (1, 7, 50, 60)]
        );
        assert!(s.take_intervals().is_empty());
    }

    #[test]
    fn switches_pushed_after_a_first_question_are_counted_too() {
        let mut o = off(&[(10, true), (20, false)]);
        assert_eq!(o.between(0, 100), 10);
        o.push(5, true);
        o.push(8, false);
        assert_eq!(o.between(0, 100), 13);
        assert_eq!(o.between(9, 100), 10);
    }

    #[test]
    fn a_thread_without_switches_was_never_off() {
        let mut o = OffCpu::default();
        assert!(o.is_empty());
        assert_eq!(o.between(0, u64::MAX), 0);
    }
}
