//! Cost of a traced call: uninstrumented baseline, no writer, paused, traced into an overwrite
//! AUX area (TSC and CLOCK_MONOTONIC timestamps, each timing mode beside the default), the floor of any timestamped ENTER + EXIT
//! (two TSC reads and two 2-byte stores, nothing else), the two clocks alone, and decoding
//! speed.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use perfaux_swtrace::{AuxRegion, ClockSource, Probe, Timing, WriterConfig, clock, decode, writer};

static PROBE: Probe = Probe::new("bench_traced");

#[inline(never)]
fn plain(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

#[inline(never)]
fn traced(x: u64) -> u64 {
    let _g = PROBE.enter();
    black_box(x).wrapping_mul(3)
}

/// The least a call traced with a timestamp at entry and at return can cost: what the writer's
/// fast path does minus everything else (no signal safety, shadow stack, SYNC, mode or space
/// checks). The peer that shows how much of a traced call is the clock.
struct Floor {
    aux: Vec<u8>,
    head: u64,
    last: u64,
}

impl Floor {
    #[inline(always)]
    fn packet(&mut self, header: u8) {
        let now = clock::tsc();
        let delta = now.wrapping_sub(self.last) & 0x7f;
        let off = (self.head as usize) & (self.aux.len() - 2);
        self.aux[off..off + 2].copy_from_slice(&[header, delta as u8]);
        self.last = now;
        self.head += 2;
    }
}

#[inline(never)]
fn floor(x: u64, f: &mut Floor) -> u64 {
    f.packet(0x81);
    let r = black_box(x).wrapping_mul(3);
    f.packet(0x01);
    r
}

/// How the bench's writer starts.
#[derive(Clone, Copy, PartialEq)]
enum Start {
    Tracing,
    /// Paused, the default: the thread is not observed while paused.
    Paused,
    /// Paused with `track_paused`: calls are followed while paused.
    PausedTracked,
}

fn with_writer(aux: &mut [u8], clock: ClockSource, start: Start, timing: Timing, f: impl FnOnce()) {
    // SAFETY: `aux` outlives the writer, uninstalled before this function returns.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
    let mut cfg = WriterConfig::overwrite(region);
    cfg.clock = clock;
    cfg.start_paused = start != Start::Tracing;
    cfg.track_paused = start == Start::PausedTracked;
    cfg.timing = timing;
    writer::install(cfg).unwrap();
    f();
    writer::uninstall().unwrap();
}

fn calls(c: &mut Criterion) {
    let mut aux = vec![0u8; 1 << 20];
    // Register the probe first, so that every measured entry takes the steady-state path.
    PROBE.id().unwrap();
    let mut g = c.benchmark_group("call");
    g.bench_function("uninstrumented", |b| b.iter(|| plain(black_box(7))));
    let mut fl = Floor {
        aux: vec![0u8; 1 << 20],
        head: 0,
        last: 0,
    };
    g.bench_function("floor: two TSC reads and two 2-byte stores", |b| {
        b.iter(|| floor(black_box(7), &mut fl))
    });
    g.bench_function("traced fn, no writer", |b| b.iter(|| traced(black_box(7))));
    with_writer(
        &mut aux,
        ClockSource::Tsc,
        Start::Paused,
        Timing::Full,
        || {
            g.bench_function("traced fn, writer paused", |b| {
                b.iter(|| traced(black_box(7)))
            });
        },
    );
    with_writer(
        &mut aux,
        ClockSource::Tsc,
        Start::PausedTracked,
        Timing::Full,
        || {
            g.bench_function("traced fn, writer paused, track_paused", |b| {
                b.iter(|| traced(black_box(7)))
            });
        },
    );
    // The timing modes side by side (WriterConfig::timing), the default first.
    for (name, timing) in [
        ("traced fn, overwrite, tsc", Timing::Full),
        ("traced fn, overwrite, tsc, timing=entry", Timing::EntryOnly),
        (
            "traced fn, overwrite, tsc, timing=periodic:16",
            Timing::Periodic { every: 16 },
        ),
        (
            "traced fn, overwrite, tsc, timing=periodic:256",
            Timing::Periodic { every: 256 },
        ),
    ] {
        with_writer(&mut aux, ClockSource::Tsc, Start::Tracing, timing, || {
            g.bench_function(name, |b| b.iter(|| traced(black_box(7))));
        });
    }
    with_writer(
        &mut aux,
        ClockSource::Monotonic,
        Start::Tracing,
        Timing::Full,
        || {
            g.bench_function("traced fn, overwrite, monotonic", |b| {
                b.iter(|| traced(black_box(7)))
            });
        },
    );
    g.finish();

    let mut g = c.benchmark_group("clock");
    g.bench_function("rdtsc", |b| b.iter(clock::tsc));
    g.bench_function("clock_gettime(CLOCK_MONOTONIC)", |b| {
        b.iter(clock::monotonic_ns)
    });
    g.finish();
}

static OUTER: Probe = Probe::new("bench_outer");
static INNER: Probe = Probe::new("bench_inner");

fn decoding(c: &mut Criterion) {
    let mut aux = vec![0u8; 1 << 22];
    // SAFETY: `aux` outlives the writer, uninstalled below.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
    writer::install(WriterConfig::full_trace(region, None)).unwrap();
    for _ in 0..100_000 {
        let _o = OUTER.enter();
        for _ in 0..3 {
            let _i = INNER.enter();
        }
    }
    let end = writer::uninstall().unwrap().aux_head as usize;
    let stream = &aux[..end];
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.bench_function("decode 800k events", |b| {
        b.iter(|| decode::Decoder::new(black_box(stream)).count())
    });
    // Internal iteration, as the views decode (the event reaches the closure
    // in registers).
    g.bench_function("decode 800k events, try_each", |b| {
        b.iter(|| {
            let mut n = 0usize;
            let _ = decode::Decoder::new(black_box(stream)).try_each(|e| {
                black_box(&e);
                n += 1;
                Ok::<_, ()>(())
            });
            n
        })
    });
    // The same window read in 64 KiB pieces, as the readers decode a trace
    // section from the file.
    g.bench_function("decode 800k events, 64 KiB pieces", |b| {
        b.iter(|| decode::Decoder::from_reader(black_box(stream), 0, 64 << 10).count())
    });
    g.finish();
}

criterion_group!(benches, calls, decoding);
criterion_main!(benches);
