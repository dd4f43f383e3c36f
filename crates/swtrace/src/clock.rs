//! The trace clock: cheap ticks on the hot path, CLOCK_MONOTONIC nanoseconds for the reader.
//!
//! On x86_64 the writer stamps packets with the TSC (`rdtsc`, a few ns and no system call);
//! elsewhere, or when asked, with CLOCK_MONOTONIC read through the vDSO (`clock_gettime`).
//! BENCHMARKS.md has both measured.
//!
//! # How trace times map to CLOCK_MONOTONIC (perf's default clock)
//!
//! perf stamps samples and uevents with CLOCK_MONOTONIC (`use_clockid`), and a trace packet's
//! time must be comparable with theirs. Every SYNC packet carries a [`TimeConv`]: an anchor
//! `(anchor_ticks, anchor_ns)`, a TSC reading and a CLOCK_MONOTONIC reading taken at one
//! moment, and the TSC rate as `mult`/`shift`. A packet's ticks `t` convert to
//!
//! ```text
//! ns = anchor_ns + ((t - anchor_ticks) * mult) >> shift
//! ```
//!
//! with the anchor of the last SYNC before it. With [`ClockSource::Monotonic`] the ticks are
//! CLOCK_MONOTONIC ns already (`mult` 1, `shift` 0). The error of a converted time is the
//! anchor's error plus the rate's error times the distance to the anchor; both are bounded:
//!
//! - **Anchors are tight pairs.** A pair is read as TSC, `clock_gettime`, TSC; its time is
//!   the TSC midpoint, and its error at most half the bracket (the two TSC reads' distance).
//!   A thread pre-empted between its reads (a busy machine: milliseconds) makes a wide
//!   bracket, so [`read_pair`] retries and keeps the tightest pair, accepting one at once
//!   only within [`TIGHT_TICKS`]. (The earlier code took any pair: under 4 busy loops on 2
//!   cores its anchors and its rate were off by up to milliseconds.)
//! - **The rate is measured over a long baseline between tight pairs.** The first
//!   calibration spans [`CALIBRATION_NS`] (10 ms asleep, once per process, never on the hot
//!   path);
//!   each later anchor that lies at least twice as far from the first pair as the current
//!   baseline re-measures the rate over the whole distance, so the rate's error shrinks as
//!   the process runs (two 100 ns brackets over 10 ms: 1e-5; over 1 s: 1e-7).
//! - **Anchors are renewed** every 2^24 ticks (about 5 ms at 3 GHz) by the next SYNC, which
//!   bounds the drift the rate's error can add: 1e-5 over 5 ms is 50 ns.
//!
//! - **The reader does not step at a re-anchoring.** Two anchors disagree by their errors
//!   (hundreds of ns under load), so switching conversions at the SYNC would stretch or shrink
//!   the calls open across it, and end a short one before it began (`perfaux report` showed
//!   "Min total 0 ns" for a recursive `fib`, tests/anchor_steps.rs). The decoder keeps the
//!   previous mapping's time at a SYNC that continues the stream and slews to the new anchor
//!   at 0.1% (`stream_clock`).
//!
//! `tests/clock_load.rs` checks the mapping under load: with 4 threads spinning on the 2
//! cores, converted TSC times agree with `clock_gettime(CLOCK_MONOTONIC)` read at the same
//! moment within a few microseconds, in every repetition.
//!
//! The kernel does not expose its TSC rate to user space without a perf mmap page, which this
//! crate does not assume it can open; hence the calibration.

use std::sync::OnceLock;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

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
    /// The source this build actually uses (TSC only exists on x86_64).
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

/// A pair is accepted at once when its two TSC reads are at most this many ticks apart
/// (at most 2 µs of TSC at 1 GHz; an unloaded pair is about 100 ticks).
pub const TIGHT_TICKS: u64 = 2048;
/// Tries [`read_pair`] makes before it settles for the tightest pair it saw.
const PAIR_TRIES: u32 = 256;
/// The first calibration's baseline.
pub const CALIBRATION_NS: u64 = 10_000_000;

/// A TSC reading and a CLOCK_MONOTONIC reading taken at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockPair {
    /// The TSC midpoint of the bracket.
    pub ticks: u64,
    /// CLOCK_MONOTONIC ns read inside the bracket.
    pub ns: u64,
    /// Ticks between the two TSC reads around `ns`: twice the pair's worst error.
    pub bracket: u64,
}

/// One pair, TSC read on both sides of `clock_gettime`.
#[inline]
pub fn read_pair_once() -> ClockPair {
    let t0 = tsc();
    let ns = monotonic_ns();
    let t1 = tsc();
    let bracket = t1.wrapping_sub(t0);
    ClockPair {
        ticks: t0.wrapping_add(bracket / 2),
        ns,
        bracket,
    }
}

/// A tight pair: the first within [`TIGHT_TICKS`], else the tightest of 256
/// (a thread pre-empted between the reads, on a busy machine, gets a wide bracket and
/// tries again). Async-signal-safe.
pub fn read_pair() -> ClockPair {
    let mut best = read_pair_once();
    let mut tries = 1;
    while best.bracket > TIGHT_TICKS && tries < PAIR_TRIES {
        let p = read_pair_once();
        if p.bracket < best.bracket {
            best = p;
        }
        tries += 1;
    }
    best
}

/// The calibration's state: the first pair and the rate over the longest baseline measured
/// so far. Atomics only: anchors are taken in signal handlers too.
struct Calibration {
    base_ticks: AtomicU64,
    base_ns: AtomicU64,
    /// Ticks of the baseline the current rate was measured over (0: not calibrated).
    span: AtomicU64,
    /// `mult | shift << 32`.
    rate: AtomicU64,
}

static CAL: Calibration = Calibration {
    base_ticks: AtomicU64::new(0),
    base_ns: AtomicU64::new(0),
    span: AtomicU64::new(0),
    rate: AtomicU64::new(0),
};

static FIRST: OnceLock<()> = OnceLock::new();

fn pack(r: TscRate) -> u64 {
    u64::from(r.mult) | u64::from(r.shift) << 32
}

fn unpack(v: u64) -> TscRate {
    TscRate {
        mult: v as u32,
        shift: (v >> 32) as u8,
    }
}

/// The TSC rate: calibrated on the first call ([`CALIBRATION_NS`]), refined by later anchors.
pub fn tsc_rate() -> TscRate {
    FIRST.get_or_init(|| {
        let (base, end) = calibrate_pairs(CALIBRATION_NS);
        CAL.base_ticks.store(base.ticks, Relaxed);
        CAL.base_ns.store(base.ns, Relaxed);
        CAL.rate.store(pack(rate_between(base, end)), Relaxed);
        CAL.span
            .store(end.ticks.saturating_sub(base.ticks).max(1), Release);
    });
    unpack(CAL.rate.load(Relaxed))
}

/// A process's TSC calibration, to hand to another process of the same machine (the TSC is
/// one clock for all of them): the first pair and the rate measured from it over `span`
/// ticks. `perfaux record` measures it while it prepares the recording and the runtime in the
/// traced program adopts it ([`adopt_tsc_calibration`]), so that no traced process (nor each
/// image it execs) waits [`CALIBRATION_NS`] of its own before its first traced call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TscCalibration {
    /// The first pair's TSC ticks.
    pub base_ticks: u64,
    /// The first pair's CLOCK_MONOTONIC ns.
    pub base_ns: u64,
    /// Ticks from the first pair over which `rate` was measured (not 0).
    pub span: u64,
    /// The rate.
    pub rate: TscRate,
}

/// This process's calibration (calibrated first if it was not yet: [`CALIBRATION_NS`]).
pub fn tsc_calibration() -> TscCalibration {
    let rate = tsc_rate();
    TscCalibration {
        base_ticks: CAL.base_ticks.load(Relaxed),
        base_ns: CAL.base_ns.load(Relaxed),
        span: CAL.span.load(Acquire),
        rate,
    }
}

/// Takes `c`, measured by another process on the same machine (the recorder), as this
/// process's calibration, unless it has one already; later anchors refine it as they refine
/// their own. `c` is
/// checked first: a rate of 0, a span of 0, a first pair in this process's future or a rate
/// more than a factor 2 from what this process's own clocks say since that pair (when it is
/// over 1 ms old) is refused (false), and the process calibrates itself at its first use.
pub fn adopt_tsc_calibration(c: TscCalibration) -> bool {
    if c.rate.mult == 0 || c.rate.shift > 32 || c.span == 0 {
        return false;
    }
    let now = read_pair();
    if c.base_ticks > now.ticks || c.base_ns > now.ns {
        return false;
    }
    // One cheap check that the rate is this machine's TSC's: the ns it gives for the ticks
    // since the first pair, against CLOCK_MONOTONIC's (within a factor 2; the adopted rate is
    // far better, measured over `span`).
    let dticks = now.ticks - c.base_ticks;
    let dns = now.ns - c.base_ns;
    let converted = (u128::from(dticks) * u128::from(c.rate.mult)) >> c.rate.shift;
    let dns = u128::from(dns);
    if dns > 1_000_000 && (converted > dns * 2 || converted < dns / 2) {
        return false;
    }
    let mut adopted = false;
    FIRST.get_or_init(|| {
        CAL.base_ticks.store(c.base_ticks, Relaxed);
        CAL.base_ns.store(c.base_ns, Relaxed);
        CAL.rate.store(pack(c.rate), Relaxed);
        CAL.span.store(c.span, Release);
        adopted = true;
    });
    adopted
}

/// A fresh calibration over `baseline_ns` of CLOCK_MONOTONIC, between tight pairs at both
/// ends (what [`tsc_rate`] does once; it waits for the whole baseline, asleep).
pub fn calibrate(baseline_ns: u64) -> TscRate {
    let (a, b) = calibrate_pairs(baseline_ns);
    rate_between(a, b)
}

/// Two tight pairs at least `baseline_ns` apart, asleep in between (nanosleep: signal-safe). The
/// TSC is invariant (this module's premise: anchors 5 ms apart assume it), so the rate between
/// the pairs does not depend on what the CPU did meanwhile; a spin took a core for the whole
/// baseline, which `perfaux record` measures beside starting the program, on machines of two.
fn calibrate_pairs(baseline_ns: u64) -> (ClockPair, ClockPair) {
    let start = read_pair();
    loop {
        let elapsed = monotonic_ns().saturating_sub(start.ns);
        if elapsed >= baseline_ns {
            break;
        }
        std::thread::sleep(std::time::Duration::from_nanos(baseline_ns - elapsed));
    }
    (start, read_pair())
}

fn rate_between(a: ClockPair, b: ClockPair) -> TscRate {
    rate_from(b.ticks.saturating_sub(a.ticks), b.ns.saturating_sub(a.ns))
}

/// Re-measures the rate from the first pair to `p` when `p` is tight and at least twice as
/// far from it as the current baseline.
fn refine(p: ClockPair) {
    if p.bracket > TIGHT_TICKS {
        return;
    }
    let span = CAL.span.load(Acquire);
    let base_ticks = CAL.base_ticks.load(Relaxed);
    let dist = p.ticks.saturating_sub(base_ticks);
    if span == 0 || dist < span.saturating_mul(2) {
        return;
    }
    // One refiner per doubling; a loser keeps the rate another thread is storing.
    if CAL
        .span
        .compare_exchange(span, dist, AcqRel, Relaxed)
        .is_ok()
    {
        let base = ClockPair {
            ticks: base_ticks,
            ns: CAL.base_ns.load(Relaxed),
            bracket: 0,
        };
        CAL.rate.store(pack(rate_between(base, p)), Relaxed);
    }
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

/// A fresh conversion anchor for `source`: a tight pair ([`read_pair`]) and the current rate.
pub fn anchor(source: ClockSource) -> TimeConv {
    match source {
        ClockSource::Monotonic => TimeConv::IDENTITY,
        ClockSource::Tsc => {
            tsc_rate();
            let p = read_pair();
            refine(p);
            let rate = unpack(CAL.rate.load(Relaxed));
            TimeConv {
                anchor_ticks: p.ticks,
                anchor_ns: p.ns,
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
