//! perf's answers to `kernel.perf_event_max_sample_rate`, the highest rate the running kernel
//! lets an event sample at (tools/perf/builtin-record.c, `record__config_freq`): a `-F` above
//! it is throttled to it with a warning; the default rate of a clock (4000 Hz) is lowered to
//! it with a warning, only where no `-F`, `-c`, `freq=` or `period=` chose the rate; a
//! `freq=` above it is an error (the kernel's EINVAL, said before anything runs).
//!
//! The sysctl matters here because perfaux's core refuses what the kernel refuses, and the
//! kernel lowers the sysctl by itself on hosts whose sampling interrupts take too long.

use perfaux_abi::consts::{PERF_COUNT_SW_CPU_CLOCK, PERF_COUNT_SW_TASK_CLOCK};

use super::resolve::{Event, EventKind, SamplerOptions};

/// perf's default rate for a software clock event (`-F 4000`).
pub const DEFAULT_CLOCK_FREQ: u64 = 4000;

/// Throttles `-F` to `max_rate`; perf's warning if it did.
pub fn throttle_user_freq(o: &mut SamplerOptions, max_rate: u64) -> Option<String> {
    let f = o.freq.filter(|&f| f > max_rate)?;
    o.freq = Some(max_rate);
    Some(format!(
        "-F {f}: above kernel.perf_event_max_sample_rate ({max_rate} Hz), throttled to \
         {max_rate} Hz; the limit can be raised in /proc/sys/kernel/perf_event_max_sample_rate \
         (the kernel lowers it when sampling interrupts take too long)"
    ))
}

/// For the clocks in `events` whose rate nothing chose, the default period at `max_rate`:
/// perf's 4000 Hz, or `max_rate` where that is lower, with perf's warning then (once). A
/// `freq=` above `max_rate` is an error naming the event.
pub fn fit_clock_defaults(events: &mut [Event], max_rate: u64) -> Result<Option<String>, String> {
    if let Some(ev) = events
        .iter()
        .find(|ev| ev.freq.is_some_and(|f| f > max_rate))
    {
        return Err(format!(
            "event '{}': freq={} is above kernel.perf_event_max_sample_rate ({max_rate} Hz): \
             lower it, or raise /proc/sys/kernel/perf_event_max_sample_rate",
            ev.text,
            ev.freq.unwrap_or_default()
        ));
    }
    if max_rate >= DEFAULT_CLOCK_FREQ {
        return Ok(None);
    }
    let mut lowered = false;
    for ev in events.iter_mut().filter(|ev| is_clock(ev)) {
        if ev.freq.is_none() && ev.period.is_none() {
            ev.period = Some(1_000_000_000u64.div_ceil(max_rate.max(1)));
            lowered = true;
        }
    }
    Ok(lowered.then(|| {
        format!(
            "lowering the clocks' default rate from {DEFAULT_CLOCK_FREQ} Hz to {max_rate} Hz, \
             kernel.perf_event_max_sample_rate; raise it in \
             /proc/sys/kernel/perf_event_max_sample_rate, or choose a rate with -F or -c"
        )
    }))
}

/// Whether `ev` is a software clock (its period is time in ns).
fn is_clock(ev: &Event) -> bool {
    matches!(
        ev.kind,
        EventKind::Software {
            config: PERF_COUNT_SW_TASK_CLOCK | PERF_COUNT_SW_CPU_CLOCK
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{apply_sampler_options, resolve_events};

    fn events(texts: &[&str]) -> Vec<Event> {
        let texts: Vec<String> = texts.iter().map(|s| s.to_string()).collect();
        resolve_events(&texts, None).unwrap()
    }

    #[test]
    fn the_default_clock_rate_is_lowered_to_the_kernels_maximum_with_a_warning() {
        let mut v = events(&["swtrace//", "task-clock", "cpu-clock", "probe:f"]);
        let w = fit_clock_defaults(&mut v, 1000)
            .unwrap()
            .expect("a warning");
        assert!(w.contains("from 4000 Hz to 1000 Hz"), "{w}");
        // 1000 Hz of CPU time: a sample each millisecond.
        assert_eq!(v[1].period, Some(1_000_000));
        assert_eq!(v[2].period, Some(1_000_000));
        // A probe's period counts calls, and the trace has none.
        assert_eq!(v[3].period, None);
        assert_eq!(v[0].period, None);
        // An odd maximum rounds the period up: never above the maximum rate.
        let mut v = events(&["task-clock"]);
        fit_clock_defaults(&mut v, 3000).unwrap();
        assert_eq!(v[0].period, Some(333_334));
    }

    #[test]
    fn a_maximum_at_or_above_4000_hz_changes_nothing_and_says_nothing() {
        for max in [DEFAULT_CLOCK_FREQ, 100_000] {
            let mut v = events(&["task-clock"]);
            let before = v.clone();
            assert_eq!(fit_clock_defaults(&mut v, max).unwrap(), None);
            assert_eq!(v, before);
        }
    }

    #[test]
    fn a_rate_the_user_chose_is_not_lowered_nor_warned_of() {
        for (opts, texts) in [
            (
                SamplerOptions {
                    period: Some(50_000),
                    ..Default::default()
                },
                vec!["task-clock"],
            ),
            (
                SamplerOptions {
                    freq: Some(500),
                    ..Default::default()
                },
                vec!["task-clock"],
            ),
            (SamplerOptions::default(), vec!["task-clock/period=77777/"]),
            (SamplerOptions::default(), vec!["task-clock/freq=900/"]),
        ] {
            let mut v = events(&texts);
            apply_sampler_options(&mut v, &opts).unwrap();
            let before = v.clone();
            assert_eq!(fit_clock_defaults(&mut v, 1000).unwrap(), None, "{texts:?}");
            assert_eq!(v, before);
        }
    }

    #[test]
    fn minus_f_above_the_maximum_is_throttled_to_it_with_perfs_warning() {
        let mut o = SamplerOptions {
            freq: Some(5000),
            ..Default::default()
        };
        let w = throttle_user_freq(&mut o, 2000).expect("a warning");
        assert_eq!(o.freq, Some(2000));
        assert!(
            w.contains("-F 5000") && w.contains("throttled to 2000 Hz"),
            "{w}"
        );
        let mut o = SamplerOptions {
            freq: Some(2000),
            ..Default::default()
        };
        assert_eq!(throttle_user_freq(&mut o, 2000), None);
        assert_eq!(o.freq, Some(2000));
    }

    #[test]
    fn a_freq_term_above_the_maximum_is_refused_with_the_events_name() {
        let mut v = events(&["task-clock/freq=5000/"]);
        let e = fit_clock_defaults(&mut v, 2000).unwrap_err();
        assert!(
            e.contains("task-clock/freq=5000/") && e.contains("(2000 Hz)"),
            "{e}"
        );
    }
}
