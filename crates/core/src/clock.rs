//! The event clock: `perf_event_clock()` and `perf_event_set_clock()`.
//!
//! Without `use_clockid` the kernel's clock is `local_clock` (the
//! scheduler clock), which is not any POSIX clock: it reads here as
//! CLOCK_MONOTONIC ns, but compares unequal to a `use_clockid`
//! CLOCK_MONOTONIC clock, so that a group or an output redirection mixing
//! the two is refused as the kernel refuses it (`event->clock` differs).
//! With `use_clockid` the records carry the named clock. `clock_gettime` is async-signal-safe, so every clock
//! works from the overflow path; the kernel's NMI rule (a clock that is not
//! NMI-safe needs a PMU with `PERF_PMU_CAP_NO_NMI`) is kept all the same, so
//! that the same attr gets the same answer as from Linux.

use perfaux_abi::errno;

use crate::error::{Error, Result};

/// An event's clock (`event->clock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    clockid: libc::clockid_t,
    /// `use_clockid` was set: the clock is `clockid`'s, not `local_clock`.
    use_clockid: bool,
}

/// `local_clock`, the clock of an event without `use_clockid`.
impl Default for Clock {
    fn default() -> Self {
        Self {
            clockid: libc::CLOCK_MONOTONIC,
            use_clockid: false,
        }
    }
}

impl Clock {
    /// `perf_event_set_clock(event, clk_id)`: MONOTONIC and MONOTONIC_RAW
    /// are NMI-safe; REALTIME, BOOTTIME and TAI need a PMU with NO_NMI;
    /// anything else is EINVAL. `pmu_no_nmi` is whether the event's PMU
    /// has `PERF_PMU_CAP_NO_NMI`.
    pub fn for_clockid(clockid: i32, pmu_no_nmi: bool) -> Result<Self> {
        let nmi_safe = match clockid {
            libc::CLOCK_MONOTONIC | libc::CLOCK_MONOTONIC_RAW => true,
            libc::CLOCK_REALTIME | libc::CLOCK_BOOTTIME | libc::CLOCK_TAI => false,
            _ => {
                return Err(Error::new(
                    errno::EINVAL,
                    "perf_event_set_clock: unknown attr.clockid",
                ));
            }
        };
        if !nmi_safe && !pmu_no_nmi {
            return Err(Error::new(
                errno::EINVAL,
                "perf_event_set_clock: clock is not NMI-safe and the PMU lacks PERF_PMU_CAP_NO_NMI",
            ));
        }
        Ok(Self {
            clockid,
            use_clockid: true,
        })
    }

    /// Now, in ns. Async-signal-safe.
    #[inline]
    pub fn now(self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid out-pointer; clock_gettime only writes it.
        unsafe { libc::clock_gettime(self.clockid, &mut ts) };
        (ts.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ts.tv_nsec as u64)
    }
}
