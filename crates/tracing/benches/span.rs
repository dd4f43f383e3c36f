//! A span's entry and exit, and an event with two fields, through the `tracing` registry:
//! alone (the baseline), with perfaux's layer and no recording, with perfaux's layer
//! recording (in-process, flight-recorder mode: the same writer as full trace, no disk), with
//! tracing-chrome's layer (its default threaded mode, writing JSON to a file), and with
//! tracing-perfetto's layer (protobuf trace packets written to a file under a mutex, on the
//! calling thread).
//!
//! cargo bench -p perfaux-tracing --bench span
//!
//! Before the timings, the bytes each layer writes per span (entry and exit) and per event
//! are printed, from a run of 100,000 of each.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use perfaux_tracing::{Recording, RecordingOptions};
use tracing::{Dispatch, info, info_span};
use tracing_subscriber::prelude::*;

const N_BYTES: u64 = 100_000;

fn chrome(path: &Path, args: bool) -> (Dispatch, tracing_chrome::FlushGuard) {
    let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
        .file(path)
        .include_args(args)
        .build();
    (tracing_subscriber::registry().with(layer).into(), guard)
}

fn perfetto(path: &Path) -> Dispatch {
    let file = std::fs::File::create(path).unwrap();
    let layer = tracing_perfetto::PerfettoLayer::new(std::sync::Mutex::new(file));
    tracing_subscriber::registry().with(layer).into()
}

fn perfaux() -> Dispatch {
    tracing_subscriber::registry()
        .with(perfaux_tracing::layer())
        .into()
}

fn spans(n: u64) {
    let span = info_span!("work");
    for _ in 0..n {
        let _g = black_box(&span).enter();
    }
}

/// A span per iteration, as a span per request is: made, entered, left, closed.
fn new_spans(n: u64) {
    for _ in 0..n {
        let _g = info_span!("work").entered();
    }
}

fn events(n: u64) {
    for i in 0..n {
        info!(status = 200u32, id = black_box(i), "done");
    }
}

/// Bytes per span and per event each layer writes, printed once.
fn bytes_per_call(dir: &Path) {
    let full = RecordingOptions::default();
    let f = dir.join("bytes.data");
    let rec = Recording::start(&f, full).unwrap();
    tracing::dispatcher::with_default(&perfaux(), || spans(N_BYTES));
    let s = rec.finish().unwrap();
    assert_eq!(s.lost, 0, "trace lost: the bytes would not be the spans'");
    let perfaux_span = s.aux_bytes as f64 / N_BYTES as f64;
    // An event's bytes: the file with N events less the file of an empty recording.
    let size_with = |name: &str, n: u64| {
        let f = dir.join(name);
        // A data area that holds every event: the bytes measured are all the events'.
        let opts = RecordingOptions {
            data_size: 16 << 20,
            ..RecordingOptions::default()
        };
        let rec = Recording::start(&f, opts).unwrap();
        tracing::dispatcher::with_default(&perfaux(), || events(n));
        let s = rec.finish().unwrap();
        assert_eq!(s.lost, 0, "events lost: the bytes would not be theirs");
        std::fs::metadata(&f).unwrap().len()
    };
    let perfaux_event =
        (size_with("bytes_ev.data", N_BYTES) - size_with("empty.data", 0)) as f64 / N_BYTES as f64;
    let c = dir.join("bytes.json");
    {
        let (d, _g) = chrome(&c, false);
        tracing::dispatcher::with_default(&d, || spans(N_BYTES));
    }
    let chrome_span = std::fs::metadata(&c).unwrap().len() as f64 / N_BYTES as f64;
    let c = dir.join("bytes_ev.json");
    {
        let (d, _g) = chrome(&c, true);
        tracing::dispatcher::with_default(&d, || events(N_BYTES));
    }
    let chrome_event = std::fs::metadata(&c).unwrap().len() as f64 / N_BYTES as f64;
    // tracing-perfetto writes a span when it is made and closed, not at its entries: its
    // bytes per span are those of a span made, entered and closed.
    let p = dir.join("bytes.pftrace");
    tracing::dispatcher::with_default(&perfetto(&p), || new_spans(N_BYTES));
    let perfetto_span = std::fs::metadata(&p).unwrap().len() as f64 / N_BYTES as f64;
    let p = dir.join("bytes_ev.pftrace");
    tracing::dispatcher::with_default(&perfetto(&p), || events(N_BYTES));
    let perfetto_event = std::fs::metadata(&p).unwrap().len() as f64 / N_BYTES as f64;
    eprintln!(
        "bytes per span (entry + exit): perfaux {perfaux_span:.1}, tracing-chrome {chrome_span:.1} \
         ({:.1} x); per event with two fields: perfaux {perfaux_event:.1}, tracing-chrome \
         {chrome_event:.1} ({:.1} x); tracing-perfetto: a span made, entered and closed {perfetto_span:.1} \
         ({:.1} x), event \
         {perfetto_event:.1} ({:.1} x)",
        chrome_span / perfaux_span,
        chrome_event / perfaux_event,
        perfetto_span / perfaux_span,
        perfetto_event / perfaux_event
    );
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    bytes_per_call(dir.path());
    let mut g = c.benchmark_group("span_enter_exit");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let span_iter = |b: &mut criterion::Bencher<'_>| {
        let span = info_span!("work");
        b.iter(|| {
            let _g = black_box(&span).enter();
        });
    };
    let registry: Dispatch = tracing_subscriber::registry().into();
    g.bench_function("registry", |b| {
        tracing::dispatcher::with_default(&registry, || span_iter(b))
    });
    g.bench_function("perfaux_not_recording", |b| {
        tracing::dispatcher::with_default(&perfaux(), || span_iter(b))
    });
    let flight = RecordingOptions {
        flight_recorder: true,
        ..RecordingOptions::default()
    };
    let rec = Recording::start(dir.path().join("span.data"), flight.clone()).unwrap();
    g.bench_function("perfaux_recording", |b| {
        tracing::dispatcher::with_default(&perfaux(), || span_iter(b))
    });
    rec.finish().unwrap();
    {
        let (d, _guard) = chrome(&dir.path().join("span.json"), false);
        g.bench_function("tracing_chrome", |b| {
            tracing::dispatcher::with_default(&d, || span_iter(b))
        });
    }
    g.finish();

    // Events go to the file in either mode (the data area is not a flight recorder): a
    // shorter run keeps the files small.
    // A span made, entered, left and closed per iteration: what a span per request costs,
    // and the only span tracing-perfetto writes.
    let mut g = c.benchmark_group("span_new_enter_exit_close");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let new_iter = |b: &mut criterion::Bencher<'_>| {
        b.iter(|| {
            let _g = info_span!("work").entered();
        });
    };
    g.bench_function("registry", |b| {
        tracing::dispatcher::with_default(&registry, || new_iter(b))
    });
    let rec = Recording::start(dir.path().join("new.data"), flight.clone()).unwrap();
    g.bench_function("perfaux_recording", |b| {
        tracing::dispatcher::with_default(&perfaux(), || new_iter(b))
    });
    rec.finish().unwrap();
    {
        let (d, _guard) = chrome(&dir.path().join("new.json"), false);
        g.bench_function("tracing_chrome", |b| {
            tracing::dispatcher::with_default(&d, || new_iter(b))
        });
    }
    let d = perfetto(&dir.path().join("new.pftrace"));
    g.bench_function("tracing_perfetto", |b| {
        tracing::dispatcher::with_default(&d, || new_iter(b))
    });
    g.finish();

    let mut g = c.benchmark_group("event_two_fields");
    g.warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    let event_iter = |b: &mut criterion::Bencher<'_>| {
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            info!(status = 200u32, id = black_box(i), "done");
        });
    };
    g.bench_function("registry", |b| {
        tracing::dispatcher::with_default(&registry, || event_iter(b))
    });
    let rec = Recording::start(dir.path().join("event.data"), flight).unwrap();
    g.bench_function("perfaux_recording", |b| {
        tracing::dispatcher::with_default(&perfaux(), || event_iter(b))
    });
    rec.finish().unwrap();
    {
        let (d, _guard) = chrome(&dir.path().join("event.json"), true);
        g.bench_function("tracing_chrome", |b| {
            tracing::dispatcher::with_default(&d, || event_iter(b))
        });
    }
    let d = perfetto(&dir.path().join("event.pftrace"));
    g.bench_function("tracing_perfetto", |b| {
        tracing::dispatcher::with_default(&d, || event_iter(b))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
