//! Time off the CPU: a thread's context switches (the kernel's PERF_RECORD_SWITCH, which
//! `perfaux record` writes for a traced program and `perf record --switch-events` for any) as
//! the intervals it was switched out, and how much of a call's time fell in them.
//!
//! The record stream comes before the trace in the pass ([`crate::walk`]), so a thread's
//! switches are all in before its first call: they are sorted and made into intervals then,
//! and each call's share is two binary searches in the intervals' running sums.

/// The most switches kept, all threads together (16 bytes each as they come, 24 per
/// interval after): a file with more is reported with the off-CPU time of the first ones.
pub const MAX_SWITCHES: u64 = 1 << 22;

/// One thread's switches.
#[derive(Clone, Debug, Default)]
pub struct OffCpu {
    /// As they came: (time, switched out).
    raw: Vec<(u64, bool)>,
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
    }

    /// Whether the thread has no switches.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty() && self.starts.is_empty()
    }

    /// Makes the intervals of the switches pushed so far (once they are all in). A switch
    /// in without a switch out before it (the thread's first run) starts nothing; a switch
    /// out without its switch in (the thread's end, or a lost record) ends nothing: only the
    /// intervals whose both ends are known count.
    fn build(&mut self) {
        let mut raw = std::mem::take(&mut self.raw);
        raw.sort_unstable();
        let mut out_since = None;
        let mut total = 0u64;
        for (t, out) in raw {
            match (out, out_since) {
                (true, None) => out_since = Some(t),
                (false, Some(s)) => {
                    let start = s.max(self.ends.last().copied().unwrap_or(0));
                    if t > start {
                        self.starts.push(start);
                        self.ends.push(t);
                        self.cum.push(total);
                        total += t - start;
                    }
                    out_since = None;
                }
                _ => {}
            }
        }
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

    /// The time in `[from, to]` the thread spent switched out.
    pub fn between(&mut self, from: u64, to: u64) -> u64 {
        if !self.raw.is_empty() {
            self.build();
        }
        self.before(to).saturating_sub(self.before(from))
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
        // A first run (in with no out), a lost switch in (two outs), an out at the end.
        let mut o = off(&[(5, false), (10, true), (12, true), (20, false), (50, true)]);
        assert_eq!(o.between(0, 100), 10);
    }

    #[test]
    fn a_thread_without_switches_was_never_off() {
        let mut o = OffCpu::default();
        assert!(o.is_empty());
        assert_eq!(o.between(0, u64::MAX), 0);
    }
}
