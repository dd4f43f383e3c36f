//! `perfaux record -- ./prog` on programs with many threads (crates/preload/tests/c/calls.c
//! `serial` and `together`). A slot serves one thread at a time: the recorder makes more as the
//! program's threads take them (a thousand at once, under the usual soft limit of 1024
//! descriptors), and when a thread ends it takes its last bytes and gives the slot to the next.
//! With `--max-threads N` (the tests below use the 64 slots made before the program starts),
//! a program that makes threads one after another is still traced whole (judged by uftrace's
//! call counts); only threads that start while N are traced go untraced, counted and said.

mod calls;

use std::collections::BTreeMap;

use calls::*;

/// The recording's slots made before the program starts (perfaux-preload `program::SLOTS`),
/// kept as the most with `--max-threads` where a test is about giving slots back.
const SLOTS: usize = 64;
/// `--max-threads` at [`SLOTS`].
const AT_SLOTS: [&str; 2] = ["--max-threads", "64"];

/// Records with the most threads at once at [`SLOTS`].
fn record_at_slots(
    d: &std::path::Path,
    prog: &std::path::Path,
    args: &[&str],
    opts: &[&str],
) -> (std::process::Output, std::path::PathBuf) {
    let opts: Vec<&str> = AT_SLOTS.iter().chain(opts).copied().collect();
    record_with(d, prog, args, &opts, &[])
}

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
    let (out, data) = record_at_slots(d, &prog, &args, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("not traced"), "{stderr}");
    let calls = calls_by_tid(&data);
    assert_eq!(counts(&call_trace(&data)), want, "against uftrace");
    // The main thread and each worker under a tid of its own.
    assert_eq!(by_thread(&calls).len(), threads + 1);

    // -S with an area far larger than a worker's trace: each ended thread's snapshot holds
    // all its calls.
    let (out, data) = record_at_slots(d, &prog, &args, &["-S", "-m", ",256K"]);
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
    let (out, data) = record_at_slots(d, &prog, &args, &[]);
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

/// `perfaux record` with its soft RLIMIT_NOFILE at 1024 (a desktop session's default; the
/// hard limit as it is), from `dir`.
fn record_under_1024_descriptors(
    dir: &std::path::Path,
    command: &[&str],
    opts: &[&str],
    data: &std::path::Path,
) -> std::process::Output {
    std::process::Command::new("sh")
        .current_dir(dir)
        .arg("-c")
        .arg(r#"ulimit -Sn 1024 && exec "$0" "$@""#)
        .arg(PERFAUX)
        .arg("record")
        .args(opts)
        .arg("-o")
        .arg(data)
        .arg("--")
        .args(command)
        .output()
        .expect("perfaux record under sh")
}

/// A thousand threads alive at once, past the 64 slots made before the program starts and
/// with two descriptors a slot past a soft limit of 1024: the recorder makes the rings as the
/// threads come, so every thread is traced whole, and the summary says how many at once and
/// what their rings cost.
#[test]
fn a_thousand_threads_at_once_are_all_traced() {
    let Some((dir, prog)) = build("thousand_fi") else {
        return;
    };
    let d = dir.path();
    let threads = 1000;
    let args = args_of(threads, "together");
    let data = d.join("thousand.data");
    let mut command = vec![prog.to_str().unwrap()];
    command.extend(args.iter().map(String::as_str));
    let out = record_under_1024_descriptors(d, &command, &["-m", ",64K"], &data);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Two descriptors a ring in the recorder: a host whose hard limit leaves no room for a
    // thousand rings must say so, with the reason, and trace what it could.
    let hard: u64 = std::process::Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(u64::MAX);
    if hard < 2 * threads as u64 + 512 {
        assert!(
            err.contains("the most the recorder could make rings for") && err.contains("EMFILE"),
            "a hard limit of {hard} descriptors: {err}"
        );
        eprintln!("not all judged: a hard RLIMIT_NOFILE of {hard} holds too few rings");
        return;
    }
    assert!(!err.contains("not traced"), "{err}");
    let per = by_thread(&calls_by_tid(&data));
    assert_eq!(per.len(), threads + 1, "{err}");
    let workers: Vec<_> = per
        .values()
        .filter(|c| c.contains_key("together_worker"))
        .collect();
    assert_eq!(workers.len(), threads);
    for w in workers {
        assert_eq!(w.get("together_worker"), Some(&1), "{w:?}");
        assert_eq!(w.get("leaf"), Some(&(20 + 89)), "{w:?}");
    }
    let line = err
        .lines()
        .find(|l| l.contains("threads traced"))
        .unwrap_or_else(|| panic!("no line of threads in {err}"));
    let word_after = |w: &str| -> usize {
        let at = line.find(w).unwrap_or_else(|| panic!("{w} in {line}")) + w.len();
        line[at..]
            .split(|c: char| !c.is_ascii_digit())
            .find(|t| !t.is_empty())
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(word_after("record: "), threads + 1, "{line}");
    // Every thread waits at the barrier until the last one came: all held their slots at
    // once, and as many rings were made.
    assert_eq!(word_after("at most "), threads + 1, "{line}");
    assert!(word_after("at once; ") > threads, "{line}");
    assert!(line.contains("MiB of memory in use"), "{line}");
}

/// The program runs with the descriptor limit it was given: the recorder raises only its own
/// (for the slots' rings).
#[test]
fn the_program_keeps_its_own_descriptor_limit() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("limit.data");
    let out = record_under_1024_descriptors(dir.path(), &["sh", "-c", "ulimit -Sn"], &[], &data);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "1024",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Twenty thousand threads one after another, with no limit of threads: every one traced
/// whole, each under a tid of its own, in a few rings given from thread to thread.
#[test]
fn twenty_thousand_threads_one_after_another_are_all_traced() {
    let Some((dir, prog)) = build("twenty_thousand_fi") else {
        return;
    };
    let d = dir.path();
    let threads = 20_000;
    let args = args_of(threads, "serial");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, data) = record_with(d, &prog, &args, &["-m", "64K,64K"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("not traced"), "{err}");
    assert!(err.contains(" 0 lost,"), "{err}");
    let per = by_thread(&calls_by_tid(&data));
    assert_eq!(per.len(), threads + 1, "{err}");
    let workers: Vec<_> = per.values().filter(|c| c.contains_key("worker")).collect();
    assert_eq!(workers.len(), threads);
    for w in workers {
        assert_eq!(w.get("worker"), Some(&1), "{w:?}");
        assert_eq!(w.get("leaf"), Some(&(20 + 89)), "{w:?}");
    }
}

/// More children than slots, and than the ring of forked children holds, one after another,
/// each traced before it execs an instrumented image (a test driver running its tests): the
/// old image's slot is freed when the new image's thread appears (exec ends the old image's
/// threads without their destructors), so every image is traced whole, with uftrace's call
/// counts, and no thread is said untraced.
#[test]
fn the_images_of_more_children_than_slots_are_all_traced() {
    let Some((dir, prog)) = build("forkexecs_fi") else {
        return;
    };
    let d = dir.path();
    // Past the ring of 1024 forked children (crates/preload/src/shared.rs MAX_CHILDREN).
    let children = 1024 + SLOTS;
    let args = args_of(children, "forkexecs");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let image = uftrace_counts(d, &prog, &["0", "2", "nojmp"]);
    let (out, data) = record_at_slots(d, &prog, &args, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("not traced"), "{stderr}");
    let per = by_thread(&calls_by_tid(&data));
    // Each child's thread: the calls open at the fork (main, on_the_way, boom: entered again
    // in its trace) and its leaf() before the exec, then the image's calls.
    let mut child = image.clone();
    for f in ["main", "on_the_way", "boom", "leaf"] {
        *child.entry(f.to_owned()).or_insert(0) += 1;
    }
    let children_traced = per.values().filter(|c| **c == child).count();
    assert_eq!(children_traced, children, "{stderr}\n{per:?}");
    assert_eq!(per.len(), children + 1, "the children and the parent");

    // -S: each old image's newest trace is taken as it goes (its last snapshot), the new
    // image's as it ends.
    let children = 2 * SLOTS;
    let args = args_of(children, "forkexecs");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, data) = record_at_slots(d, &prog, &args, &["-S", "-m", ",256K"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("not traced"), "{stderr}");
    let per = by_thread(&calls_by_tid(&data));
    let children_traced = per.values().filter(|c| **c == child).count();
    assert_eq!(children_traced, children, "-S: {stderr}\n{per:?}");
}

/// An exec'd image whose worker is traced before its main thread (crates/preload/tests/c/
/// exec_workers.c): the main thread's arrival frees only the old image's slot, never the
/// worker's, whose 200 calls all stay in its trace; the new image's main thread is traced.
#[test]
fn an_exec_frees_only_the_old_images_slots() {
    if !perfaux_testutil::oracle("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let prog = build_c(
        d,
        "exec_workers.c",
        &["-finstrument-functions"],
        "exec_workers",
    );
    let (out, data) = record(d, &prog, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let per = by_thread(&calls_by_tid(&data));
    let worker = per
        .values()
        .find(|c| c.contains_key("worker"))
        .unwrap_or_else(|| panic!("no worker in {per:?}"));
    assert_eq!(worker.get("leaf"), Some(&200), "{per:?}");
    let main: BTreeMap<String, u64> = per
        .values()
        .flat_map(|c| c.iter())
        .filter(|(f, _)| ["first", "second"].contains(&f.as_str()))
        .map(|(f, n)| (f.clone(), *n))
        .collect();
    assert_eq!(main.get("first"), Some(&1), "the old image: {per:?}");
    assert_eq!(main.get("second"), Some(&1), "the new image: {per:?}");
}

/// Children that end without their threads' destructors (calls.c `forkends`: a child's traced
/// worker still runs when the child `_exit`s, `exit`s from its main thread or is killed by
/// SIGKILL), twice as many threads as slots: the recorder sees each process end (its pidfd)
/// and gives its slots to the next, so every child's two threads are traced whole (the calls
/// made after the fork counted as uftrace counts them), each with a PERF_RECORD_EXIT that perf
/// reads; in -S too.
#[test]
fn processes_that_end_without_destructors_give_their_slots_back() {
    let Some((dir, prog)) = build("forkends_fi") else {
        return;
    };
    let d = dir.path();
    let children = SLOTS;
    let args = args_of(children, "forkends");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut main = BTreeMap::new();
    // The calls open at the fork (entered again in the child's trace), then its own.
    for f in ["main", "on_the_way", "boom", "child_ends", "leaf"] {
        main.insert(f.to_owned(), 1);
    }
    let worker: BTreeMap<String, u64> = [("stuck_worker".to_owned(), 1), ("leaf".to_owned(), 1)]
        .into_iter()
        .collect();
    // uftrace counts the calls open at a fork once; perfaux enters them again in the child.
    let after_fork = |c: &BTreeMap<String, u64>| -> BTreeMap<String, u64> {
        c.iter()
            .filter(|(f, _)| !["main", "on_the_way", "boom"].contains(&f.as_str()))
            .map(|(f, n)| (f.clone(), *n))
            .collect()
    };
    let want = after_fork(&uftrace_counts(d, &prog, &args));
    assert_eq!(want.get("child_ends"), Some(&(children as u64)), "{want:?}");
    for opts in [&[][..], &["-S", "-m", ",256K"][..]] {
        let (out, data) = record_at_slots(d, &prog, &args, opts);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{opts:?}: {stderr}");
        assert!(!stderr.contains("not traced"), "{opts:?}: {stderr}");
        let per = by_thread(&calls_by_tid(&data));
        let mains = per.values().filter(|c| **c == main).count();
        let workers = per.values().filter(|c| **c == worker).count();
        assert_eq!((mains, workers), (children, children), "{opts:?}: {per:?}");
        assert_eq!(
            per.len(),
            2 * children + 1,
            "{opts:?}: the children and the parent"
        );
        if opts.is_empty() {
            assert_eq!(
                after_fork(&counts(&call_trace(&data))),
                want,
                "against uftrace"
            );
        }
        if !perfaux_testutil::oracle("perf") {
            continue;
        }
        let events = perf_task_events(&data);
        // "PERF_RECORD_EXIT(PID:TID):(PPID:PTID)": one per thread, the parent's too.
        let mut exits: Vec<&str> = events
            .lines()
            .filter_map(|l| l.split_once("PERF_RECORD_EXIT(")?.1.split_once(')'))
            .map(|(task, _)| task)
            .collect();
        let all = exits.len();
        exits.sort_unstable();
        exits.dedup();
        assert_eq!(
            (all, exits.len()),
            (2 * children + 1, 2 * children + 1),
            "{opts:?}"
        );
    }
}

/// Slots held by processes that died together and are not reaped yet (calls.c `zombies`: 63
/// children traced at once, killed at once, left zombies), then as many threads started at
/// once: a zombie's pidfd says it ended, so its slots go to the new threads, all traced.
#[test]
fn the_slots_of_zombies_go_to_the_next_threads() {
    let Some((dir, prog)) = build("zombies_fi") else {
        return;
    };
    let d = dir.path();
    let children = SLOTS - 1;
    let args = args_of(children, "zombies");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, data) = record_at_slots(d, &prog, &args, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("not traced"), "{stderr}");
    let got = counts(&call_trace(&data));
    let want = uftrace_counts(d, &prog, &args);
    assert_eq!(want.get("worker"), Some(&(children as u64)), "{want:?}");
    assert_eq!(got.get("worker"), want.get("worker"), "{got:?}");
    // Each child's leaf and the calls open at its fork (uftrace counts those once).
    assert_eq!(got.get("leaf"), want.get("leaf"), "{got:?}");
    assert_eq!(got.get("main"), Some(&(children as u64 + 1)), "{got:?}");
}
