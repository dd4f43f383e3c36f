//! Full-trace mode, transaction by transaction (perf_aux_output_begin/end in
//! kernel/events/ring_buffer.c, and the PT driver):
//!
//! - a transaction is bounded by `aux_watermark`: the trace PMU ends it
//!   (`perf_aux_output_end`: PERF_RECORD_AUX, aux_head, wakeup) once the
//!   writer crossed `handle->wakeup`, and begins the next, as PT's PMI does;
//! - when the consumer does not give space back, the last transaction is
//!   ended with PERF_AUX_FLAG_TRUNCATED and the event gets a pending
//!   disable and a wakeup; after the consumer read and re-enabled, tracing
//!   resumes;
//! - PERF_RECORD_ITRACE_START names the traced thread (the kernel logs it
//!   in `event_sched_in`, where `current` is the task scheduled in), in its
//!   body and in its `sample_id`.

mod common;

use std::sync::mpsc;

use common::*;
use perfaux_abi::attr::PerfEventAttr;
use perfaux_abi::consts::*;
use perfaux_core::{EventState, Target, perf_event_open_attr};
use perfaux_swtrace::Event as Packet;

fn wm_call(i: u64) -> u64 {
    let _g = perfaux_swtrace::probe!("wm_call");
    i ^ 1
}

/// (aux_offset, aux_size, flags) of every PERF_RECORD_AUX published.
fn aux_records(t: &mut Traced) -> Vec<(u64, u64, u64)> {
    records(&mut t.data)
        .into_iter()
        .filter(|(h, _)| h.type_ == PERF_RECORD_AUX)
        .map(|(_, b)| (u64_at(&b, 8), u64_at(&b, 16), u64_at(&b, 24)))
        .collect()
}

/// Records tile the stream: each starts where the previous one ended,
/// the first at `from`. Returns the end.
fn assert_tiled(recs: &[(u64, u64, u64)], from: u64) -> u64 {
    let mut at = from;
    for (i, &(offset, size, _)) in recs.iter().enumerate() {
        assert_eq!(offset, at, "record {i} of {recs:?} does not follow on");
        at += size;
    }
    at
}

/// Skipped stretches in a decoded window: there must be none when the
/// window holds every byte the writer wrote.
fn skipped(events: &[Packet]) -> Vec<&Packet> {
    events
        .iter()
        .filter(|e| matches!(e, Packet::Skipped { .. }))
        .collect()
}

fn entered_names(events: &[Packet]) -> Vec<String> {
    let table = perfaux_swtrace::probe_table();
    events
        .iter()
        .filter_map(|e| match e {
            Packet::Enter { id, .. } => table.get(*id).map(|p| p.name.clone()),
            _ => None,
        })
        .collect()
}

/// A thread to trace, run by commands from the test (the recorder): its
/// tid, and "make n calls" requests answered when done.
struct Worker {
    tid: i32,
    run: mpsc::Sender<u64>,
    done: mpsc::Receiver<()>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Worker {
    fn spawn() -> Worker {
        let (tid_tx, tid_rx) = mpsc::channel();
        let (run, run_rx) = mpsc::channel::<u64>();
        let (done_tx, done) = mpsc::channel();
        let handle = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            tid_tx.send(tid).unwrap();
            let mut acc = 0;
            while let Ok(n) = run_rx.recv() {
                for i in 0..n {
                    acc += wm_call(i);
                }
                std::hint::black_box(acc);
                done_tx.send(()).unwrap();
            }
        });
        Worker {
            tid: tid_rx.recv().unwrap(),
            run,
            done,
            handle: Some(handle),
        }
    }

    fn calls(&self, n: u64) {
        self.run.send(n).unwrap();
        self.done.recv().unwrap();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let (tx, _) = mpsc::channel();
        self.run = tx;
        if let Some(h) = self.handle.take() {
            h.join().unwrap();
        }
    }
}

fn open_on(a: &PerfEventAttr, tid: i32, aux_pages: usize) -> Traced {
    let ev = perf_event_open_attr(a, Target::Thread(tid), -1, -1, 0).unwrap();
    map_trace(ev, aux_pages, false)
}

/// The consumer does not read: the writer fills the area, the last
/// transaction ends TRUNCATED, the event is disabled (pending disable);
/// every byte before the TRUNCATED record decodes. After the consumer read
/// and re-enabled, tracing resumes from where the stream stopped.
#[test]
fn full_area_ends_truncated_and_resumes_after_read() {
    perfaux_pmus::register();
    let w = Worker::spawn();
    let mut t = open_on(&trace_attr(), w.tid, 1);
    let wakeups = t.data.buffer().data().wakeup().count();
    t.ev.enable(0).unwrap();
    w.calls(10_000);
    assert_eq!(t.ev.event().state(), EventState::Off, "pending disable");
    // perf_aux_output_end with TRUNCATED wakes the consumer.
    assert!(t.data.buffer().data().wakeup().count() > wakeups, "woken");

    let recs = aux_records(&mut t);
    let (last, before) = recs.split_last().expect("PERF_RECORD_AUX records");
    assert_ne!(
        last.2 & PERF_AUX_FLAG_TRUNCATED,
        0,
        "the transaction that ran out of space is TRUNCATED: {recs:?}"
    );
    assert!(
        before.iter().all(|r| r.2 == 0),
        "only the last one is flagged: {recs:?}"
    );
    let end = assert_tiled(&recs, 0);
    // Looked at without consuming: the tail stays, the area stays full.
    let aux = t.aux.aux_reader().unwrap();
    assert_eq!(aux.aux_head(), end, "the records cover the data");
    assert!(end > 3000 && end <= 4096, "the area was filled: {end}");
    let mut window = Vec::new();
    aux.copy(0, end, &mut window).unwrap();
    let events = perfaux_swtrace::decode(&window);
    assert_eq!(skipped(&events), Vec::<&Packet>::new());
    let calls = entered_names(&events);
    assert!(calls.len() > 100 && calls.len() < 10_000);
    assert!(calls.iter().all(|n| n == "wm_call"));

    // Re-enabled before the consumer read: perf_aux_output_begin finds no
    // space for the stream to go on (perf_aux_output_begin: pending disable
    // and a wakeup), and whatever it reports says TRUNCATED and holds no data.
    let wakeups = t.data.buffer().data().wakeup().count();
    t.ev.enable(0).unwrap();
    w.calls(10);
    assert_eq!(t.ev.event().state(), EventState::Off, "still no space");
    assert!(t.data.buffer().data().wakeup().count() > wakeups, "woken");
    let again = aux_records(&mut t);
    assert!(
        again
            .iter()
            .all(|r| r.0 == end && r.1 == 0 && r.2 == PERF_AUX_FLAG_TRUNCATED),
        "{again:?}"
    );
    let data = t.aux.aux_reader().unwrap().read().unwrap();
    assert_eq!(data.offset, 0);
    assert_eq!(data.data.len() as u64, end, "nothing written meanwhile");

    // The consumer gave the space back; the user re-enables.
    t.ev.enable(0).unwrap();
    assert_eq!(t.ev.event().state(), EventState::Active);
    w.calls(20);
    t.ev.disable(0).unwrap();
    let more = aux_records(&mut t);
    assert!(!more.is_empty());
    assert!(more.iter().all(|r| r.2 & PERF_AUX_FLAG_TRUNCATED == 0));
    let end2 = assert_tiled(&more, end);
    let data = t.aux.aux_reader().unwrap().read().unwrap();
    assert_eq!(data.offset, end);
    assert_eq!(end + data.data.len() as u64, end2);
    let events = perfaux_swtrace::decode(data.data);
    assert_eq!(skipped(&events), Vec::<&Packet>::new());
    assert_eq!(entered_names(&events), vec!["wm_call"; 20]);
}

/// The consumer reads the full area and does nothing else: the trace resumes by itself, as a
/// driver restarts at its next `perf_aux_output_begin` (no re-enable). The stopped writer asks
/// again within `FULL_RETRY_EVERY` dropped events; the event is active again, the TRUNCATED
/// record stays for the gap, the next transaction starts where the trace stopped, and the
/// stream goes on with LOST (the dropped events) and a SYNC: the calls after the gap decode.
#[test]
fn a_truncated_trace_resumes_once_the_consumer_made_room() {
    perfaux_pmus::register();
    let w = Worker::spawn();
    let mut t = open_on(&trace_attr(), w.tid, 1);
    t.ev.enable(0).unwrap();
    w.calls(10_000);
    assert_eq!(t.ev.event().state(), EventState::Off, "pending disable");
    let recs = aux_records(&mut t);
    let last = recs.last().expect("PERF_RECORD_AUX records");
    assert_ne!(last.2 & PERF_AUX_FLAG_TRUNCATED, 0, "{recs:?}");
    let end = assert_tiled(&recs, 0);
    let before = t.aux.aux_reader().unwrap().read().unwrap().data.to_vec();
    assert_eq!(before.len() as u64, end, "the consumer read it all");

    // Each call is two events: a retry comes within these, and the area (4 KiB) holds what
    // follows it.
    w.calls(perfaux_swtrace::writer::FULL_RETRY_EVERY / 2);
    assert_eq!(
        t.ev.event().state(),
        EventState::Active,
        "tracing resumed without a re-enable"
    );
    w.calls(200);
    t.ev.disable(0).unwrap();
    let more = aux_records(&mut t);
    assert!(!more.is_empty());
    assert!(
        more.iter().all(|r| r.2 & PERF_AUX_FLAG_TRUNCATED == 0),
        "{more:?}"
    );
    let end2 = assert_tiled(&more, end);
    let after = t.aux.aux_reader().unwrap().read().unwrap();
    assert_eq!(after.offset, end, "the stream goes on where it stopped");
    assert_eq!(end + after.data.len() as u64, end2);

    // The whole stream: no skipped byte, the loss said, calls after it.
    let mut whole = before;
    whole.extend_from_slice(after.data);
    let events = perfaux_swtrace::decode(&whole);
    assert_eq!(skipped(&events), Vec::<&Packet>::new());
    let lost_at = events
        .iter()
        .position(|e| {
            matches!(e, Packet::Lost { kind, count, offset, .. }
                if *kind == perfaux_swtrace::format::LostKind::Full && *count > 0 && *offset == end)
        })
        .expect("a LOST packet for the dropped events where the stream stopped");
    assert!(
        matches!(events[lost_at + 1], Packet::Sync { .. }),
        "a SYNC re-anchors after the gap"
    );
    let resumed = entered_names(&events[lost_at..]);
    assert!(
        resumed.len() >= 200,
        "{} calls after the gap",
        resumed.len()
    );
    assert!(resumed.iter().all(|n| n == "wm_call"));
}

/// A consumer that keeps up: one transaction per watermark (PT's PMI at
/// `handle->wakeup`), records tiling the stream with no gap and no
/// TRUNCATED, a wakeup per watermark crossed, the whole trace decodable.
#[test]
fn watermark_bounds_each_transaction_when_the_consumer_keeps_up() {
    perfaux_pmus::register();
    // Not a divisor of the area, so that a transaction ending at the end
    // of its space is told from one ending at the watermark.
    const WM: u64 = 3000;
    // The writer may finish the packet that crosses the watermark (and a
    // SYNC with it) before the transaction ends.
    const SLACK: u64 = 256;
    let mut a = trace_attr();
    a.aux_watermark = WM as u32;
    let w = Worker::spawn();
    let mut t = open_on(&a, w.tid, 4);
    let wakeups = t.data.buffer().data().wakeup().count();
    t.ev.enable(0).unwrap();
    let mut chunks: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut n_calls = 0;
    for _ in 0..80 {
        w.calls(300);
        n_calls += 300;
        let r = t.aux.aux_reader().unwrap().read().unwrap();
        if !r.data.is_empty() {
            chunks.push((r.offset, r.data.to_vec()));
        }
    }
    assert_eq!(t.ev.event().state(), EventState::Active, "never ran out");
    let woken = t.data.buffer().data().wakeup().count() - wakeups;
    t.ev.disable(0).unwrap();
    let r = t.aux.aux_reader().unwrap().read().unwrap();
    if !r.data.is_empty() {
        chunks.push((r.offset, r.data.to_vec()));
    }

    let recs = aux_records(&mut t);
    assert!(
        recs.iter().all(|r| r.2 == 0),
        "no TRUNCATED, no other flag: {recs:?}"
    );
    let total = assert_tiled(&recs, 0);
    let read: u64 = chunks.iter().map(|c| c.1.len() as u64).sum();
    assert_eq!(read, total, "the records cover every byte read");
    assert!(total > 4 * 16384, "the stream wrapped the area: {total}");
    let (_, ended_by_writer) = recs.split_last().unwrap();
    for &(offset, size, _) in ended_by_writer {
        let end = offset + size;
        assert!(
            end / WM > offset / WM && end % WM < SLACK,
            "a transaction ends just past the watermark it crossed: {offset}+{size}"
        );
    }
    assert!(
        ended_by_writer.len() as u64 >= total / WM - 1,
        "one transaction per watermark: {} for {total} bytes",
        ended_by_writer.len()
    );
    // rb_need_aux_wakeup: one wakeup per watermark crossed (the data area,
    // far from its own watermark, adds none).
    assert!(
        u64::from(woken) >= total / WM - 1,
        "{woken} wakeups for {total} bytes"
    );

    let events = perfaux_swtrace::decode_chunks(chunks.iter().map(|(o, d)| (*o, d.as_slice())));
    assert_eq!(skipped(&events), Vec::<&Packet>::new());
    let calls = entered_names(&events);
    assert_eq!(calls.len(), n_calls, "every call traced");
    assert!(
        !events.iter().any(|e| matches!(e, Packet::Lost { .. })),
        "nothing lost"
    );
}

/// ITRACE_START is the traced thread's: the recorder (this thread) opens,
/// maps and enables; the record's pid/tid and its sample_id's pid/tid are
/// the worker's.
#[test]
fn itrace_start_names_the_traced_thread() {
    perfaux_pmus::register();
    let w = Worker::spawn();
    let me = std::process::id();
    // SAFETY: gettid has no preconditions.
    assert_ne!(unsafe { libc::gettid() }, w.tid);
    let mut t = open_on(&trace_attr(), w.tid, 1);
    t.ev.enable(0).unwrap();
    w.calls(3);
    t.ev.disable(0).unwrap();
    let starts: Vec<Vec<u8>> = records(&mut t.data)
        .into_iter()
        .filter(|(h, _)| h.type_ == PERF_RECORD_ITRACE_START)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(starts.len(), 1, "logged once, at the first sched_in");
    let b = &starts[0];
    // Body {pid, tid}, then sample_id {pid, tid}, time, identifier
    // (trace_attr's sample_type: TID | TIME | IDENTIFIER).
    assert_eq!((u32_at(b, 8), u32_at(b, 12)), (me, w.tid as u32), "body");
    assert_eq!(
        (u32_at(b, 16), u32_at(b, 20)),
        (me, w.tid as u32),
        "sample_id"
    );
    assert_eq!(u64_at(b, 32), t.ev.id(), "sample_id identifier");
    let data = t.aux.aux_reader().unwrap().read().unwrap();
    assert_eq!(
        entered_names(&perfaux_swtrace::decode(data.data)),
        vec!["wm_call"; 3]
    );
}

/// The same with a per-CPU buffer (the event counts on CPU 0), which the
/// recorder's enable writes into from its own thread: the sample_id still
/// names the traced thread.
#[test]
fn itrace_start_names_the_traced_thread_in_a_per_cpu_buffer() {
    perfaux_pmus::register();
    let w = Worker::spawn();
    let ev = perf_event_open_attr(&trace_attr(), Target::Thread(w.tid), 0, -1, 0).unwrap();
    let mut t = map_trace(ev, 1, false);
    t.ev.enable(0).unwrap();
    w.calls(3);
    t.ev.disable(0).unwrap();
    let starts: Vec<Vec<u8>> = records(&mut t.data)
        .into_iter()
        .filter(|(h, _)| h.type_ == PERF_RECORD_ITRACE_START)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(starts.len(), 1);
    let me = std::process::id();
    let b = &starts[0];
    assert_eq!((u32_at(b, 8), u32_at(b, 12)), (me, w.tid as u32), "body");
    assert_eq!(
        (u32_at(b, 16), u32_at(b, 20)),
        (me, w.tid as u32),
        "sample_id"
    );
}
