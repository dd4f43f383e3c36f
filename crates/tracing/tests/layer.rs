//! The layer in a process that records itself: every span entry and exit of every thread is
//! a call in the trace, every event a uevent, the counts equal to what a counting layer beside
//! it saw, and perf 6.1 reads the file.

mod common;

use std::sync::Arc;

use common::{Counting, ONE_AT_A_TIME};
use perfaux_tracing::{EVENT, Recording, RecordingOptions, SPAN_FIELDS};
use tracing::{debug_span, info, info_span, warn};
use tracing_subscriber::prelude::*;

const THREADS: u64 = 4;
const REQUESTS: u64 = 300;

/// A request: a span with a field, a nested span, an event with two fields, a rare warning.
fn serve(worker: u64, req: u64) {
    let span = info_span!("request", worker, req);
    let _in = span.enter();
    {
        let parse = debug_span!("parse");
        let _p = parse.enter();
        std::hint::black_box(req.wrapping_mul(31));
    }
    info!(status = 200, bytes = req * 10, "done");
    if req.is_multiple_of(100) {
        warn!(req, "slow path");
    }
}

#[test]
fn every_span_and_event_of_four_threads_is_recorded_as_a_counting_layer_saw_it() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("layer.data");
    let counting = Counting::default();
    let dispatch: tracing::Dispatch = tracing_subscriber::registry()
        .with(perfaux_tracing::layer())
        .with(counting.clone())
        .into();
    let rec = Recording::start(&file, RecordingOptions::default()).unwrap();
    let dispatch = Arc::new(dispatch);
    let workers: Vec<_> = (0..THREADS)
        .map(|w| {
            let d = Arc::clone(&dispatch);
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    for r in 0..REQUESTS {
                        serve(w, r);
                    }
                })
            })
        })
        .collect();
    for w in workers {
        // Each worker exits before the recording ends: its trace stays.
        w.join().unwrap();
    }
    let summary = rec.finish().unwrap();
    assert_eq!(summary.lost, 0, "{summary:?}");

    let seen = common::read(&file);
    let counted = counting.enters.lock().unwrap().clone();
    assert_eq!(counted.get("layer::request"), Some(&(THREADS * REQUESTS)));
    assert_eq!(counted.get("layer::parse"), Some(&(THREADS * REQUESTS)));
    assert_eq!(seen.enters, counted, "calls entered");
    assert_eq!(seen.exits, counted, "calls returned");

    let events: Vec<&String> = seen
        .uevents
        .iter()
        .filter(|(t, _)| *t == EVENT)
        .map(|(_, p)| p)
        .collect();
    assert_eq!(events.len() as u64, *counting.events.lock().unwrap());
    let done = events
        .iter()
        .filter(|p| p.contains("message=\"done\""))
        .count() as u64;
    assert_eq!(done, THREADS * REQUESTS);
    assert!(
        events
            .contains(&&"level=INFO target=layer message=\"done\" status=200 bytes=0".to_string()),
        "{:?}",
        &events[..3]
    );
    let slow: Vec<_> = events
        .iter()
        .filter(|p| p.starts_with("level=WARN"))
        .collect();
    assert_eq!(slow.len() as u64, THREADS * REQUESTS / 100);
    // A span's fields, once per span (each request is a new span; `parse` has none).
    let spans = seen
        .uevents
        .iter()
        .filter(|(t, _)| *t == SPAN_FIELDS)
        .count() as u64;
    assert_eq!(spans, THREADS * REQUESTS);
    assert!(
        seen.uevents
            .iter()
            .any(|(t, p)| *t == SPAN_FIELDS && p == "span=request worker=3 req=299")
    );

    perfaux_testutil::require_oracle!("perf");
    let text = common::perf_script(&file, dir.path());
    let samples = text
        .lines()
        .filter(|l| l.contains("perfaux:uevent"))
        .count() as u64;
    assert_eq!(samples, seen.uevents.len() as u64, "perf script's samples");
}

#[test]
fn with_no_recording_the_layer_records_nothing_and_the_program_runs() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let counting = Counting::default();
    let dispatch: tracing::Dispatch = tracing_subscriber::registry()
        .with(perfaux_tracing::layer())
        .with(counting.clone())
        .into();
    tracing::dispatcher::with_default(&dispatch, || {
        for r in 0..10 {
            serve(0, r);
        }
    });
    assert_eq!(
        counting.enters.lock().unwrap().get("layer::request"),
        Some(&10)
    );
}
