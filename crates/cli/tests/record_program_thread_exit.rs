//! Threads that leave through `pthread_exit` from inside traced calls
//! (crates/preload/tests/c/thread_exit.c): glibc's forced unwind walks the thread's stack, and
//! under -pg and -pg -mfentry the runtime has replaced return addresses with its trampoline,
//! which has no unwind entry: the program died of SIGSEGV until the runtime's `pthread_exit`
//! put them back first. Each thread's calls are those the program's arguments make: the
//! worker, DEPTH + 1 nested `descend` calls, and the cleanup handler the unwind runs.
//! (uftrace 0.13, the usual judge of call counts, fails on this program itself: SIGSEGV under
//! -finstrument-functions, exit 1 under -pg; so the counts come from the program's shape.)

mod calls;

use std::collections::BTreeMap;

use calls::*;

const THREADS: u64 = 3;
const DEPTH: u64 = 5;

#[test]
fn pthread_exit_through_traced_frames_keeps_the_program_and_its_calls() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    let args = [THREADS.to_string(), DEPTH.to_string()];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let expected_out = format!("{THREADS} threads left through pthread_exit, {THREADS} cleanups\n");
    for (flags, name) in [
        (&["-finstrument-functions"][..], "te_fi"),
        (&["-pg"][..], "te_pg"),
        (&["-pg", "-mfentry"][..], "te_fentry"),
    ] {
        let prog = build_c(dir.path(), "thread_exit.c", flags, name);
        let (out, data) = record(dir.path(), &prog, &args);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            expected_out,
            "{name}: the program's output"
        );
        let calls = calls_by_tid(&data);
        let mut per_thread: BTreeMap<u32, BTreeMap<String, u64>> = BTreeMap::new();
        for (tid, f) in &calls {
            *per_thread
                .entry(*tid)
                .or_default()
                .entry(f.clone())
                .or_insert(0) += 1;
        }
        let workers: Vec<_> = per_thread
            .values()
            .filter(|m| m.contains_key("worker"))
            .collect();
        assert_eq!(workers.len() as u64, THREADS, "{name}: {calls:?}");
        let want: BTreeMap<String, u64> = [
            ("cleanup".to_string(), 1),
            ("descend".to_string(), DEPTH + 1),
            ("worker".to_string(), 1),
        ]
        .into();
        for w in workers {
            assert_eq!(*w, want, "{name}: one thread's calls");
        }
        let mains = calls.iter().filter(|(_, f)| f == "main").count();
        assert_eq!(mains, 1, "{name}: {calls:?}");
    }
}
