//! A process whose threads come and go while it records itself (a thread per connection):
//! the recorder lets go of each ended thread's ring once it has drained its last bytes, and
//! the ring's wakeup watcher ends with it, so neither rings (a thread's mapped areas and
//! events) nor threads pile up, and every thread's whole trace is in the file. (One test in
//! this binary: it counts the process's threads.)

use std::time::Duration;

mod common;

use perfaux_swtrace::Event;

fn churn_work(n: u32) -> u32 {
    let _probe = perfaux_swtrace::probe!("churn_work");
    if n == 0 { 0 } else { 1 + churn_work(n - 1) }
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Calls of probe `id` entered per thread in `file`.
fn enters_by_thread(file: &std::path::Path, id: u32) -> std::collections::BTreeMap<u32, usize> {
    let mut by = std::collections::BTreeMap::new();
    for (tid, events) in common::windows_by_thread(file) {
        let n = events
            .iter()
            .filter(|e| matches!(e, Event::Enter { id: i, .. } if *i == id))
            .count();
        *by.entry(tid).or_default() += n;
    }
    by
}

#[test]
fn threads_that_come_and_go_leave_no_ring_or_watcher_behind_and_keep_their_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (out, mut rec) = common::swtrace_recorder(dir.path(), "churn.data", 64 << 10);
    rec.enable().unwrap();
    churn_work(1);
    rec.drain().unwrap();
    let threads_before = threads();
    let mut tids = Vec::new();
    for _ in 0..40 {
        let tid = common::thread_that_exits(&mut rec, || {
            for _ in 0..50 {
                std::hint::black_box(churn_work(std::hint::black_box(10)));
            }
        });
        rec.drain().unwrap();
        tids.push(tid as u32);
    }
    // A retired ring's watcher notices within its 50 ms wait.
    std::thread::sleep(Duration::from_millis(300));
    let threads_after = threads();
    assert!(
        threads_after <= threads_before + 1,
        "threads: {threads_before} before 40 rings came and went, {threads_after} after"
    );
    // The calling thread's ring is the one left (the process's mappings are no measure:
    // glibc keeps the stacks of ended threads for the next ones).
    assert_eq!(rec.live_rings(), 1);
    rec.finish().unwrap();
    let id = perfaux_swtrace::lookup("churn_work")[0].0;
    let by = enters_by_thread(&out, id);
    for tid in tids {
        assert_eq!(by.get(&tid), Some(&(50 * 11)), "thread {tid}: {by:?}");
    }
}
