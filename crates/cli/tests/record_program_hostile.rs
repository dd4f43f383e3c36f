//! Programs that are hard on a tracer (crates/preload/tests/c/hostile.c), in all three hook
//! flavours (and, where the program's tiny functions allow, built without hooks and patched
//! with `-P`): the program must run as it runs without perfaux, and what the trace lacks must be
//! said in numbers.

mod calls;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use calls::*;

const FLAVOURS: [(&[&str], &str); 3] = [
    (&["-finstrument-functions"], "fi"),
    (&["-pg"], "pg"),
    (&["-pg", "-mfentry"], "fentry"),
];

/// [`FLAVOURS`] with their `record` options, and the build without hooks under `-P .`
/// (library calls on, as by default).
const WITH_PATCHED: [(&[&str], &str, &[&str]); 4] = [
    (&["-finstrument-functions"], "fi", &[]),
    (&["-pg"], "pg", &[]),
    (&["-pg", "-mfentry"], "fentry", &[]),
    (&[], "patched", &["-P", "."]),
];

/// The number before `what` on the line of `text` that has it (`None`: no such line).
fn count_before(text: &str, what: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.contains(what))?;
    let head = &line[..line.find(what)?];
    head.split_whitespace().last()?.parse().ok()
}

/// The program's own count on its output line `prefix N suffix`.
fn printed(stdout: &[u8], prefix: &str) -> u64 {
    let s = String::from_utf8_lossy(stdout);
    s.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no '{prefix}' line in {s:?}"))
}

/// A signal handler that fires every 100 us while the program makes 3,000,000 traced calls:
/// under -pg the handler is itself instrumented and interrupts the runtime's hooks, which must
/// neither abort the program (a borrowed return stack) nor lose the handler's calls in
/// silence: each run of the handler is in the trace or counted in `record`'s warning.
#[test]
fn signal_handlers_interrupting_hooks_leave_the_program_whole_and_their_calls_counted() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    let uftrace = perfaux_testutil::oracle("uftrace");
    for (flags, name) in FLAVOURS {
        let prog = build_c(dir.path(), "hostile.c", flags, &format!("sig_{name}"));
        let (out, data) = record(dir.path(), &prog, &["signals", "100"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {:?}: {stderr}", out.status);
        let handler_runs = printed(&out.stdout, "handler ran ");
        assert!(handler_runs > 0, "{name}: the timer never fired");
        let counts = report_counts(&data);
        assert_eq!(counts.get("f"), Some(&3_000_000), "{name}: {counts:?}");
        assert_eq!(counts.get("main"), Some(&1), "{name}: {counts:?}");
        let traced = counts.get("on_alarm").copied().unwrap_or(0);
        let missed = count_before(&stderr, "call(s) made in signal handlers").unwrap_or(0);
        assert_eq!(
            traced + missed,
            handler_runs,
            "{name}: handler runs traced ({traced}) and said to be missed ({missed}): {stderr}"
        );
        if uftrace {
            let u = uftrace_counts(dir.path(), &prog, &["signals", "100"]);
            for f in ["main", "f"] {
                assert_eq!(counts.get(f), u.get(f), "{name}: {f} against uftrace");
            }
        }
    }
}

/// Threads cancelled right after `pthread_create`: the runtime's first hook in the thread
/// must add no cancellation point (the body runs as often as without perfaux), and a
/// cancelled thread gives its slot back (the ten threads after 64 cancelled ones are traced).
#[test]
fn cancelled_threads_run_as_without_perfaux_and_give_their_slots_back() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    for (flags, name, opts) in WITH_PATCHED {
        let prog = build_c(dir.path(), "hostile.c", flags, &format!("cancel_{name}"));
        let plain = Command::new(&prog).arg("cancel").output().unwrap();
        let plain_runs = printed(&plain.stdout, "body ran ");
        let (out, data) = record_with(dir.path(), &prog, &["cancel"], opts, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        let runs = printed(&out.stdout, "body ran ");
        assert_eq!(runs, plain_runs, "{name}: the body's runs under perfaux");
        assert!(
            !stderr.contains("were not traced"),
            "{name}: threads went untraced: {stderr}"
        );
        let counts = report_counts(&data);
        assert_eq!(counts.get("body"), Some(&runs), "{name}: {counts:?}");
    }
}

/// A program that writes pseudo-random words over every writable memfd mapping it has (perfaux's
/// rings and control area: the wild pointer a user records a trace to find), after a thread
/// whose trace the recorder drained: the program runs to its end with its own result, the
/// recording is written with that thread's calls whole, and the damage is said ring by ring
/// and for the control area; the counts read from the damaged area are not said as facts.
#[test]
fn a_program_that_writes_over_its_rings_loses_only_those_rings() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    for (flags, name) in FLAVOURS {
        let prog = build_c(dir.path(), "hostile.c", flags, &format!("scribble_{name}"));
        let plain = Command::new(&prog).arg("scribble").output().unwrap();
        let plain_out = String::from_utf8_lossy(&plain.stdout);
        let sums = |s: &str| s.split_once("sums").map(|(_, r)| r.trim().to_owned());
        assert_eq!(
            sums(&plain_out).as_deref(),
            Some("1000 1000 1000"),
            "{plain_out}"
        );
        let (out, data) = record(dir.path(), &prog, &["scribble"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}: {:?}: {stderr}", out.status);
        assert_eq!(
            sums(&stdout),
            sums(&plain_out),
            "{name}: the program's result"
        );
        assert!(
            !stdout.contains("scribbled 0 "),
            "{name}: nothing was written over: {stdout}"
        );
        assert!(
            stderr.contains("the program wrote over its trace ring's memory"),
            "{name}: {stderr}"
        );
        assert!(
            stderr.contains("the program wrote over the memory it shares with the recorder"),
            "{name}: {stderr}"
        );
        // The control area's counters were noise after the damage: none said as a count.
        for noise in [
            "were not traced:",
            "signal handlers",
            "deeper than",
            "object(s)",
        ] {
            assert!(!stderr.contains(noise), "{name}: {noise}: {stderr}");
        }
        // The first thread's calls, drained before the damage, are whole under their names.
        let per = calls_by_tid(&data);
        let mut by_tid: std::collections::BTreeMap<u32, (u64, u64)> = Default::default();
        for (tid, f) in &per {
            let e = by_tid.entry(*tid).or_default();
            match f.as_str() {
                "thousand" => e.0 += 1,
                "f" => e.1 += 1,
                _ => {}
            }
        }
        assert!(
            by_tid.values().any(|&c| c == (1, 1000)),
            "{name}: no thread with thousand() and its 1000 calls of f: {by_tid:?}"
        );
    }
}

/// A process that closed the recorder's descriptors and changed its user (as root: to 65534)
/// before making threads: its threads cannot open their slots' rings, by number or through
/// /proc/RECORDER/fd. They run untraced, counted and said with the reason; the recording (the
/// main thread's calls) is written and the program's result is its own.
#[test]
fn threads_whose_process_cannot_open_the_rings_are_said_untraced() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    // The recording's directory must take the file written by root; the program only runs.
    let prog = build_c(
        dir.path(),
        "hostile.c",
        &["-finstrument-functions"],
        "unreach_fi",
    );
    let (out, data) = record(dir.path(), &prog, &["unreachable"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stdout.trim() == "not root" {
        eprintln!("skipped: changing the program's user needs root");
        return;
    }
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert_eq!(stdout.trim(), "ran 3 threads");
    assert_eq!(
        count_before(
            &stderr,
            "thread(s) of the program's processes were not traced: their process could not open"
        ),
        Some(3),
        "{stderr}"
    );
    assert!(stderr.contains("Permission denied"), "{stderr}");
    let counts = report_counts(&data);
    assert_eq!(counts.get("main"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("thousand"), None, "{counts:?}");
}

/// Waits (at most a minute: a guard against a hang, not a measure of speed) until `path`
/// exists.
fn wait_for(path: &Path, what: &str) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what} never came"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `perfaux record` killed with SIGKILL while the program runs: the program goes on (it is not
/// the recorder's to take down), and its runtime sees the recorder gone and stops tracing, so
/// no new thread waits for a slot the recorder would have freed: every thread made after the
/// recorder's end is refused a uevent with ENODEV (untraced) and the program ends.
#[test]
fn a_program_whose_recorder_was_killed_stops_tracing_and_runs_on() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    const THREADS: u64 = 100;
    for (flags, name, opts) in WITH_PATCHED {
        let prog = build_c(dir.path(), "hostile.c", flags, &format!("orphan_{name}"));
        let work = dir.path().join(name);
        std::fs::create_dir(&work).unwrap();
        let out_path = work.join("stdout");
        let mut rec = Command::new(PERFAUX)
            .current_dir(&work)
            .arg("record")
            .args(opts)
            .arg("-o")
            .arg(work.join("perf.data"))
            .arg("--")
            .arg(&prog)
            .arg("orphan")
            .arg(&work)
            .arg(THREADS.to_string())
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for(&work.join("started"), "the program's start");
        rec.kill().unwrap();
        rec.wait().unwrap();
        std::fs::write(work.join("go"), b"").unwrap();
        let start = Instant::now();
        let text = loop {
            let t = std::fs::read_to_string(&out_path).unwrap_or_default();
            if t.contains("refused") {
                break t;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "{name}: the program never finished"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(
            text.trim(),
            format!("{THREADS} of {THREADS} threads refused"),
            "{name}: threads made after the recorder's end"
        );
    }
}

/// A program that makes 2,000 short threads one after another: perf reads the recording with
/// no "out of order events" warning (each thread's COMM is timed when the thread began, not at
/// the program's start, which perf would find behind rounds it had flushed already).
#[test]
fn many_short_threads_give_perf_no_out_of_order_events() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("perf");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(
        dir.path(),
        "hostile.c",
        &["-finstrument-functions"],
        "threads_fi",
    );
    for run in 0..2 {
        let (out, data) = record(dir.path(), &prog, &["threads", "2000"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "run {run}: {stderr}");
        assert_eq!(printed(&out.stdout, "body ran "), 2000, "run {run}");
        let perf = Command::new("perf")
            .args(["script", "-i"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(perf.status.success(), "run {run}: perf script failed");
        let warnings = String::from_utf8_lossy(&perf.stderr);
        assert!(
            !warnings.contains("out of order"),
            "run {run}: perf script says: {warnings}"
        );
        let counts = report_counts(&data);
        assert_eq!(counts.get("body"), Some(&2000), "run {run}: {counts:?}");
    }
}
