//! A recording in periodic timing (`RecordingOptions::timing`, as `perfaux record -e
//! swtrace/timing=periodic:N/`): the writer reads the clock once in N packets and at each SYNC.
//! Every span entry and exit of two threads is still a call in the trace, counted as a
//! counting layer beside it saw them; the times the decoder gives (interpolated between the
//! clock readings) never go backwards within a thread and lie within the recording; the trace
//! holds far fewer clock readings than spans (so the option reached the writer), and the
//! call-trace view (`perfaux script --call-trace`'s formatter) marks exactly the interpolated
//! times, as `~sec.nsec`.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

use common::{Counting, ONE_AT_A_TIME};
use perfaux_perfdata::PerfDataReader;
use perfaux_swtrace::table::ProbeTable;
use perfaux_swtrace::{CallTrace, CallTraceOptions, Event};
use perfaux_tracing::{Recording, RecordingOptions, Timing};
use tracing::info_span;
use tracing_subscriber::prelude::*;

const THREADS: u64 = 2;
const REQUESTS: u64 = 5_000;
const EVERY: u32 = 256;

/// CLOCK_MONOTONIC in ns: the clock the decoder's times are in.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(r, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A request: a span with a nested span without fields.
fn serve(req: u64) {
    let span = info_span!("request", req);
    let _in = span.enter();
    let inner = info_span!("parse");
    let _p = inner.enter();
    std::hint::black_box(req.wrapping_mul(31));
}

#[test]
fn periodic_timing_keeps_every_span_interpolates_the_times_in_order_and_marks_them() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("periodic.data");
    let counting = Counting::default();
    let dispatch: tracing::Dispatch = tracing_subscriber::registry()
        .with(perfaux_tracing::layer())
        .with(counting.clone())
        .into();
    let opts = RecordingOptions {
        aux_size: 8 << 20,
        timing: Timing::Periodic { every: EVERY },
        ..RecordingOptions::default()
    };
    let start = monotonic_ns();
    let rec = Recording::start(&file, opts).unwrap();
    let dispatch = Arc::new(dispatch);
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let d = Arc::clone(&dispatch);
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    for r in 0..REQUESTS {
                        serve(r);
                    }
                })
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let summary = rec.finish().unwrap();
    let end = monotonic_ns();
    assert_eq!(summary.lost, 0, "{summary:?}");

    let counted = counting.enters.lock().unwrap().clone();
    assert_eq!(
        counted.get("periodic_timing::request"),
        Some(&(THREADS * REQUESTS))
    );
    assert_eq!(
        counted.get("periodic_timing::parse"),
        Some(&(THREADS * REQUESTS))
    );
    // What the program made, as the other tests read it back.
    let seen = common::read(&file);
    assert_eq!(seen.enters, counted, "calls entered");
    assert_eq!(seen.exits, counted, "calls returned");

    let reader = PerfDataReader::open(&file).unwrap();
    let section = reader.trace_section().expect("a trace section").unwrap();
    let table = ProbeTable::from_bytes(section.probe_table()).unwrap();
    // Per thread: its decoded events, window after window.
    let mut threads: BTreeMap<u32, Vec<Event>> = BTreeMap::new();
    for w in section.windows() {
        let w = w.unwrap();
        let mut bytes = Vec::new();
        section.window_bytes(&w).read_to_end(&mut bytes).unwrap();
        threads
            .entry(w.first.header.tid)
            .or_default()
            .extend(perfaux_swtrace::decode(&bytes));
    }
    let spans = 2 * THREADS * REQUESTS;
    let (mut timed, mut interpolated, mut syncs) = (0u64, 0u64, 0u64);
    let mut marked = 0u64;
    let mut with_spans = 0;
    for (tid, events) in &threads {
        let mut view = CallTrace::new(
            &table,
            CallTraceOptions {
                returns: true,
                ..CallTraceOptions::default()
            },
        );
        let mut last = 0u64;
        let mut calls = 0u64;
        for e in events {
            let (time, interp) = match *e {
                Event::Enter {
                    time, interpolated, ..
                }
                | Event::Exit {
                    time, interpolated, ..
                } => (time, interpolated),
                Event::Sync { .. } => {
                    syncs += 1;
                    continue;
                }
                _ => continue,
            };
            calls += 1;
            assert!(
                time >= last,
                "thread {tid}: a time went backwards ({last} then {time}) at {e:?}"
            );
            assert!(
                (start..=end).contains(&time),
                "thread {tid}: {time} outside the recording ({start}..={end}) at {e:?}"
            );
            last = time;
            if interp {
                interpolated += 1;
            } else {
                timed += 1;
            }
            let line = view
                .line(e)
                .expect("a call-trace line for each entry and exit");
            let approx = line.contains("] ~");
            assert_eq!(approx, interp, "the view's mark: {line}");
            marked += u64::from(approx);
        }
        if calls > 0 {
            with_spans += 1;
        }
    }
    assert_eq!(
        with_spans,
        THREADS,
        "threads with spans: {:?}",
        threads.keys()
    );
    assert_eq!(timed + interpolated, 2 * spans, "entries and exits decoded");
    assert_eq!(marked, interpolated);
    // Periodic timing reached the writer: one clock reading in EVERY entries and exits, plus
    // one per SYNC (every 512 bytes of trace). Full timing reads it at every one: 2 * spans.
    let readings = timed + syncs;
    eprintln!(
        "{spans} spans: {timed} timed entries and exits, {interpolated} interpolated, \
         {syncs} SYNCs"
    );
    assert!(
        readings * 16 < spans,
        "{readings} clock readings for {spans} spans: the trace is not periodically timed"
    );
    assert!(
        interpolated > spans,
        "{interpolated} interpolated of {}",
        2 * spans
    );
}
