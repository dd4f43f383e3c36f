//! The control path's writes into an event that observes another thread
//! (the ioctls, perf_ioctl(); the kernel runs them on the event's CPU
//! through `event_function_call`): the overflow path of such an event
//! updates `count` and `period_left` with local operations on its thread,
//! so `PERF_EVENT_IOC_RESET` and `PERF_EVENT_IOC_PERIOD` from the control
//! thread must take effect exactly, neither lost nor mixed with the hits.

mod common;

use std::sync::mpsc;

use common::*;
use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::*;
use perfaux_core::{Prot, Target, perf_event_open_attr};
use perfaux_pmus::PROBE_TYPE;
use perfaux_pmus::probe::resolve_probe;

#[inline(never)]
fn owner_hit(i: u64) -> u64 {
    let _g = perfaux_swtrace::probe!("owner_thread_hit");
    std::hint::black_box(i) ^ 3
}

/// A thread that calls `owner_hit` `n` times for every `n` it is sent.
struct Worker {
    tid: i32,
    run: Option<mpsc::Sender<u64>>,
    done: mpsc::Receiver<()>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Worker {
    fn spawn() -> Worker {
        let (tid_tx, tid_rx) = mpsc::channel();
        let (run, run_rx) = mpsc::channel::<u64>();
        let (done_tx, done) = mpsc::channel();
        let handle = std::thread::spawn(move || {
            tid_tx.send(perfaux_core::gettid()).unwrap();
            let mut acc = 0;
            while let Ok(n) = run_rx.recv() {
                for i in 0..n {
                    acc += owner_hit(i);
                }
                std::hint::black_box(acc);
                done_tx.send(()).unwrap();
            }
        });
        Worker {
            tid: tid_rx.recv().unwrap(),
            run: Some(run),
            done,
            handle: Some(handle),
        }
    }

    fn hits(&self, n: u64) {
        self.run.as_ref().unwrap().send(n).unwrap();
        self.done.recv().unwrap();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.run.take();
        if let Some(h) = self.handle.take() {
            h.join().unwrap();
        }
    }
}

/// RESET from the control thread zeroes the count of an event that counts
/// on another thread; later hits count from zero (PERF_EVENT_IOC_RESET:
/// the count goes back to 0).
#[test]
fn reset_from_another_thread_takes_effect() {
    perfaux_pmus::register();
    let w = Worker::spawn();
    let ev = perf_event_open_attr(
        &attr(PROBE_TYPE, resolve_probe("owner_thread_hit")),
        Target::Thread(w.tid),
        -1,
        -1,
        0,
    )
    .unwrap();
    ev.enable(0).unwrap();
    w.hits(5);
    assert_eq!(ev.event().count(), 5);
    ev.reset(0).unwrap();
    assert_eq!(ev.event().count(), 0, "reset is not lost");
    w.hits(3);
    assert_eq!(ev.event().count(), 3, "hits after the reset count from 0");
    // Many rounds: every reset lands between rounds, none is lost.
    for _ in 0..20 {
        w.hits(7);
        ev.reset(0).unwrap();
        assert_eq!(ev.event().count(), 0);
    }
    ev.disable(0).unwrap();
}

/// PERIOD from the control thread re-arms the period of a sampling event
/// that hits on another thread: with the new period 2, four hits give two
/// samples (`perf_event_period` sets `period_left` to -period).
#[test]
fn period_from_another_thread_rearms_the_next_overflow() {
    perfaux_pmus::register();
    let w = Worker::spawn();
    let mut a = sampling(PROBE_TYPE, resolve_probe("owner_thread_hit"), 1000);
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_PERIOD;
    a.flags.remove(AttrFlags::DISABLED);
    let ev = perf_event_open_attr(&a, Target::Thread(w.tid), -1, -1, 0).unwrap();
    let mut m = ev.mmap(0, 1 + 4, Prot::READ_WRITE).unwrap();
    w.hits(10);
    assert_eq!(ev.event().counters().samples, 0, "period 1000 not reached");
    ev.period(2).unwrap();
    w.hits(4);
    assert_eq!(ev.event().counters().samples, 2);
    assert_eq!(ev.event().count(), 14, "every hit counted");
    // Each sample reports the period in force (PERF_SAMPLE_PERIOD).
    let samples: Vec<u64> = records(&mut m)
        .into_iter()
        .filter(|(h, _)| h.type_ == PERF_RECORD_SAMPLE)
        .map(|(_, b)| u64_at(&b, 16))
        .collect();
    assert_eq!(samples, vec![2, 2]);
}
