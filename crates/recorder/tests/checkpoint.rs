//! `Recorder::checkpoint`: a whole perf.data of what is recorded so far at the output's path
//! while the recording goes on (what an in-process flight recorder leaves when its process is
//! killed), the previous file kept as `.old` once, and the finished file in its place.

mod common;

use perfaux_swtrace::Event;

fn work(n: u32) -> u32 {
    let _probe = perfaux_swtrace::probe!("checkpointed_work");
    if n == 0 { 0 } else { 1 + work(n - 1) }
}

/// The calls of `checkpointed_work` entered in `file`'s trace, on each thread.
fn entered(file: &std::path::Path) -> Vec<(u32, usize)> {
    let mut out: Vec<(u32, usize)> = Vec::new();
    for (tid, events) in common::windows_by_thread(file) {
        let n = events
            .iter()
            .filter(|e| matches!(e, Event::Enter { .. }))
            .count();
        match out.iter_mut().find(|(t, _)| *t == tid) {
            Some((_, m)) => *m += n,
            None => out.push((tid, n)),
        }
    }
    out.sort();
    out
}

/// A flight recording of this thread's probes (64 KiB area), enabled, with its COMM record.
fn recorder(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, perfaux_recorder::Recorder) {
    let (path, mut rec) = common::swtrace_recorder_with(dir, name, 64 << 10, true);
    let tid = perfaux_core::gettid() as u32;
    perfaux_recorder::synth::synth_comm(&mut rec, std::process::id(), tid, "checkpoint").unwrap();
    rec.enable().unwrap();
    (path, rec)
}

#[test]
fn each_checkpoint_is_a_whole_file_at_the_output_and_the_finish_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ck.data");
    std::fs::write(&path, b"the user's previous recording").unwrap();
    let old = dir.path().join("ck.data.old");
    std::fs::write(&old, b"an older one").unwrap();
    let (out, mut rec) = recorder(dir.path(), "ck.data");
    assert_eq!(out, path);
    let me = perfaux_core::gettid() as u32;
    work(9);
    assert!(rec.snapshot().unwrap());
    assert!(rec.checkpoint().unwrap());
    assert_eq!(
        std::fs::read(&old).unwrap(),
        b"the user's previous recording"
    );
    assert_eq!(entered(&path), [(me, 10)]);

    // A thread added after the data began: its ids are late (written after the features and
    // pointed at by a rewritten attrs section), in the next checkpoint too; its last
    // snapshot comes through the drain after it ended.
    let late = common::thread_that_exits(&mut rec, || {
        work(4);
    }) as u32;
    rec.drain().unwrap();
    work(2);
    assert!(rec.snapshot().unwrap());
    assert!(rec.checkpoint().unwrap());
    let reader = perfaux_perfdata::PerfDataReader::open(&path).unwrap();
    assert_eq!(reader.metadata().attrs[0].ids.len(), 2);
    // The second snapshot of this thread holds its first calls again (the area was not
    // overwritten since): 10 + 13.
    let mut want = vec![(me, 23), (late, 5)];
    want.sort();
    assert_eq!(entered(&path), want);
    // The second checkpoint replaced the first: the previous file stays `.old`.
    assert_eq!(
        std::fs::read(&old).unwrap(),
        b"the user's previous recording"
    );
    if perfaux_testutil::tool_present("perf") {
        common::perf_report_d(&path, dir.path());
    }

    work(0);
    assert!(rec.snapshot().unwrap());
    let s = rec.finish().unwrap();
    assert_eq!(s.checkpoints, 2);
    // The finished file, in the checkpoint's place: this thread's three snapshots (10 + 13 +
    // 14 calls), and the ended thread's area, which the finish took again.
    let end = entered(&path);
    assert_eq!(end.iter().find(|(t, _)| *t == me), Some(&(me, 37)));
    assert!(end.iter().any(|&(t, n)| t == late && n >= 5), "{end:?}");
    assert_eq!(
        std::fs::read(&old).unwrap(),
        b"the user's previous recording"
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "nothing left beside the output: {names:?}");
    perfaux_testutil::require_oracle!("perf");
    common::perf_report_d(&path, dir.path());
}

/// A recording that never finishes (its process dies: here, dropped) leaves its last
/// checkpoint, not the previous file and not nothing.
#[test]
fn a_recording_that_does_not_finish_leaves_its_last_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut rec) = recorder(dir.path(), "kept.data");
    work(6);
    assert!(rec.snapshot().unwrap());
    assert!(rec.checkpoint().unwrap());
    work(20);
    std::mem::forget(rec);
    assert_eq!(entered(&path), [(perfaux_core::gettid() as u32, 7)]);
    let reader = perfaux_perfdata::PerfDataReader::open(&path).unwrap();
    let section = reader.trace_section().expect("trace section").unwrap();
    let begins = section
        .chunks()
        .map(Result::unwrap)
        .filter(|c| c.header.flags & perfaux_perfdata::trace_section::SNAPSHOT_BEGIN != 0)
        .count();
    assert_eq!(begins, 1, "one snapshot");
    perfaux_testutil::require_oracle!("perf");
    common::perf_report_d(&path, dir.path());
}

/// Another recording that takes the output's name between two checkpoints (its finish moves
/// this one's checkpoint to `.old` and puts its file there) is not destroyed: the next
/// checkpoint keeps it as `.old`, as the first kept the user's file, and the output's name
/// holds a whole file at every step.
#[test]
fn a_file_another_recording_put_at_the_output_is_kept_as_old() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut rec) = recorder(dir.path(), "shared.data");
    let old = dir.path().join("shared.data.old");
    work(3);
    assert!(rec.snapshot().unwrap());
    assert!(rec.checkpoint().unwrap());
    // The other recording's finish, as FileOutput::commit does it.
    std::fs::rename(&path, &old).unwrap();
    std::fs::write(&path, b"another recording").unwrap();
    work(4);
    assert!(rec.snapshot().unwrap());
    assert!(rec.checkpoint().unwrap());
    assert_eq!(std::fs::read(&old).unwrap(), b"another recording");
    assert_eq!(entered(&path), [(perfaux_core::gettid() as u32, 4 + 9)]);
    rec.finish().unwrap();
    assert_eq!(std::fs::read(&old).unwrap(), b"another recording");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "nothing left beside the output: {names:?}");
}
