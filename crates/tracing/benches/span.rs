//! A span's entry and exit, and an event with two fields, through the `tracing` registry:
//! alone (the baseline), with perfaux's layer and no recording, with perfaux's layer
//! recording (in-process, flight-recorder mode: the same writer as full trace, no disk), with
//! tracing-chrome's layer (its default threaded mode, writing JSON to a file), with
//! tracing-perfetto's layer (protobuf trace packets written to a file under a mutex, on the
//! calling thread), and with tracing-tracy's layer (its default `Config`: no call stacks, a
//! span's fields in its zone name).
//!
//! perfaux records in two timing modes: `perfaux_recording` reads the clock at every span
//! entry and exit (the default, `Timing::Full`), `perfaux_recording_periodic` once in 256 of
//! them (`RecordingOptions::timing`, `Timing::Periodic { every: 256 }`: the decoder
//! interpolates the others). `clock/clock_read_pair` (x86_64) times two back-to-back `rdtsc`:
//! the floor of the default mode's span entry and exit.
//!
//! cargo bench -p perfaux-tracing --bench span
//!
//! Before the timings, the bytes each layer writes per span (entry and exit) and per event
//! are printed, from a run of 100,000 of each.
//!
//! Tracy is measured with its queue counted, not with a server connected: no Tracy capture
//! tool is packaged for Debian (bookworm, trixie or sid), so none can be run here against the
//! client's protocol (tracy-client-sys 0.30, Tracy 0.14.1, protocol 82). Its client is built
//! without `ondemand`, which would drop every zone and message while no server is connected
//! and so time a branch; without it the client enqueues everything and keeps it until a server
//! connects. What is timed is therefore the layer's work and the client's enqueue (a source
//! location allocated per entry, a queue item per zone begin, end and message, the message
//! text copied), with the page faults of a queue that only grows (a fresh page every 36 spans;
//! see BENCHMARKS.md), and without the work a connected client's thread does to send it. Of
//! tracy-client's default features it keeps `enable` and leaves out those that start work
//! beside the timed thread (kernel system and context-switch tracing and call-stack sampling:
//! they would also interrupt the other peers in this process and fill the queue on their own),
//! `broadcast` (UDP announcements to the network), `crash-handler` (signal handlers in a
//! process where perfaux's recorder works) and the features a server asks for (code transfer,
//! inline frames); none of these is on the path a zone or message takes. `only-localhost`
//! keeps the listening client off the network. The client starts before `main` (no
//! `manual-lifetime`), so its thread, waking every 10 ms to look for a server, is in the
//! process for every peer's cases; beside them it is noise.
//!
//! The queue never drains, so Tracy's cases run for a short time only (`TRACY_WARM_UP`,
//! `TRACY_MEASURE`). Criterion runs as many iterations as fit in its times (its warm-up up to
//! twice its time), so a case leaves at most (2 x warm-up + measurement) / time per call x
//! queue bytes per call behind: at 90 ns and 112 bytes a span, about 1 million spans and
//! 120 MB. The cases' queues add up (none is freed), to some 220 MB, printed at the end with the
//! process's peak memory (most of which is tracing-chrome's: its writer thread falls behind
//! the channel it is sent events on). Tracy's bytes in a trace are not measured: they are what
//! a client sends a server (compressed), and there is no server. The queue memory per call
//! printed instead (the process's resident growth) is what the client holds until a server
//! connects, not a trace's size.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};
use perfaux_tracing::{Recording, RecordingOptions, Timing};
use tracing::{Dispatch, info, info_span};
use tracing_subscriber::prelude::*;

const N_BYTES: u64 = 100_000;
/// Tracy's queue grows with every iteration and never drains: its cases are short (see the
/// module doc).
const TRACY_WARM_UP: Duration = Duration::from_millis(20);
const TRACY_MEASURE: Duration = Duration::from_millis(60);
/// `perfaux_recording_periodic`: packets per clock reading.
const PERIODIC: Timing = Timing::Periodic { every: 256 };

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

fn tracy() -> Dispatch {
    tracing_subscriber::registry()
        .with(tracing_tracy::TracyLayer::default())
        .into()
}

/// A field of /proc/self/status in bytes (VmRSS, VmHWM).
fn proc_status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kb: u64 = line[field.len() + 1..]
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .unwrap();
    kb * 1024
}

/// The resident bytes `f` leaves behind per call: Tracy's queue has no file to measure.
fn tracy_queue_bytes(f: impl FnOnce(u64)) -> f64 {
    let before = proc_status_bytes("VmRSS:");
    tracing::dispatcher::with_default(&tracy(), || f(N_BYTES));
    let per_call = (proc_status_bytes("VmRSS:") - before) as f64 / N_BYTES as f64;
    // A queue item alone is 32 bytes: less would mean something (a server) drains the
    // queue, and the timings would not be of what the doc says.
    assert!(
        per_call >= 32.0,
        "Tracy's queue did not grow ({per_call:.1} B a call): is a server connected?"
    );
    per_call
}

/// Tracy's case in `g`, short (its queue never drains); returns the resident bytes it left.
fn bench_tracy(
    g: &mut BenchmarkGroup<'_, WallTime>,
    iter: impl Fn(&mut criterion::Bencher<'_>),
) -> u64 {
    g.warm_up_time(TRACY_WARM_UP)
        .measurement_time(TRACY_MEASURE);
    let d = tracy();
    let before = proc_status_bytes("VmRSS:");
    g.bench_function("tracing_tracy", |b| {
        tracing::dispatcher::with_default(&d, || iter(b))
    });
    proc_status_bytes("VmRSS:").saturating_sub(before)
}

/// A layer with nothing in it.
struct NoopLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for NoopLayer {}

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
    let f = dir.join("bytes_periodic.data");
    let periodic = RecordingOptions {
        timing: PERIODIC,
        ..RecordingOptions::default()
    };
    let rec = Recording::start(&f, periodic).unwrap();
    tracing::dispatcher::with_default(&perfaux(), || spans(N_BYTES));
    let s = rec.finish().unwrap();
    assert_eq!(s.lost, 0, "trace lost: the bytes would not be the spans'");
    let perfaux_periodic_span = s.aux_bytes as f64 / N_BYTES as f64;
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
    let tracy_span = tracy_queue_bytes(spans);
    let tracy_event = tracy_queue_bytes(events);
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
    eprintln!("bytes per span, perfaux periodic timing (1 in 256): {perfaux_periodic_span:.1}");
    eprintln!(
        "tracing-tracy, memory its queue holds until a server connects (not trace bytes): \
         span (entry + exit) {tracy_span:.1}, event {tracy_event:.1}"
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
    // A layer that does nothing (every method the trait's empty default): what any layer
    // adds to the registry's work, the floor of perfaux's layer not recording.
    let noop: Dispatch = tracing_subscriber::registry().with(NoopLayer).into();
    g.bench_function("noop_layer", |b| {
        tracing::dispatcher::with_default(&noop, || span_iter(b))
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
    let periodic = RecordingOptions {
        timing: PERIODIC,
        ..flight.clone()
    };
    let rec = Recording::start(dir.path().join("span_periodic.data"), periodic.clone()).unwrap();
    g.bench_function("perfaux_recording_periodic", |b| {
        tracing::dispatcher::with_default(&perfaux(), || span_iter(b))
    });
    rec.finish().unwrap();
    {
        let (d, _guard) = chrome(&dir.path().join("span.json"), false);
        g.bench_function("tracing_chrome", |b| {
            tracing::dispatcher::with_default(&d, || span_iter(b))
        });
    }
    let mut tracy_queues = bench_tracy(&mut g, span_iter);
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
    let rec = Recording::start(dir.path().join("new_periodic.data"), periodic.clone()).unwrap();
    g.bench_function("perfaux_recording_periodic", |b| {
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
    tracy_queues += bench_tracy(&mut g, new_iter);
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
    let rec = Recording::start(dir.path().join("event_periodic.data"), periodic).unwrap();
    g.bench_function("perfaux_recording_periodic", |b| {
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
    tracy_queues += bench_tracy(&mut g, event_iter);
    g.finish();
    clock(c);
    eprintln!(
        "peak resident memory: {:.0} MB, of which Tracy's queues in the timed cases {:.0} MB",
        proc_status_bytes("VmHWM:") as f64 / 1e6,
        tracy_queues as f64 / 1e6
    );
}

/// Two back-to-back clock reads, as the writer's (`rdtsc`, perfaux-swtrace's clock on
/// x86_64): what a fully timed span entry and exit cannot go below.
#[cfg(target_arch = "x86_64")]
fn clock(c: &mut Criterion) {
    let mut g = c.benchmark_group("clock");
    g.warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    g.bench_function("clock_read_pair", |b| {
        b.iter(|| {
            // SAFETY: rdtsc has no preconditions; it only reads the time stamp counter.
            let t0 = unsafe { core::arch::x86_64::_rdtsc() };
            // SAFETY: as above.
            let t1 = unsafe { core::arch::x86_64::_rdtsc() };
            black_box((t0, t1))
        });
    });
    g.finish();
}

#[cfg(not(target_arch = "x86_64"))]
fn clock(_: &mut Criterion) {}

criterion_group!(benches, bench);
criterion_main!(benches);
