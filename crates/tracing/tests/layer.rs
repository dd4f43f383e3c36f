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

/// A recording into `name` in a temporary directory, and a dispatch with perfaux's layer
/// and a counting layer beside it.
struct Counted {
    dir: tempfile::TempDir,
    file: std::path::PathBuf,
    counting: Counting,
    dispatch: tracing::Dispatch,
    rec: Recording,
}

fn counted(name: &str) -> Counted {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    let counting = Counting::default();
    let dispatch = tracing_subscriber::registry()
        .with(perfaux_tracing::layer())
        .with(counting.clone())
        .into();
    let rec = Recording::start(&file, RecordingOptions::default()).unwrap();
    Counted {
        dir,
        file,
        counting,
        dispatch,
        rec,
    }
}

#[test]
fn every_span_and_event_of_four_threads_is_recorded_as_a_counting_layer_saw_it() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Counted {
        dir,
        file,
        counting,
        dispatch,
        rec,
    } = counted("layer.data");
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

/// Many spans alive at once from several callsites, more than the layer's table of span ids
/// holds, entered twice each, all closed and made again between rounds (the registry reuses
/// their slots): every entry is recorded under its own span's name. An entry that took
/// another span's probe from a slot they share shows as a count off (an id given again is
/// the next test's).
#[test]
fn spans_sharing_the_layers_table_each_record_under_their_own_name() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Counted {
        dir: _dir,
        file,
        counting,
        dispatch,
        rec,
    } = counted("many.data");
    tracing::dispatcher::with_default(&dispatch, || {
        for round in 0..3 {
            let spans: Vec<_> = (0..3000u32)
                .map(|i| match (i + round) % 3 {
                    0 => info_span!("alpha"),
                    1 => info_span!("beta"),
                    _ => debug_span!("gamma"),
                })
                .collect();
            for _ in 0..2 {
                for s in &spans {
                    let _in = s.enter();
                }
            }
        }
    });
    let summary = rec.finish().unwrap();
    assert_eq!(summary.lost, 0, "{summary:?}");
    let seen = common::read(&file);
    let counted = counting.enters.lock().unwrap().clone();
    for name in ["layer::alpha", "layer::beta", "layer::gamma"] {
        assert_eq!(counted.get(name), Some(&6000), "{name}");
    }
    assert_eq!(seen.enters, counted, "calls entered");
    assert_eq!(seen.exits, counted, "calls returned");
}

/// A span's fields go out at its first entry, and its later entries take the layer's quick
/// way (no lookup of the span); a field recorded after that still goes out, at the next
/// entry, once.
#[test]
fn a_field_recorded_after_an_entry_goes_out_at_the_next_entry() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // (The counting layer beside it is not consulted.)
    let Counted {
        dir: _dir,
        file,
        dispatch,
        rec,
        ..
    } = counted("late.data");
    tracing::dispatcher::with_default(&dispatch, || {
        let span = info_span!("conn", bytes = tracing::field::Empty);
        drop(span.enter());
        drop(span.enter());
        span.record("bytes", 42u64);
        drop(span.enter());
        drop(span.enter());
    });
    rec.finish().unwrap();
    let seen = common::read(&file);
    assert_eq!(seen.enters.get("layer::conn"), Some(&4));
    assert_eq!(
        seen.payloads(SPAN_FIELDS),
        ["span=conn", "span=conn bytes=42"]
    );
}

/// One layer value cloned into two subscribers: each registry numbers its spans from the
/// same first id, and each span's entries are recorded under its own name.
#[test]
fn a_layer_cloned_into_two_subscribers_names_each_ones_spans() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("two.data");
    let layer = perfaux_tracing::layer();
    let first: tracing::Dispatch = tracing_subscriber::registry().with(layer.clone()).into();
    let second: tracing::Dispatch = tracing_subscriber::registry().with(layer).into();
    let rec = Recording::start(&file, RecordingOptions::default()).unwrap();
    let a = tracing::dispatcher::with_default(&first, || info_span!("alpha"));
    let b = tracing::dispatcher::with_default(&second, || info_span!("beta"));
    assert_eq!(
        a.id(),
        b.id(),
        "each registry's first span has the first id"
    );
    tracing::dispatcher::with_default(&first, || drop(a.enter()));
    tracing::dispatcher::with_default(&second, || drop(b.enter()));
    rec.finish().unwrap();
    let seen = common::read(&file);
    assert_eq!(
        seen.enters.get("layer::alpha"),
        Some(&1),
        "{:?}",
        seen.enters
    );
    assert_eq!(
        seen.enters.get("layer::beta"),
        Some(&1),
        "{:?}",
        seen.enters
    );
}

/// The registry gives a closed span's id to a later span (after 8191 reuses of its slot in
/// its slab): that span records under its own name and sends its fields, whatever pair the
/// layer kept for the first.
#[test]
fn a_span_made_with_a_closed_spans_id_is_recorded_as_itself() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // (The counting layer beside it is not consulted.)
    let Counted {
        dir: _dir,
        file,
        dispatch,
        rec,
        ..
    } = counted("reused.data");
    tracing::dispatcher::with_default(&dispatch, || {
        let first = info_span!("first");
        let id = first.id().unwrap();
        drop(first.enter());
        drop(first);
        // Spans with fields, never entered: the layer keeps no pair for them.
        let mut again = None;
        for n in 0..20_000u32 {
            let s = info_span!("later", n);
            if s.id() == Some(id.clone()) {
                again = Some(s);
                break;
            }
        }
        let again = again.expect("the registry gave the first span's id again");
        drop(again.enter());
    });
    rec.finish().unwrap();
    let seen = common::read(&file);
    assert_eq!(
        seen.enters.get("layer::first"),
        Some(&1),
        "{:?}",
        seen.enters
    );
    assert_eq!(
        seen.enters.get("layer::later"),
        Some(&1),
        "{:?}",
        seen.enters
    );
    let fields = seen.payloads(SPAN_FIELDS);
    assert_eq!(fields.len(), 1, "{fields:?}");
    assert!(fields[0].starts_with("span=later n="), "{fields:?}");
}
