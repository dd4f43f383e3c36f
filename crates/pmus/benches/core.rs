//! The core's speed figures, each beside its baseline in the same run
//! (crates/core/BENCHMARKS.md):
//!
//! - `traced_call`: one call through a probe (ENTER + EXIT) into an
//!   overwrite AUX area, against the same call without a probe;
//! - `traced_paused`: the same call while the trace is paused (the default:
//!   a paused thread is not observed); `traced_paused_tracked`: paused with
//!   `swtrace/track-paused/`, which follows calls while paused;
//! - `uevent_64`: a 64-byte uevent to one event, against a `write(2)` of
//!   the same bytes to tracefs's trace_marker (or /dev/null);
//! - `aux_sample_4k`: a sample carrying 4 KiB of AUX data, against a
//!   4 KiB memcpy (into a hot buffer, and into a 64 KiB ring as the data
//!   area is), and against the same sample without AUX data (the peer that
//!   isolates what the 4 KiB cost); `sample_output_*` measure the sample
//!   path alone (the overflow path a probe hook calls), `probe_sample_*`
//!   the whole probed call that takes the sample.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use perfaux_abi::attr::{AttrBuilder, AttrFlags, AuxAction, PerfEventAttr};
use perfaux_abi::consts::*;
use perfaux_core::driver::{SampleData, perf_swevent_event};
use perfaux_core::{EventFd, Mmap, Prot, Target, page_size, perf_event_open_attr, perf_uevent};
use perfaux_pmus::probe::resolve_probe;
use perfaux_pmus::swtrace::CONFIG_TRACK_PAUSED;
use perfaux_pmus::{PROBE_TYPE, SWTRACE_TYPE};

#[inline(never)]
fn plain(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

#[inline(never)]
fn traced(x: u64) -> u64 {
    let _g = perfaux_swtrace::probe!("bench_traced");
    black_box(x).wrapping_mul(3)
}

#[inline(never)]
fn sample_point() {
    let _g = perfaux_swtrace::probe!("bench_sample_point");
}

#[inline(never)]
fn sample_point_peer() {
    let _g = perfaux_swtrace::probe!("bench_sample_point_peer");
}

fn attr(type_: u32, config: u64) -> PerfEventAttr {
    AttrBuilder::new(type_, config).build()
}

/// A trace event on this thread with an overwrite AUX area of 64 KiB and a
/// data area in overwrite mode (nobody drains it during a bench).
fn trace(start_paused: bool, config: u64) -> (EventFd, Mmap, Mmap) {
    let mut a = attr(SWTRACE_TYPE, config);
    if start_paused {
        a.aux_action = AuxAction::START_PAUSED;
    }
    let ev = perf_event_open_attr(&a, Target::current(), -1, -1, 0).unwrap();
    let data = ev.mmap(0, 1 + 16, Prot::READ_WRITE).unwrap();
    data.set_aux_area(17 * page_size() as u64, 16 * page_size() as u64)
        .unwrap();
    let aux = ev.mmap(17, 16, Prot::READ_ONLY).unwrap();
    (ev, data, aux)
}

fn calls(c: &mut Criterion) {
    perfaux_pmus::register();
    let mut g = c.benchmark_group("traced_call");
    g.bench_function("uninstrumented", |b| b.iter(|| plain(black_box(7))));
    {
        let (ev, _d, _a) = trace(false, 0);
        ev.enable(0).unwrap();
        g.bench_function("traced_overwrite", |b| b.iter(|| traced(black_box(7))));
        ev.disable(0).unwrap();
    }
    {
        let (ev, _d, _a) = trace(true, 0);
        ev.enable(0).unwrap();
        assert!(ev.event().aux_paused());
        g.bench_function("traced_paused", |b| b.iter(|| traced(black_box(7))));
        ev.disable(0).unwrap();
    }
    {
        let (ev, _d, _a) = trace(true, CONFIG_TRACK_PAUSED);
        ev.enable(0).unwrap();
        assert!(ev.event().aux_paused());
        g.bench_function("traced_paused_tracked", |b| b.iter(|| traced(black_box(7))));
        ev.disable(0).unwrap();
    }
    g.bench_function("traced_no_writer", |b| b.iter(|| traced(black_box(7))));
    g.finish();
}

fn uevents(c: &mut Criterion) {
    perfaux_pmus::register();
    let mut g = c.benchmark_group("uevent_64");
    let payload = [0x5au8; 64];
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY);
    a.flags |= AttrFlags::UEVENTS;
    let ev = perf_event_open_attr(&a, Target::current(), -1, -1, 0).unwrap();
    // Read-only data mapping: overwrite mode, no consumer needed.
    let _m = ev.mmap(0, 1 + 16, Prot::READ_ONLY).unwrap();
    ev.enable(0).unwrap();
    g.bench_function("perf_uevent", |b| {
        b.iter(|| perf_uevent(1, black_box(&payload), 0).unwrap())
    });
    ev.disable(0).unwrap();
    let (path, name) = if std::fs::metadata("/sys/kernel/tracing/trace_marker").is_ok() {
        ("/sys/kernel/tracing/trace_marker", "write_trace_marker")
    } else {
        ("/dev/null", "write_dev_null")
    };
    if let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) {
        use std::io::Write;
        let mut f = f;
        g.bench_function(name, |b| b.iter(|| f.write(black_box(&payload)).unwrap()));
    }
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .unwrap();
    g.bench_function("write_dev_null", |b| {
        use std::io::Write;
        let mut f = &null;
        b.iter(|| f.write(black_box(&payload)).unwrap())
    });
    g.finish();
}

fn aux_sample(c: &mut Criterion) {
    perfaux_pmus::register();
    let mut g = c.benchmark_group("aux_sample_4k");
    let src = vec![0x11u8; 4096];
    let mut dst = vec![0u8; 4096];
    g.bench_function("memcpy_4k", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        })
    });
    // The same copy into a 64 KiB ring, as a sample lands in the data area.
    let mut ring = vec![0u8; 64 * 1024];
    let mut at = 0;
    g.bench_function("memcpy_4k_into_64k_ring", |b| {
        b.iter(|| {
            ring[at..at + 4096].copy_from_slice(black_box(&src));
            at = (at + 4096 + 64) % (60 * 1024);
            black_box(&ring);
        })
    });
    // The same copy at the places a sample's AUX data lands: records of
    // 4112 bytes (header, aux size, 4 KiB) back to back, the data 16 bytes
    // into each, so the destination is 16-byte but not 64-byte aligned.
    let mut at = 0;
    g.bench_function("memcpy_4k_into_64k_ring_record_stride", |b| {
        b.iter(|| {
            ring[at + 16..at + 16 + 4096].copy_from_slice(black_box(&src));
            at = (at + 4112) % (60 * 1024);
            black_box(&ring);
        })
    });
    // A trace leader with a 64 KiB overwrite AUX area, full of trace.
    let (ev, _d, _a) = trace(false, 0);
    sample_point();
    sample_point_peer();
    let mut s = attr(PROBE_TYPE, resolve_probe("bench_sample_point"));
    s.sample_period = 1;
    s.sample_type = PERF_SAMPLE_AUX;
    s.aux_sample_size = 4096;
    s.flags.remove(AttrFlags::DISABLED);
    let sampler = perf_event_open_attr(&s, Target::current(), -1, ev.as_raw(), 0).unwrap();
    // The samples go to an overwrite data area of their own.
    let _sm = sampler.mmap(0, 1 + 16, Prot::READ_ONLY).unwrap();
    // A peer: the same probe and trace, a sample without AUX data.
    let mut p = attr(PROBE_TYPE, resolve_probe("bench_sample_point_peer"));
    p.sample_period = 1;
    p.sample_type = PERF_SAMPLE_IP;
    p.flags.remove(AttrFlags::DISABLED);
    let peer = perf_event_open_attr(&p, Target::current(), -1, ev.as_raw(), 0).unwrap();
    let _pm = peer.mmap(0, 1 + 16, Prot::READ_ONLY).unwrap();
    ev.enable(0).unwrap();
    for i in 0..10_000 {
        traced(i);
    }
    // The figure itself: one sample carrying 4 KiB of AUX data, produced
    // by the overflow path the probe hook calls (`perf_swevent_event`:
    // period, perf_prepare_sample, perf_output_sample with the
    // snapshot_aux copy into the data area), without the traced call and
    // the hook dispatch around it.
    let ip = sample_point as *const () as u64;
    g.bench_function("sample_output_4k_aux", |b| {
        b.iter(|| {
            let mut d = SampleData::default();
            d.ip = ip;
            perf_swevent_event(sampler.event(), 1, &mut d);
        })
    });
    g.bench_function("sample_output_no_aux", |b| {
        b.iter(|| {
            let mut d = SampleData::default();
            d.ip = ip;
            perf_swevent_event(peer.event(), 1, &mut d);
        })
    });
    // End to end: a call of a probed function whose probe hook takes the
    // sample (the traced ENTER/EXIT, the hook dispatch, the sample).
    g.bench_function("probe_sample_with_4k_aux", |b| b.iter(sample_point));
    g.bench_function("probe_sample_without_aux", |b| b.iter(sample_point_peer));
    ev.disable(0).unwrap();
    let c = sampler.event().counters();
    assert_eq!(c.aux_samples_empty, 0, "every sample carried AUX data");
    g.bench_function("probe_hit_counting_only", |b| {
        // Same probe, the sampler's leader disabled: the hook runs, no sample.
        b.iter(sample_point)
    });
    g.finish();
}

criterion_group!(benches, calls, uevents, aux_sample);
criterion_main!(benches);
