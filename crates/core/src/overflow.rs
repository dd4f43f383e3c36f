//! Counting and overflow: `perf_swevent_event`, `perf_swevent_set_period`,
//! `__perf_event_overflow` with its `aux_action` hooks, `perf_adjust_period`
//! for `sample_freq`, `perf_event_period`, and the pending disable.
//!
//! This is the overflow path: it runs on the observed thread, at a probe or
//! in a signal handler (our NMI). No lock, no allocation.
//!
//! Differences from the kernel, on purpose: the swevent shortcut that
//! samples every event when PERF_SAMPLE_PERIOD is set is not copied (our
//! counting PMUs behave like hardware counters: one sample per period), and
//! there is no interrupt throttling (no MAX_INTERRUPTS per tick).

use std::sync::atomic::{AtomicU64, Ordering};

use perfaux_abi::attr::{AttrFlags, AuxAction};
use perfaux_ring::protocol::{Local, Rmw, Smp};

use crate::error::{Result, einval};
use crate::event::{Event, perf_event_disable_inatomic};
use crate::output::perf_output;
use crate::pmu::ef;
use crate::sample::{SampleData, perf_output_sample, perf_prepare_sample};

/// `TICK_NSEC` for HZ=250: the window in which a frequency event's period
/// is adjusted per interrupt.
const TICK_NSEC: u64 = 4_000_000;

/// Sets up the period at open: `hwc->sample_period` is `attr.sample_period`,
/// or 1 for a frequency event, which `perf_adjust_period` then tunes.
pub(crate) fn init_period(event: &Event) {
    let hw = &event.hw;
    let period = if event.flag(AttrFlags::FREQ) {
        u64::from(event.attr.sample_freq() != 0)
    } else {
        event.attr.sample_period
    };
    hw.sample_period.store(period, Ordering::Relaxed);
    hw.last_period.store(period, Ordering::Relaxed);
    hw.period_left.store(0, Ordering::Relaxed);
    if period != 0 {
        perf_swevent_set_period(event);
    }
    hw.freq_time_stamp
        .store(event.clock.now(), Ordering::Relaxed);
    if event.flag(AttrFlags::FREQ) {
        hw.sample_freq
            .store(event.attr.sample_freq(), Ordering::Relaxed);
    }
}

/// `perf_swevent_set_period`: re-arms `period_left` (kept negative until
/// the next overflow) and returns how many periods elapsed.
fn perf_swevent_set_period(event: &Event) -> u64 {
    let hw = &event.hw;
    let period = hw.last_period.load(Ordering::Relaxed).max(1);
    hw.last_period
        .store(hw.sample_period.load(Ordering::Relaxed), Ordering::Relaxed);
    let mut old = hw.period_left.load(Ordering::Relaxed);
    loop {
        if old < 0 {
            return 0;
        }
        let nr = (period + old as u64) / period;
        let val = old - (nr * period) as i64;
        match hw
            .period_left
            .compare_exchange_weak(old, val, Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => return nr,
            Err(v) => old = v,
        }
    }
}

/// `local64_add_negative(nr, &hwc->period_left)` and, when that reached
/// zero, `perf_swevent_set_period`, in one compare-and-swap: the new
/// `period_left` is re-armed in the same step that adds `nr`, so a hit pays
/// one atomic read-modify-write for its period, not two. Another writer
/// (`PERF_EVENT_IOC_PERIOD` on the control thread, a nested hit in a
/// signal handler) makes the CAS fail and the step is recomputed from what
/// it stored, as the kernel's `local64_try_cmpxchg` loop does. Returns how
/// many periods elapsed.
#[inline]
fn perf_swevent_add_period(event: &Event, nr: u64) -> u64 {
    let hw = &event.hw;
    let local = event.single_writer();
    // SAFETY: AtomicI64 and AtomicU64 have the same size and alignment;
    // the pointer is valid while `hw` is, and every access to the word is
    // atomic (both views only ever do atomic operations on it).
    let left_word = unsafe { AtomicU64::from_ptr(hw.period_left.as_ptr().cast::<u64>()) };
    let mut old = hw.period_left.load(Ordering::Relaxed);
    loop {
        let left = old.wrapping_add(nr as i64);
        let (new, overflows) = if left < 0 {
            (left, 0)
        } else {
            let period = hw.last_period.load(Ordering::Relaxed).max(1);
            let n = (period + left as u64) / period;
            (left - (n * period) as i64, n)
        };
        let swapped = if local {
            Local::cas(left_word, old as u64, new as u64, Ordering::Relaxed)
        } else {
            Smp::cas(left_word, old as u64, new as u64, Ordering::AcqRel)
        };
        match swapped.map_err(|v| v as i64) {
            Ok(_) => {
                if overflows != 0 {
                    hw.last_period
                        .store(hw.sample_period.load(Ordering::Relaxed), Ordering::Relaxed);
                }
                return overflows;
            }
            Err(v) => old = v,
        }
    }
}

/// `perf_swevent_event`: counts `nr` occurrences and takes a sample for
/// every period that elapsed. `data` carries what the PMU knows (ip, raw,
/// callchain). The caller has checked that the event is ACTIVE here, and
/// calls it on the thread the event observes (its hook or signal runs
/// there), as the kernel calls it on the CPU the event is active on.
///
/// For an event that observes one thread, `event->count` and
/// `hwc->period_left` are then written by that thread, its signal
/// handlers, and the control path, which does its writes on the thread
/// too (`PERF_EVENT_IOC_RESET`, `PERF_EVENT_IOC_PERIOD`: see
/// `Event::on_owner_thread`), so the updates here are the kernel's
/// `local64_*` operations ([`Local`]: one instruction, no bus lock), not
/// SMP atomics. A per-CPU event, which any thread may hit, uses [`Smp`].
#[inline]
pub fn perf_swevent_event(event: &Event, nr: u64, data: &mut SampleData<'_>) {
    let hw = &event.hw;
    if event.single_writer() {
        Local::fetch_sub(&hw.count, nr.wrapping_neg(), Ordering::Relaxed);
    } else {
        hw.count.fetch_add(nr, Ordering::Relaxed);
    }
    if !event.is_sampling() {
        return;
    }
    let overflows = perf_swevent_add_period(event, nr);
    for _ in 0..overflows {
        data.period = hw.last_period.load(Ordering::Relaxed);
        if perf_event_overflow(event, data) {
            break;
        }
    }
}

/// `__perf_event_account_interrupt`'s frequency part: adjust the period
/// toward `sample_freq` from the time since the last interrupt.
fn perf_account_interrupt(event: &Event) {
    let hw = &event.hw;
    if !event.flag(AttrFlags::FREQ) {
        return;
    }
    let now = event.clock.now();
    let then = hw.freq_time_stamp.swap(now, Ordering::Relaxed);
    let delta = now.saturating_sub(then);
    if delta > 0 && delta < 2 * TICK_NSEC {
        perf_adjust_period(event, delta, hw.last_period.load(Ordering::Relaxed));
    }
}

/// `perf_calculate_period`: the period that gives `sample_freq` samples per
/// second when `count` events took `nsec`.
fn perf_calculate_period(freq: u64, nsec: u64, count: u64) -> u64 {
    let div = u128::from(nsec) * u128::from(freq);
    if div == 0 {
        return 1;
    }
    let p = u128::from(count) * 1_000_000_000 / div;
    p.clamp(1, u128::from(u64::MAX >> 1)) as u64
}

/// `perf_adjust_period`: move `sample_period` an eighth of the way to the
/// computed period (the kernel's low-pass filter), and cut a `period_left`
/// that is far longer than the new period.
fn perf_adjust_period(event: &Event, nsec: u64, count: u64) {
    let hw = &event.hw;
    let period = perf_calculate_period(hw.sample_freq.load(Ordering::Relaxed), nsec, count);
    let cur = hw.sample_period.load(Ordering::Relaxed);
    let mut delta = period as i64 - cur as i64;
    delta += if delta >= 0 { 7 } else { -7 };
    delta /= 8;
    let mut sp = (cur as i64 + delta).max(0) as u64;
    if sp == 0 {
        sp = 1;
    }
    hw.sample_period.store(sp, Ordering::Relaxed);
    if -hw.period_left.load(Ordering::Relaxed) > 8 * sp as i64 {
        hw.period_left.store(-(sp as i64), Ordering::Relaxed);
    }
}

/// The current sample period (`hwc->sample_period`), for the tests.
#[cfg(test)]
pub(crate) fn sample_period(event: &Event) -> u64 {
    event.hw.sample_period.load(Ordering::Relaxed)
}

/// `__perf_event_overflow`: account the interrupt, pause the AUX event
/// (aux_pause), apply the REFRESH limit, write the sample, resume the AUX
/// event (aux_resume) last. Returns true when the event must stop
/// overflowing (its limit was reached).
pub fn perf_event_overflow(event: &Event, data: &mut SampleData<'_>) -> bool {
    if !event.is_sampling() {
        return false;
    }
    let events = event.hw.event_limit.load(Ordering::Acquire);
    perf_account_interrupt(event);

    if event.aux_action(AuxAction::PAUSE) {
        event.aux_event.read(|a| {
            if let Some(a) = a {
                crate::aux::perf_event_aux_pause(a, true);
            }
        });
    }

    let mut ret = false;
    if events != 0 && event.hw.event_limit.fetch_sub(1, Ordering::AcqRel) == 1 {
        ret = true;
        perf_event_disable_inatomic(event);
    }

    perf_event_output(event, data);

    if event.aux_action(AuxAction::RESUME) {
        event.aux_event.read(|a| {
            if let Some(a) = a {
                crate::aux::perf_event_aux_pause(a, false);
            }
        });
    }
    ret
}

/// `perf_event_output_forward`: prepare, reserve, write one sample.
pub(crate) fn perf_event_output(event: &Event, data: &mut SampleData<'_>) {
    let size = perf_prepare_sample(event, data);
    let id = data.sample_id(event);
    let watermark = event.flag(AttrFlags::WATERMARK);
    let written = perf_output(event, size, &id, |h| {
        perf_output_sample(event, data, size, h);
        if !watermark {
            h.inner().count_wakeup_event(event.attr.wakeup_events);
        }
    });
    if written {
        event.counter_inc(&event.counters.samples);
    }
}

/// `perf_event_period` (`PERF_EVENT_IOC_PERIOD`): a new period or
/// frequency for a sampling event.
pub(crate) fn perf_event_period(event: &Event, value: u64) -> Result<()> {
    if !event.is_sampling() {
        return Err(einval("PERF_EVENT_IOC_PERIOD: not a sampling event"));
    }
    if value == 0 {
        return Err(einval("PERF_EVENT_IOC_PERIOD: zero period"));
    }
    if event.flag(AttrFlags::FREQ) {
        if value > crate::sample_rate::max_sample_rate() {
            return Err(einval(
                "PERF_EVENT_IOC_PERIOD: frequency above kernel.perf_event_max_sample_rate",
            ));
        }
        // The kernel stores the new rate in attr.sample_freq; the period
        // then adapts to it at the next interrupts.
        event.hw.sample_freq.store(value, Ordering::Relaxed);
    } else {
        if value & (1 << 63) != 0 {
            return Err(einval("PERF_EVENT_IOC_PERIOD: period has bit 63 set"));
        }
        let added = event.hw.added.load(Ordering::Acquire);
        if added {
            event.pmu.stop(event, ef::UPDATE);
        }
        event.on_owner_thread(&mut || {
            event.hw.sample_period.store(value, Ordering::Relaxed);
            event.hw.last_period.store(value, Ordering::Relaxed);
            event
                .hw
                .period_left
                .store(-(value as i64), Ordering::Relaxed);
        });
        if added {
            event.pmu.start(event, ef::RELOAD);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calculated_period_gives_the_asked_rate() {
        // 1000 events in 1 ms is 1e6/s; for 1000 samples/s the period is 1000.
        assert_eq!(perf_calculate_period(1000, 1_000_000, 1000), 1000);
        // No time elapsed: the smallest period.
        assert_eq!(perf_calculate_period(1000, 0, 5), 1);
        // Slower than asked: period 1 at least.
        assert_eq!(perf_calculate_period(1000, 1_000_000_000, 1), 1);
    }

    /// A counting PMU that accepts every event of its type: the core's own
    /// tests hold no driver.
    struct CountingPmu;

    impl crate::pmu::Pmu for CountingPmu {
        fn name(&self) -> &'static str {
            "overflow_test"
        }
        fn capabilities(&self) -> crate::pmu::PmuCaps {
            crate::pmu::PmuCaps::NO_NMI
        }
        fn event_init(&self, event: &Event) -> Result<crate::pmu::PmuPrivate> {
            if event.attr().type_ != event.pmu_type() {
                return Err(crate::error::enoent("not an overflow_test event"));
            }
            Ok(Box::new(()))
        }
        fn start(&self, _event: &Event, _flags: u32) {}
        fn stop(&self, _event: &Event, _flags: u32) {}
    }

    #[test]
    fn frequency_event_converges_to_its_period() {
        use crate::open::perf_event_open_attr;
        use perfaux_abi::attr::PerfEventAttr;
        let type_ = crate::registry::perf_pmu_register(std::sync::Arc::new(CountingPmu));
        let mut a = PerfEventAttr {
            type_,
            size: perfaux_abi::consts::PERF_ATTR_SIZE_VER8,
            config: 900,
            ..Default::default()
        };
        a.flags |= AttrFlags::FREQ;
        a.set_sample_freq(1000);
        let ev = perf_event_open_attr(&a, crate::Target::current(), -1, -1, 0).unwrap();
        assert_eq!(
            sample_period(ev.event()),
            1,
            "a frequency event starts at period 1"
        );
        // The low-pass filter moves an eighth of the way per interrupt.
        let e = ev.event();
        e.hw.sample_period.store(100, Ordering::Relaxed);
        perf_adjust_period(e, 1_000_000, 1000);
        // delta 900, +7 rounding, /8: 113.
        assert_eq!(sample_period(e), 213);
        e.hw.sample_period.store(5000, Ordering::Relaxed);
        perf_adjust_period(e, 1_000_000, 1000);
        // delta -4000, -7 rounding, /8: -500.
        assert_eq!(sample_period(e), 4500);
        // PERF_EVENT_IOC_PERIOD on a frequency event changes the rate.
        ev.period(2000).unwrap();
        e.hw.sample_period.store(100, Ordering::Relaxed);
        perf_adjust_period(e, 1_000_000, 1000);
        // rate 2000: target period 500, delta 400: +50.
        assert_eq!(sample_period(e), 150);
        assert_eq!(
            ev.period(100_001).unwrap_err().errno,
            perfaux_abi::errno::EINVAL
        );
    }
}
