//! `perfaux record -- ./prog` on programs with more threads than the recording has slots
//! (crates/preload/tests/c/calls.c `serial` and `together`). A slot serves one thread at a
//! time: when its thread ends, the recorder takes its last bytes and gives it to the next, so
//! a program that makes threads one after another is traced whole (judged by uftrace's call
//! counts); only threads that start while every slot is held by a running thread go
//! untraced, and those are counted and said.

mod calls;

use std::collections::BTreeMap;

use calls::*;

/// The recording's slots (crates/cli/src/record/program.rs `SLOTS`).
const SLOTS: usize = 64;

fn build(name: &str) -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    if !perfaux_testutil::oracle("gcc") || !perfaux_testutil::oracle("uftrace") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build_calls(dir.path(), &["-finstrument-functions"], name);
    Some((dir, prog))
}

/// calls.c's arguments for `threads` threads made the way `how` says.
fn args_of(threads: usize, how: &str) -> [String; 4] {
    [threads.to_string(), "2".into(), how.into(), "nojmp".into()]
}

/// The threads with calls, and each one's call counts.
fn by_thread(calls: &[(u32, String)]) -> BTreeMap<u32, BTreeMap<String, u64>> {
    let mut m: BTreeMap<u32, BTreeMap<String, u64>> = BTreeMap::new();
    for (tid, f) in calls {
        *m.entry(*tid).or_default().entry(f.clone()).or_insert(0) += 1;
    }
    m
}

/// 3 x the slots of threads, one after another: all of them traced, every call counted as
/// uftrace counts it, in the full trace and in the flight recorder (`-S`: each thread's last
/// trace kept as a snapshot when it ends, before its slot goes to the next).
#[test]
fn threads_made_one_after_another_past_the_slots_are_all_traced() {
    let Some((dir, prog)) = build("serial_fi") else {
        return;
    };
    let d = dir.path();
    let threads = 3 * SLOTS;
    let args = args_of(threads, "serial");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let want = uftrace_counts(d, &prog, &args);
    assert_eq!(want.get("worker"), Some(&(threads as u64)), "{want:?}");
    let (out, data) = record(d, &prog, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("not traced"), "{stderr}");
    let calls = calls_by_tid(&data);
    assert_eq!(counts(&call_trace(&data)), want, "against uftrace");
    // The main thread and each worker under a tid of its own.
    assert_eq!(by_thread(&calls).len(), threads + 1);

    // -S with an area far larger than a worker's trace: each ended thread's snapshot holds
    // all its calls.
    let (out, data) = record_with(d, &prog, &args, &["-S", "-m", ",256K"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let per = by_thread(&calls_by_tid(&data));
    let workers: Vec<_> = per.values().filter(|c| c.contains_key("worker")).collect();
    assert_eq!(workers.len(), threads, "{stderr}");
    let one = workers[0];
    assert_eq!(one.get("worker"), Some(&1));
    assert_eq!(
        one.get("leaf"),
        Some(&(20 + 89)),
        "20 leaf calls and fib(10)'s 89: {one:?}"
    );
    for w in &workers {
        assert_eq!(w, &one);
    }
}

/// More threads alive at once than there are slots: the slots' threads are traced whole, the
/// others are counted and said, and the two make all of them.
#[test]
fn threads_beyond_the_slots_at_once_are_counted_and_said() {
    let Some((dir, prog)) = build("together_fi") else {
        return;
    };
    let d = dir.path();
    let threads = SLOTS + 16;
    let args = args_of(threads, "together");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, data) = record(d, &prog, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let untraced: usize = err
        .lines()
        .find_map(|l| {
            l.strip_prefix("perfaux record: warning: ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no count of untraced threads in {err}"));
    let per = by_thread(&calls_by_tid(&data));
    // The main thread holds a slot throughout: the workers had the others.
    assert_eq!(per.len(), SLOTS, "{err}");
    assert_eq!(untraced, threads + 1 - SLOTS, "{err}");
    let workers: Vec<_> = per
        .values()
        .filter(|c| c.contains_key("together_worker"))
        .collect();
    assert_eq!(workers.len(), SLOTS - 1);
    for w in workers {
        assert_eq!(w.get("together_worker"), Some(&1), "{w:?}");
        assert_eq!(w.get("leaf"), Some(&(20 + 89)), "{w:?}");
    }
}
