//! Seeds 000 and 001 (mainline's PERF_SAMPLE_AUX, v5.5): samples of a probe-count event
//! carry the last N bytes of trace (PERF_SAMPLE_AUX), which decode to the
//! calls just before the sample; the sampler is found through the group
//! leader (mainline) or through PERF_FLAG_FD_SAMPLE (seed 000); a sampler
//! that is not active, or traces another thread, gives size 0.

mod common;

use common::*;
use perfaux_abi::consts::*;
use perfaux_core::{Target, perf_event_open_attr};
use perfaux_pmus::PROBE_TYPE;
use perfaux_pmus::probe::resolve_probe;

fn s1_work_a(i: u64) -> u64 {
    let _g = perfaux_swtrace::probe!("s1_work_a");
    i + 1
}
fn s1_work_b(i: u64) -> u64 {
    let _g = perfaux_swtrace::probe!("s1_work_b");
    i * 2
}
fn s1_hit() {
    let _g = perfaux_swtrace::probe!("s1_hit");
}

const SAMPLE_SIZE: u32 = 1024;

fn sampler_attr() -> perfaux_abi::attr::PerfEventAttr {
    let mut s = sampling(PROBE_TYPE, resolve_probe("s1_hit"), 10);
    s.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_AUX;
    s.aux_sample_size = SAMPLE_SIZE;
    s
}

/// (ip, tid, aux bytes) of every SAMPLE.
fn samples(t: &mut Traced) -> Vec<(u64, u32, Vec<u8>)> {
    records(&mut t.data)
        .into_iter()
        .filter(|(h, _)| h.type_ == PERF_RECORD_SAMPLE)
        .map(|(h, b)| {
            let size = u64_at(&b, 24) as usize;
            assert_eq!(
                h.size as usize,
                32 + size,
                "header.size covers the AUX data"
            );
            (u64_at(&b, 8), u32_at(&b, 20), b[32..32 + size].to_vec())
        })
        .collect()
}

fn run(n: u64) {
    let mut acc = 0;
    for i in 0..n {
        acc += s1_work_a(i);
        acc += s1_work_b(i);
        s1_hit();
    }
    assert!(acc > 0);
}

fn check(samples: &[(u64, u32, Vec<u8>)], n: usize) {
    assert_eq!(samples.len(), n);
    let hit_ip =
        perfaux_swtrace::probe_by_id(perfaux_swtrace::ProbeId(resolve_probe("s1_hit") as u32))
            .unwrap()
            .addr() as u64;
    for (ip, tid, aux) in samples {
        assert_eq!(*ip, hit_ip, "PERF_SAMPLE_IP is the probe's address");
        assert_eq!(*tid as i32, perfaux_core::gettid());
        assert_eq!(aux.len(), SAMPLE_SIZE as usize);
        let names = entered(aux);
        let tail: Vec<&str> = names.iter().rev().take(3).map(String::as_str).collect();
        // The newest calls before the sample: ..., work_a, work_b (the
        // sampled s1_hit's own ENTER comes after the hook).
        assert_eq!(&tail[..2], ["s1_work_b", "s1_work_a"], "{names:?}");
    }
}

#[test]
fn group_sampler_carries_the_newest_trace() {
    perfaux_pmus::register();
    let mut t = trace_event(&trace_attr(), 8, true);
    let s = perf_event_open_attr(
        &sampler_attr(),
        Target::current(),
        -1,
        t.ev.as_raw(),
        PERF_FLAG_FD_OUTPUT,
    )
    .unwrap();
    t.ev.enable(PERF_IOC_FLAG_GROUP).unwrap();
    run(200);
    t.ev.disable(PERF_IOC_FLAG_GROUP).unwrap();
    let got = samples(&mut t);
    check(&got, 20);
    assert_eq!(s.event().counters().aux_samples_empty, 0);
}

/// Seed 000's form: FD_SAMPLE names the sampler; with FD_NO_GROUP the
/// sampling event is in no group (alone, FD_SAMPLE also joins the group_fd's
/// group, as the seed keeps `group_leader`).
#[test]
fn fd_sample_sampler_without_grouping() {
    perfaux_pmus::register();
    let mut t = trace_event(&trace_attr(), 8, true);
    let grouped = perf_event_open_attr(
        &sampler_attr(),
        Target::current(),
        -1,
        t.ev.as_raw(),
        ext::PERF_FLAG_FD_SAMPLE,
    )
    .unwrap();
    assert!(!grouped.event().is_group_leader(), "FD_SAMPLE alone groups");
    drop(grouped);
    let s = perf_event_open_attr(
        &sampler_attr(),
        Target::current(),
        -1,
        t.ev.as_raw(),
        PERF_FLAG_FD_OUTPUT | PERF_FLAG_FD_NO_GROUP | ext::PERF_FLAG_FD_SAMPLE,
    )
    .unwrap();
    assert!(s.event().is_group_leader(), "FD_NO_GROUP: no group");
    t.ev.enable(0).unwrap();
    s.enable(0).unwrap();
    run(100);
    s.disable(0).unwrap();
    t.ev.disable(0).unwrap();
    check(&samples(&mut t), 10);
}

#[test]
fn inactive_or_foreign_sampler_gives_size_zero() {
    perfaux_pmus::register();
    let mut t = trace_event(&trace_attr(), 8, true);
    let s = perf_event_open_attr(
        &sampler_attr(),
        Target::current(),
        -1,
        t.ev.as_raw(),
        PERF_FLAG_FD_OUTPUT | PERF_FLAG_FD_NO_GROUP | ext::PERF_FLAG_FD_SAMPLE,
    )
    .unwrap();
    // The sampler (trace event) stays disabled: not ACTIVE.
    s.enable(0).unwrap();
    run(30);
    s.disable(0).unwrap();
    let got = samples(&mut t);
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|(_, _, aux)| aux.is_empty()));
    assert_eq!(s.event().counters().aux_samples_empty, 3);

    // A sampler tracing another thread: not on this thread, size 0.
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        tx.send(perfaux_core::gettid()).unwrap();
        done_rx.recv().unwrap();
    });
    let other = rx.recv().unwrap();
    let foreign = perf_event_open_attr(&trace_attr(), Target::Thread(other), -1, -1, 0).unwrap();
    let ft = map_trace(foreign, 8, true);
    // Its own buffer: SET_OUTPUT into another thread's buffer is refused.
    let s2 = perf_event_open_attr(
        &sampler_attr(),
        Target::current(),
        -1,
        ft.ev.as_raw(),
        PERF_FLAG_FD_NO_GROUP | ext::PERF_FLAG_FD_SAMPLE,
    )
    .unwrap();
    let data = s2.mmap(0, 1 + 4, perfaux_core::Prot::READ_WRITE).unwrap();
    let mut st = Traced {
        ev: s2,
        data,
        aux: ft.data,
    };
    ft.ev.enable(0).unwrap();
    st.ev.enable(0).unwrap();
    run(20);
    st.ev.disable(0).unwrap();
    ft.ev.disable(0).unwrap();
    let got = samples(&mut st);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|(_, _, aux)| aux.is_empty()));
    drop((st, ft.aux, ft.ev));
    done_tx.send(()).unwrap();
    h.join().unwrap();
}

#[test]
fn sample_never_exceeds_the_record_size_limit() {
    perfaux_pmus::register();
    // aux_sample_size far above U16_MAX: clamped to U16_MAX - header,
    // rounded down to 8 (perf_prepare_sample), and to the AUX size.
    let ev = perf_event_open_attr(&trace_attr(), Target::current(), -1, -1, 0).unwrap();
    let mut t = map_trace_sized(ev, 64, 32, true);
    let mut a = sampler_attr();
    a.aux_sample_size = 1 << 20;
    let _s = perf_event_open_attr(
        &a,
        Target::current(),
        -1,
        t.ev.as_raw(),
        PERF_FLAG_FD_OUTPUT,
    )
    .unwrap();
    t.ev.enable(PERF_IOC_FLAG_GROUP).unwrap();
    run(5000);
    t.ev.disable(PERF_IOC_FLAG_GROUP).unwrap();
    let recs = records(&mut t.data);
    let s: Vec<_> = recs
        .iter()
        .filter(|(h, _)| h.type_ == PERF_RECORD_SAMPLE)
        .collect();
    assert!(!s.is_empty());
    for (h, b) in s {
        let size = u64_at(b, 24);
        // 8 header + 8 ip + 8 tid + 8 size = 32 bytes before the data.
        assert_eq!(size, ((u16::MAX as u64 - 32) / 8) * 8);
        assert_eq!(h.size as u64, 32 + size);
        assert_eq!(size % 8, 0);
    }
}
