//! The cheaper timing modes (`WriterConfig::timing`): which packets carry a time, and how the
//! decoder interpolates and marks the others.

mod common;

use common::*;
use perfaux_swtrace::decode::{Event, decode};
use perfaux_swtrace::writer;
use perfaux_swtrace::{AuxRegion, Probe, Timing, WriterConfig, WriterError};

static A: Probe = Probe::new("tm_a");

/// Traces 100 calls of A with `timing`; returns the decoded events.
fn trace_with_timing(timing: Timing) -> Vec<Event> {
    let mut aux = vec![0u8; 1 << 16];
    // SAFETY: `aux` outlives the writer.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
    let mut cfg = WriterConfig::full_trace(region, None);
    cfg.timing = timing;
    cfg.sync_period = 4096;
    writer::install(cfg).unwrap();
    for _ in 0..100 {
        let _g = A.enter();
    }
    let end = writer::uninstall().unwrap().aux_head as usize;
    decode(&aux[..end])
}

/// (timed, interpolated) ENTER/EXIT events.
fn timed_and_interpolated(events: &[Event]) -> (Vec<&Event>, Vec<&Event>) {
    events
        .iter()
        .filter(|e| matches!(e, Event::Enter { .. } | Event::Exit { .. }))
        .partition(|e| {
            !matches!(
                e,
                Event::Enter {
                    interpolated: true,
                    ..
                } | Event::Exit {
                    interpolated: true,
                    ..
                }
            )
        })
}

#[test]
fn periodic_timing_times_one_packet_in_n_and_interpolates_the_rest() {
    let events = trace_with_timing(Timing::Periodic { every: 8 });
    assert_eq!(steps(&events).len(), 200);
    assert_times_monotonic(&events);
    // The first ENTER/EXIT of every 8 reads the clock; the others are flagged.
    let (timed, interpolated) = timed_and_interpolated(&events);
    assert_eq!(timed.len(), 200 / 8, "{events:?}");
    assert_eq!(interpolated.len(), 200 - 200 / 8);
    // Interpolated times are spread between the timed ones, not stuck at the last one.
    let times: Vec<u64> = steps_times(&events);
    let changes = times.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(changes > 200 / 8, "{changes} time changes: {times:?}");
    let mut aux = vec![0u8; 1024];
    let mut cfg0 = WriterConfig::overwrite(
        // SAFETY: never installed (rejected).
        unsafe { AuxRegion::new(aux.as_mut_ptr(), 1024) }.unwrap(),
    );
    cfg0.timing = Timing::Periodic { every: 0 };
    assert_eq!(writer::install(cfg0), Err(WriterError::BadTimestampEvery));
}

#[test]
fn entry_only_timing_times_every_entry_and_no_exit() {
    let events = trace_with_timing(Timing::EntryOnly);
    assert_eq!(steps(&events).len(), 200);
    assert_times_monotonic(&events);
    let (timed, interpolated) = timed_and_interpolated(&events);
    assert!(timed.iter().all(|e| matches!(e, Event::Enter { .. })));
    assert!(interpolated.iter().all(|e| matches!(e, Event::Exit { .. })));
    assert_eq!((timed.len(), interpolated.len()), (100, 100));
    // Full timing flags nothing.
    let full = trace_with_timing(Timing::Full);
    assert_eq!(timed_and_interpolated(&full).1.len(), 0);
}

fn steps_times(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Enter { time, .. } | Event::Exit { time, .. } => Some(*time),
            _ => None,
        })
        .collect()
}
