//! A traced thread that exits while the recording goes on keeps its trace: the core's task
//! exit (`perf_event_exit_task`) stops its events on the exiting thread, so the trace PMU ends
//! its AUX transaction and the bytes written so far are published with their PERF_RECORD_AUX,
//! as the kernel does at `do_exit`. Without it the exited thread's trace was freed unpublished
//! and the file held none of it, with no word of the loss.

mod common;

use perfaux_swtrace::Event;

fn exit_work(n: u32) -> u32 {
    let _probe = perfaux_swtrace::probe!("exit_work");
    if n == 0 { 0 } else { 1 + exit_work(n - 1) }
}

/// Calls entered and returned in the trace of thread `tid` in `file`, for probe `id`.
fn calls_of(file: &std::path::Path, tid: i32, id: u32) -> (usize, usize) {
    let (mut enters, mut exits) = (0, 0);
    for (_, events) in common::windows_by_thread(file)
        .into_iter()
        .filter(|(t, _)| *t == tid as u32)
    {
        let mut depth_of_ours = Vec::new();
        for e in events {
            match e {
                Event::Enter { id: i, .. } => {
                    depth_of_ours.push(i == id);
                    enters += usize::from(i == id);
                }
                Event::Exit { .. } => {
                    exits += usize::from(depth_of_ours.pop() == Some(true));
                }
                _ => {}
            }
        }
    }
    (enters, exits)
}

/// Runs 100 trees of 21 `exit_work` calls on a thread added to `rec`, which then exits; returns its tid.
fn thread_that_exits(rec: &mut perfaux_recorder::Recorder) -> i32 {
    common::thread_that_exits(rec, || {
        for _ in 0..100 {
            std::hint::black_box(exit_work(std::hint::black_box(20)));
        }
    })
}

#[test]
fn a_thread_that_exits_while_recording_keeps_its_whole_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (out, mut rec) = common::swtrace_recorder(dir.path(), "exit.data", 1 << 20);
    rec.enable().unwrap();
    let tid = thread_that_exits(&mut rec);
    // The recording goes on after the thread is gone: drains, then the end.
    rec.drain().unwrap();
    let s = rec.finish().unwrap();
    assert!(s.aux_bytes > 0);
    let id = perfaux_swtrace::lookup("exit_work")[0].0;
    assert_eq!(calls_of(&out, tid, id), (2100, 2100));
    perfaux_testutil::require_oracle!("perf");
    common::perf_report_d(&out, dir.path());
}

#[test]
fn a_snapshot_after_a_thread_exited_holds_its_last_calls() {
    let dir = tempfile::tempdir().unwrap();
    let (out, mut rec) = common::swtrace_recorder_with(dir.path(), "exit_snap.data", 1 << 20, true);
    rec.enable().unwrap();
    let tid = thread_that_exits(&mut rec);
    assert!(rec.snapshot().unwrap(), "the snapshot was taken");
    rec.finish().unwrap();
    let id = perfaux_swtrace::lookup("exit_work")[0].0;
    // The area (1 MiB) holds every call: the snapshot has them all.
    assert_eq!(calls_of(&out, tid, id), (2100, 2100));
}
