//! A flight recording's triggers: an event as severe as asked, a span busy for too long, a
//! panic. Each takes one snapshot on the triggering thread, so the trace it keeps ends where
//! the trigger fired; a uevent says why just before; triggers within the interval are
//! counted, not taken.

mod common;

use std::time::Duration;

use common::ONE_AT_A_TIME;
use perfaux_tracing::{EVENT, Recording, RecordingOptions, SNAPSHOT};
use tracing::{error, info_span, warn};
use tracing_subscriber::prelude::*;

fn flight(f: impl FnOnce(&mut RecordingOptions)) -> RecordingOptions {
    let mut o = RecordingOptions {
        flight_recorder: true,
        snapshot_interval: Duration::from_secs(3600),
        ..RecordingOptions::default()
    };
    f(&mut o);
    o
}

/// A recording into `name` in a new directory, this test's turn held while it lives.
struct Turn {
    _turn: std::sync::MutexGuard<'static, ()>,
    dir: tempfile::TempDir,
    file: std::path::PathBuf,
}

fn start(name: &str, opts: RecordingOptions) -> (Turn, Recording) {
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    let rec = Recording::start(&file, opts).unwrap();
    (
        Turn {
            _turn: turn,
            dir,
            file,
        },
        rec,
    )
}

fn dispatch() -> tracing::Dispatch {
    tracing_subscriber::registry()
        .with(perfaux_tracing::layer())
        .into()
}

#[test]
fn an_error_takes_one_snapshot_that_ends_at_it_and_a_second_within_the_interval_is_counted() {
    let (t, rec) = start(
        "error.data",
        flight(|o| o.snapshot_on_level = Some(tracing::Level::ERROR)),
    );
    tracing::dispatcher::with_default(&dispatch(), || {
        for req in 0..500u32 {
            let _s = info_span!("request", req).entered();
            match req {
                100 => warn!(req, "not severe enough"),
                200 => error!(req, "boom"),
                300 => error!(req, "boom again"),
                _ => {}
            }
        }
    });
    assert_eq!(rec.snapshots_triggered(), 1);
    assert_eq!(rec.snapshots_suppressed(), 1);
    rec.finish().unwrap();
    assert_eq!(common::snapshots(&t.file), 1);
    let seen = common::read(&t.file);
    // Taken inside request 200: requests 0..=200 entered, 0..=199 returned.
    assert_eq!(seen.enters.get("triggers::request"), Some(&201));
    assert_eq!(seen.exits.get("triggers::request"), Some(&200));
    assert_eq!(seen.payloads(SNAPSHOT), ["reason=level level=ERROR"]);
}

#[test]
fn a_span_busy_past_the_limit_takes_a_snapshot_once() {
    let (t, rec) = start(
        "slow.data",
        flight(|o| {
            o.snapshot_on_slow = Some(Duration::from_millis(25));
            o.snapshot_interval = Duration::ZERO;
        }),
    );
    tracing::dispatcher::with_default(&dispatch(), || {
        for _ in 0..3 {
            let _s = info_span!("quick").entered();
            std::thread::sleep(Duration::from_millis(1));
        }
        // Busy 1 + 1 + 40 ms over three entries: past 25 ms at the third, once (a fourth
        // entry fires nothing, and is after the snapshot).
        let slow = info_span!("slow");
        for ms in [1, 1, 40] {
            let _s = slow.enter();
            std::thread::sleep(Duration::from_millis(ms));
        }
        let _again = slow.enter();
    });
    assert_eq!(rec.snapshots_triggered(), 1);
    rec.finish().unwrap();
    let seen = common::read(&t.file);
    let said = seen.payloads(SNAPSHOT);
    assert_eq!(said.len(), 1, "{said:?}");
    let busy: u64 = said[0]
        .strip_prefix("reason=slow span=triggers::slow busy_us=")
        .unwrap_or_else(|| panic!("{}", said[0]))
        .parse()
        .unwrap();
    assert!(busy >= 25_000, "{busy} us");
    // The snapshot was taken at the third exit of `slow`: all its calls so far are in it.
    assert_eq!(seen.exits.get("triggers::slow"), Some(&3));
    assert_eq!(seen.exits.get("triggers::quick"), Some(&3));
}

#[test]
fn a_panic_takes_a_snapshot_whose_last_event_is_the_panic_and_perf_reads_the_file() {
    let (t, rec) = start("panic.data", flight(|o| o.snapshot_on_panic = true));
    let d = dispatch();
    let worker = std::thread::spawn(move || {
        tracing::dispatcher::with_default(&d, || {
            for req in 0..10u32 {
                let _s = info_span!("handler", req).entered();
                if req == 7 {
                    panic!("bad request {req}");
                }
            }
        })
    });
    assert!(worker.join().is_err(), "the worker panicked");
    assert_eq!(rec.snapshots_triggered(), 1);
    rec.finish().unwrap();
    assert_eq!(common::snapshots(&t.file), 1);
    let seen = common::read(&t.file);
    let at = seen
        .uevents
        .iter()
        .position(|(t, _)| *t == SNAPSHOT)
        .expect("the snapshot's uevent");
    assert_eq!(seen.uevents[at].1, "reason=panic");
    let (ty, last) = &seen.uevents[at - 1];
    assert_eq!(*ty, EVENT);
    assert!(
        last.starts_with("level=ERROR target=panic message=\"bad request 7\" location=\""),
        "{last}"
    );
    assert_eq!(seen.enters.get("triggers::handler"), Some(&8));

    perfaux_testutil::require_oracle!("perf");
    common::perf_script(&t.file, t.dir.path());
}

/// The panic hook stays installed once a recording asked for it; a later recording that did
/// not ask takes no snapshot on a panic.
#[test]
fn a_later_recording_without_the_panic_trigger_takes_no_snapshot_on_a_panic() {
    let (_t1, first) = start("first.data", flight(|o| o.snapshot_on_panic = true));
    first.finish().unwrap();
    drop(_t1);
    let (_t2, second) = start("second.data", flight(|_| {}));
    let d = dispatch();
    let worker = std::thread::spawn(move || {
        tracing::dispatcher::with_default(&d, || {
            let _s = info_span!("handler").entered();
            panic!("not a trigger here");
        })
    });
    assert!(worker.join().is_err());
    assert_eq!(second.snapshots_triggered(), 0);
    second.finish().unwrap();
}

/// A span that records a field over and over keeps one uevent's worth of fields, not all.
#[test]
fn a_span_recording_a_field_many_times_keeps_a_bounded_payload() {
    let (t, rec) = start("fields.data", RecordingOptions::default());
    tracing::dispatcher::with_default(&dispatch(), || {
        let span = info_span!("conn", bytes = tracing::field::Empty);
        for n in 0..10_000u64 {
            span.record("bytes", n);
        }
        let _e = span.enter();
    });
    rec.finish().unwrap();
    let seen = common::read(&t.file);
    let fields = seen.payloads(perfaux_tracing::SPAN_FIELDS);
    assert_eq!(fields.len(), 1);
    assert!(
        fields[0].starts_with("span=conn bytes=0 bytes=1 "),
        "{}",
        &fields[0][..40]
    );
    assert!(fields[0].len() <= 4096, "{} bytes", fields[0].len());
}

/// The first and last times of the spans `name` entered in `file`'s trace (ns).
fn entered_span(file: &std::path::Path, name: &str) -> (u64, u64) {
    use std::io::Read;
    let reader = perfaux_perfdata::PerfDataReader::open(file).unwrap();
    let section = reader.trace_section().expect("a trace section").unwrap();
    let table = perfaux_swtrace::table::ProbeTable::from_bytes(section.probe_table()).unwrap();
    let (mut first, mut last) = (u64::MAX, 0);
    for w in section.windows() {
        let w = w.unwrap();
        let mut bytes = Vec::new();
        section.window_bytes(&w).read_to_end(&mut bytes).unwrap();
        for e in perfaux_swtrace::decode(&bytes) {
            if let perfaux_swtrace::Event::Enter { id, time, .. } = e
                && table.get(id).is_some_and(|p| p.name == name)
            {
                first = first.min(time);
                last = last.max(time);
            }
        }
    }
    (first, last)
}

/// A flight recording with a window (`RecordingOptions::window`, as `perfaux record -S
/// --window`): a snapshot keeps the window's span of the newest trace, from the first span
/// entered at or after its start (a span a millisecond here), of the 600 ms the area held.
#[test]
fn a_window_bounds_the_snapshot_by_time() {
    let (t, rec) = start(
        "window.data",
        flight(|o| o.window = Some(Duration::from_millis(200))),
    );
    tracing::dispatcher::with_default(&dispatch(), || {
        let end = std::time::Instant::now() + Duration::from_millis(600);
        while std::time::Instant::now() < end {
            let _s = info_span!("tick").entered();
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let taken = perfaux_swtrace::clock::monotonic_ns();
    assert!(rec.snapshot().unwrap());
    rec.finish().unwrap();
    let (first, last) = entered_span(&t.file, "triggers::tick");
    // `taken` is read a moment before the snapshot's own time, the window's end.
    assert!(
        first >= taken - 200_000_000,
        "kept {} ms",
        (taken - first) / 1_000_000
    );
    assert!(
        first <= taken - 150_000_000,
        "kept {} ms",
        (taken - first) / 1_000_000
    );
    assert!(last <= taken);
}
