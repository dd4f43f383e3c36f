//! The trace clock: cheap ticks on the hot path, CLOCK_MONOTONIC nanoseconds for the reader.
//!
//! On x86_64 the writer stamps packets with the TSC (`rdtsc`, a few ns and no system call);
//! elsewhere, or when asked, with CLOCK_MONOTONIC read through the vDSO (`clock_gettime`).
//! BENCHMARKS.md has both measured. SYNC packets carry a [`TimeConv`] anchor (ticks and
//! CLOCK_MONOTONIC ns read together, plus mult/shift) so that any window converts to the
//! nanoseconds perf.data uses with `use_clockid` = CLOCK_MONOTONIC.
//!
//! The TSC rate is calibrated once per process against CLOCK_MONOTONIC (a 5 ms measurement, on
//! the first writer install: never on the hot path). The kernel does not expose its TSC rate to
//! user space without a perf mmap page, which this crate does not assume it can open.

use std::sync::OnceLock;

use crate::format::TimeConv;

/// Which clock a writer stamps packets with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ClockSource {
    /// The x86_64 time stamp counter; falls back to [`ClockSource::Monotonic`] elsewhere.
    #[default]
    Tsc,
    /// CLOCK_MONOTONIC nanoseconds (vDSO `clock_gettime`).
    Monotonic,
}

impl ClockSource {
    /// The source actually used on this machine (TSC only exists on x86_64).
    pub fn effective(self) -> ClockSource {
        if cfg!(target_arch = "x86_64") {
            self
        } else {
            ClockSource::Monotonic
        }
    }

    /// Current ticks of this source.
    #[inline(always)]
    pub fn ticks(self) -> u64 {
        match self {
            ClockSource::Tsc => tsc(),
            ClockSource::Monotonic => monotonic_ns(),
        }
    }
}

/// The TSC (CLOCK_MONOTONIC ns where there is none).
#[inline(always)]
pub fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions; it only reads the time stamp counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_ns()
    }
}

/// CLOCK_MONOTONIC in nanoseconds. Out of line: the call it makes would otherwise make every
/// caller save registers on its TSC path too.
#[inline(never)]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// mult/shift with `ns ≈ ticks * mult >> shift` for the TSC, measured once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TscRate {
    /// Multiplier.
    pub mult: u32,
    /// Shift.
    pub shift: u8,
}

static TSC_RATE: OnceLock<TscRate> = OnceLock::new();

/// The TSC rate, calibrated on first call (5 ms).
pub fn tsc_rate() -> TscRate {
    *TSC_RATE.get_or_init(calibrate_tsc)
}

fn read_pair() -> (u64, u64) {
    // Bracket the clock_gettime by two TSC reads and take the midpoint, so that the pair is as
    // close to simultaneous as user space can make it.
    let t0 = tsc();
    let ns = monotonic_ns();
    let t1 = tsc();
    (t0 + (t1.wrapping_sub(t0) / 2), ns)
}

fn calibrate_tsc() -> TscRate {
    let (t0, n0) = read_pair();
    let mut pair = read_pair();
    while pair.1.saturating_sub(n0) < 5_000_000 {
        std::hint::spin_loop();
        pair = read_pair();
    }
    let (t1, n1) = pair;
    rate_from(t1.saturating_sub(t0), n1.saturating_sub(n0))
}

/// mult/shift for `dns` nanoseconds elapsed over `dticks` ticks, with the largest shift (at most
/// 32) that keeps `mult` in a u32.
pub fn rate_from(dticks: u64, dns: u64) -> TscRate {
    if dticks == 0 || dns == 0 {
        return TscRate { mult: 1, shift: 0 };
    }
    let mut shift = 32u8;
    loop {
        let mult = (u128::from(dns) << shift) / u128::from(dticks);
        if mult <= u128::from(u32::MAX) || shift == 0 {
            return TscRate {
                mult: mult.min(u128::from(u32::MAX)) as u32,
                shift,
            };
        }
        shift -= 1;
    }
}

/// A fresh conversion anchor for `source`: ticks and CLOCK_MONOTONIC ns read together.
pub fn anchor(source: ClockSource) -> TimeConv {
    match source {
        ClockSource::Monotonic => TimeConv::IDENTITY,
        ClockSource::Tsc => {
            let rate = tsc_rate();
            let (ticks, ns) = read_pair();
            TimeConv {
                anchor_ticks: ticks,
                anchor_ns: ns,
                mult: rate.mult,
                shift: rate.shift,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_keeps_precision_and_fits() {
        // A 3 GHz counter: 1/3 ns per tick.
        let r = rate_from(3_000_000_000, 1_000_000_000);
        assert_eq!(r.shift, 32);
        let conv = TimeConv {
            anchor_ticks: 0,
            anchor_ns: 0,
            mult: r.mult,
            shift: r.shift,
        };
        assert_eq!(conv.to_ns(3_000_000_000), 999_999_999);
        // A 100 MHz counter: 10 ns per tick needs a smaller shift.
        let r = rate_from(100, 1000);
        assert!(r.shift < 32);
        let conv = TimeConv {
            anchor_ticks: 5,
            anchor_ns: 100,
            mult: r.mult,
            shift: r.shift,
        };
        assert_eq!(conv.to_ns(15), 200);
        assert_eq!(conv.to_ns(0), 50);
    }

    #[test]
    fn tsc_anchor_tracks_monotonic() {
        let conv = anchor(ClockSource::Tsc.effective());
        let now_ns = monotonic_ns();
        let from_ticks = conv.to_ns(ClockSource::Tsc.effective().ticks());
        // Both read "now" within a few ms of each other (generous: shared, noisy machine).
        assert!(
            from_ticks.abs_diff(now_ns) < 50_000_000,
            "{from_ticks} vs {now_ns}"
        );
    }
}
