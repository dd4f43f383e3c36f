//! The trace clock under CPU load: with twice as many threads spinning as
//! there are CPUs (4 on a 2-core machine), TSC times converted by a freshly calibrated
//! [`TimeConv`] agree with `clock_gettime(CLOCK_MONOTONIC)` read at the same moment within a
//! few microseconds, in every repetition. "The same moment" is a bracket: TSC, clock_gettime,
//! TSC; a bracket that was pre-empted (wider than `TIGHT_TICKS`) is not a measurement of one
//! moment, so it is detected and read again. Nothing here times how long anything took.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use perfaux_swtrace::clock::{self, CALIBRATION_NS, ClockPair, TIGHT_TICKS};
use perfaux_swtrace::{ClockSource, format::TimeConv};

/// Agreement asked for: a few microseconds (perf's samples and uevents are compared with
/// trace times at this grain).
const AGREE_NS: u64 = 5_000;
/// How far from its anchor a time is converted: the writer renews anchors every 2^24 ticks
/// (about 5 ms at 3 GHz), so 8 ms covers the farthest a SYNC's anchor is used.
const DISTANCE_NS: u64 = 8_000_000;
const REPETITIONS: usize = 12;

/// Spinning threads, stopped on drop.
struct Load {
    stop: Arc<AtomicBool>,
    spins: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start() -> Load {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let stop = Arc::new(AtomicBool::new(false));
        let spins = Arc::new(AtomicU64::new(0));
        let threads = (0..(2 * cpus).max(4))
            .map(|_| {
                let (stop, spins) = (stop.clone(), spins.clone());
                std::thread::spawn(move || {
                    while !stop.load(Relaxed) {
                        spins.fetch_add(1, Relaxed);
                    }
                })
            })
            .collect();
        Load {
            stop,
            spins,
            threads,
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A pair whose own bracket was not pre-empted: read again until it is tight. Returns the
/// pair and how many reads were thrown away.
fn tight_pair() -> (ClockPair, u32) {
    for dropped in 0..1_000_000 {
        let p = clock::read_pair_once();
        if p.bracket <= TIGHT_TICKS {
            return (p, dropped);
        }
    }
    panic!("no TSC/clock_gettime pair within {TIGHT_TICKS} ticks in a million tries");
}

fn spin_ns(ns: u64) {
    let end = clock::monotonic_ns() + ns;
    while clock::monotonic_ns() < end {
        std::hint::spin_loop();
    }
}

/// How far `conv` is from CLOCK_MONOTONIC at one (tight) moment, `DISTANCE_NS` after its
/// anchor was taken.
fn error_after_distance(conv: &TimeConv, dropped: &mut u32) -> u64 {
    spin_ns(DISTANCE_NS);
    let (p, d) = tight_pair();
    *dropped += d;
    // The moment's own uncertainty: half its bracket, at most ~TIGHT_TICKS / 2 ticks.
    conv.to_ns(p.ticks).abs_diff(p.ns)
}

#[test]
fn tsc_times_agree_with_clock_monotonic_under_load() {
    if ClockSource::Tsc.effective() != ClockSource::Tsc {
        eprintln!("skipped: no TSC on this target (the trace clock is CLOCK_MONOTONIC itself)");
        return;
    }
    let load = Load::start();
    let mut dropped = 0;
    let mut errors = Vec::new();
    for rep in 0..REPETITIONS {
        // A calibration made under the load, and an anchor from the writer's own path.
        let rate = clock::calibrate(CALIBRATION_NS);
        let a = clock::read_pair();
        let conv = TimeConv {
            anchor_ticks: a.ticks,
            anchor_ns: a.ns,
            mult: rate.mult,
            shift: rate.shift,
        };
        let fresh = error_after_distance(&conv, &mut dropped);
        // The process-wide conversion the writer stamps SYNCs with.
        let writer_conv = clock::anchor(ClockSource::Tsc);
        let writer = error_after_distance(&writer_conv, &mut dropped);
        errors.push((rep, fresh, writer));
    }
    let spins = load.spins.load(Relaxed);
    drop(load);
    eprintln!(
        "clock under load: {spins} spins by the load threads, {dropped} pre-empted brackets \
         read again; errors (rep, fresh calibration ns, writer anchor ns): {errors:?}"
    );
    for (rep, fresh, writer) in errors {
        assert!(
            fresh <= AGREE_NS && writer <= AGREE_NS,
            "repetition {rep}: converted TSC time off CLOCK_MONOTONIC by {fresh} ns (fresh \
             calibration) / {writer} ns (writer's anchor), {DISTANCE_NS} ns after the anchor"
        );
    }
}

/// The pair reader keeps the tightest pair: its bracket is within TIGHT_TICKS whenever any
/// of its tries was (the load makes some tries wide).
#[test]
fn read_pair_returns_a_tight_pair_under_load() {
    let load = Load::start();
    for _ in 0..2_000 {
        let p = clock::read_pair();
        assert!(
            p.bracket <= TIGHT_TICKS,
            "read_pair returned a bracket of {} ticks",
            p.bracket
        );
    }
    drop(load);
}
