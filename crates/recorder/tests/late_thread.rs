//! The seam for rings that arrive while recording: a thread that appears
//! after the recording began is added with `Recorder::add_thread`, its
//! trace is drained like the first thread's, and the file lists its event
//! ids (written at finish) so that readers find its records' event.

use std::sync::mpsc;

mod common;

use perfaux_perfdata::trace_section::PERFAUX_FEATURE_BIT;
use perfaux_perfdata::{Feature, PerfDataReader};

fn late_work(n: u32) -> u32 {
    let _probe = perfaux_swtrace::probe!("late_work");
    if n == 0 { 0 } else { 1 + late_work(n - 1) }
}

#[test]
fn a_thread_added_while_recording_is_traced_and_its_ids_are_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (out, mut rec) = common::swtrace_recorder(dir.path(), "late.data", 256 << 10);
    rec.enable().unwrap();
    late_work(5);
    rec.drain().unwrap();
    // A thread that appears now.
    let (tid_tx, tid_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        tid_tx.send(perfaux_core::gettid()).unwrap();
        go_rx.recv().unwrap();
        for _ in 0..100 {
            std::hint::black_box(late_work(std::hint::black_box(20)));
        }
        done_tx.send(()).unwrap();
        // Stay alive until the events are closed.
        go_rx.recv().ok();
    });
    let late = tid_rx.recv().unwrap();
    rec.add_thread(late).unwrap();
    go_tx.send(()).unwrap();
    done_rx.recv().unwrap();
    let s = rec.finish().unwrap();
    drop(go_tx);
    t.join().unwrap();
    assert!(s.aux_bytes > 0);

    let reader = PerfDataReader::open(&out).unwrap();
    let attrs = &reader.metadata().attrs;
    assert_eq!(attrs.len(), 1);
    assert_eq!(
        attrs[0].ids.len(),
        2,
        "the late thread's event id joined the attr"
    );
    // The trace section is located, not read: its chunks are read in place.
    assert!(
        reader
            .metadata()
            .features
            .location(Feature(PERFAUX_FEATURE_BIT))
            .is_some()
    );
    let section = reader.trace_section().expect("trace section").unwrap();
    let chunks: Vec<_> = section.chunks().map(Result::unwrap).collect();
    let late_bytes: u64 = chunks
        .iter()
        .filter(|c| c.header.tid == late as u32)
        .map(|c| c.size)
        .sum();
    // 100 * 21 calls of late_work, each an ENTER and an EXIT.
    assert!(
        late_bytes > 100 * 21 * 2,
        "the late thread's trace: {late_bytes} bytes"
    );
    for c in chunks.iter().filter(|c| c.header.tid == late as u32) {
        assert!(attrs[0].ids.contains(&c.header.event_id));
    }
    perfaux_testutil::require_oracle!("perf");
    common::perf_report_d(&out, dir.path());
}
