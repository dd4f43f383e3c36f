//! Stress: several threads trace and emit uevents at once while another
//! thread takes flight-recorder snapshots of their traces (disable, read,
//! enable: remote calls into the traced threads) and drains the per-CPU
//! rings the uevents land in. Every uevent is accounted for: delivered or
//! counted lost. A second or so.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::*;
use perfaux_core::{Prot, Target, perf_event_open_attr, perf_uevent};

fn st_outer(i: u64) -> u64 {
    let _g = perfaux_swtrace::probe!("st_outer");
    st_inner(i) + st_inner(i + 1)
}
fn st_inner(i: u64) -> u64 {
    let _g = perfaux_swtrace::probe!("st_inner");
    i.rotate_left(7)
}

const WORKERS: usize = 3;

#[test]
fn concurrent_tracing_uevents_and_snapshots_account_for_every_record() {
    perfaux_pmus::register();
    let ncpu = perfaux_core::nr_cpu_ids();
    // One uevent collector per CPU: every uevent lands in exactly one.
    let mut collectors = Vec::new();
    for cpu in 0..ncpu {
        let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY);
        a.flags |= AttrFlags::UEVENTS;
        let ev = perf_event_open_attr(&a, Target::AnyThread, cpu, -1, 0).unwrap();
        let m = ev.mmap(0, 1 + 2, Prot::READ_WRITE).unwrap();
        ev.enable(0).unwrap();
        collectors.push((ev, m));
    }

    let stop = Arc::new(AtomicBool::new(false));
    let emitted = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let stop = stop.clone();
        let emitted = emitted.clone();
        let refused = refused.clone();
        let tid_tx = tid_tx.clone();
        workers.push(std::thread::spawn(move || {
            tid_tx.send(perfaux_core::gettid()).unwrap();
            let mut acc = 0u64;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                acc = acc.wrapping_add(st_outer(i));
                if i.is_multiple_of(16) {
                    let payload = [w as u8; 24];
                    // A uevent that finds its collector full is counted lost and
                    // refused with ENOSPC.
                    match perf_uevent(0x57, &payload, 0) {
                        Ok(()) => {}
                        Err(e) if e.errno == perfaux_abi::errno::ENOSPC => {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("perf_uevent: {e}"),
                    }
                    emitted.fetch_add(1, Ordering::Relaxed);
                }
                i += 1;
            }
            acc
        }));
    }
    let tids: Vec<i32> = (0..WORKERS).map(|_| tid_rx.recv().unwrap()).collect();
    let mut traces: Vec<Traced> = tids
        .iter()
        .map(|&tid| {
            let ev = perf_event_open_attr(&trace_attr(), Target::Thread(tid), -1, -1, 0).unwrap();
            let t = map_trace(ev, 4, true);
            t.ev.enable(0).unwrap();
            t
        })
        .collect();

    let mut delivered = 0u64;
    let mut drain = |collectors: &mut Vec<(perfaux_core::EventFd, perfaux_core::Mmap)>| {
        for (_, m) in collectors.iter_mut() {
            for (h, b) in records(m) {
                if h.type_ == ext::PERF_RECORD_UEVENT {
                    assert_eq!(u32_at(&b, 8), 0x57);
                    assert_eq!(u32_at(&b, 12), 24);
                    delivered += 1;
                }
            }
        }
    };
    let start = Instant::now();
    // Snapshots that hold decoded calls, per traced worker: a snapshot
    // that comes back empty or undecodable does not count.
    let mut snapshots = vec![0u32; traces.len()];
    while start.elapsed() < Duration::from_millis(800) {
        for (i, t) in traces.iter_mut().enumerate() {
            t.ev.disable(0).unwrap();
            let snap = t.aux.aux_reader().unwrap().read_snapshot(0).unwrap();
            let names = entered(snap.data);
            for name in &names {
                assert!(name == "st_outer" || name == "st_inner", "{name}");
            }
            snapshots[i] += u32::from(!names.is_empty());
            t.ev.enable(0).unwrap();
        }
        drain(&mut collectors);
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    drain(&mut collectors);
    let lost: u64 = collectors
        .iter()
        .map(|(ev, _)| ev.event().counters().lost)
        .sum();
    let emitted = emitted.load(Ordering::Relaxed);
    assert!(
        snapshots.iter().all(|&n| n > 10),
        "snapshots with calls in them, per worker: {snapshots:?}"
    );
    assert!(emitted > 100, "workers ran ({emitted})");
    assert_eq!(
        delivered + lost,
        emitted,
        "delivered {delivered} + lost {lost}"
    );
    assert_eq!(
        lost,
        refused.load(Ordering::Relaxed),
        "the uevents counted lost are those refused"
    );
    drop(traces);
}
