//! `perfaux record -- ./prog` on the project's C test program (crates/preload/tests/c/calls.c):
//! call counts judged by uftrace, a crash mid-call, exec, and a program without hooks.

mod calls;

use std::path::{Path, PathBuf};
use std::process::Command;

use calls::*;

/// perfaux's call counts equal uftrace's for calls.c built with `flags` and run with `args`.
fn counts_equal_uftraces(flags: &[&str], name: &str, args: &[&str]) {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_calls(dir.path(), flags, name);
    let (out, data) = record(dir.path(), &prog, args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = counts(&call_trace(&data));
    let theirs = uftrace_counts(dir.path(), &prog, args);
    assert_eq!(ours, theirs);
    assert_eq!(
        report_counts(&data),
        theirs,
        "perfaux report against uftrace report"
    );
    assert_eq!(
        ours.get("worker"),
        Some(&3),
        "one call per thread: {ours:?}"
    );
    let expected_dives = if args.contains(&"nojmp") {
        None
    } else {
        Some(&5)
    };
    assert_eq!(
        ours.get("dive"),
        expected_dives,
        "the frames a longjmp left: {ours:?}"
    );
}

#[test]
fn finstrument_functions_call_counts_equal_uftraces() {
    counts_equal_uftraces(&["-finstrument-functions"], "calls_fi", &["3", "12"]);
}

#[test]
fn pg_call_counts_equal_uftraces() {
    // Without the longjmp: uftrace 0.13 records a call to leaf() inside the frames a longjmp
    // left under -pg that the program never made (seen here with `uftrace replay`), so it
    // cannot judge that part; `longjmp_frames_end_where_the_jump_lands` does.
    counts_equal_uftraces(&["-pg"], "calls_pg", &["3", "12", "nojmp"]);
}

#[test]
fn pg_mfentry_call_counts_equal_uftraces() {
    // Without the longjmp: uftrace 0.13 itself dies of SIGSEGV on a longjmp out of -mfentry
    // frames (seen here), so it cannot judge that part.
    counts_equal_uftraces(&["-pg", "-mfentry"], "calls_fentry", &["3", "12", "nojmp"]);
}

#[test]
fn a_crash_mid_call_keeps_the_trace_up_to_the_crashing_function() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    for (flags, bin) in [
        (&["-finstrument-functions"][..], "calls_crash"),
        (&["-pg"][..], "calls_crash_pg"),
    ] {
        let prog = build_calls(dir.path(), flags, bin);
        for (how, sig, name) in [("segv", 11, "SIGSEGV"), ("abort", 6, "SIGABRT")] {
            let (out, data) = record(dir.path(), &prog, &["1", "6", how]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(128 + sig), "{err}");
            assert!(
                err.contains(&format!("terminated by signal {sig} ({name})")),
                "{err}"
            );
            let calls = call_trace(&data);
            assert_eq!(
                calls[calls.len() - 2..],
                ["on_the_way", "boom"],
                "{how}: {calls:?}"
            );
            if have("perf") {
                let p = Command::new("perf")
                    .args(["script", "-i"])
                    .arg(&data)
                    .output()
                    .unwrap();
                assert!(
                    p.status.success(),
                    "perf script: {}",
                    String::from_utf8_lossy(&p.stderr)
                );
            }
        }
    }
}

#[test]
fn a_program_without_hooks_gets_the_flags_named() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_calls(dir.path(), &[], "calls_plain");
    let (out, data) = record(dir.path(), &prog, &["1", "5"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    for flag in ["-finstrument-functions", "-pg", "-pg -mfentry"] {
        assert!(err.contains(flag), "{err}");
    }
    assert!(!data.exists(), "no file that looks like success");
}

/// `perfaux record -o DIR/NAME.data -- calls 1 5 hang` (calls.c built with
/// -finstrument-functions), once the program says it hangs in boom()'s loop: the recorder, the
/// program's pid and the data file.
fn record_until_hanging(dir: &Path, name: &str) -> (std::process::Child, i32, PathBuf) {
    let prog = build_calls(dir, &["-finstrument-functions"], name);
    let data = dir.join(format!("{name}.data"));
    let mut rec = Command::new(PERFAUX)
        .arg("record")
        .arg("-o")
        .arg(&data)
        .arg("--")
        .arg(&prog)
        .args(["1", "5", "hang"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(rec.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("hanging") {
        line.clear();
        let n = std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        assert!(n > 0, "the program ended before it hung");
    }
    let pid: i32 = line.trim().rsplit(' ').next().unwrap().parse().unwrap();
    (rec, pid, data)
}

/// The calls of `data` end in boom() and its loop's leaf() calls.
fn assert_trace_ends_in_booms_loop(data: &Path) {
    let calls = call_trace(data);
    let last_other = calls.iter().rev().find(|c| *c != "leaf");
    assert_eq!(
        last_other.map(String::as_str),
        Some("boom"),
        "{:?}",
        &calls[calls.len().saturating_sub(5)..]
    );
    let boom = calls.iter().rposition(|c| c == "boom").unwrap();
    assert!(
        calls[boom + 1..].iter().all(|c| c == "leaf"),
        "only the loop's calls after boom"
    );
}

#[test]
fn sigkill_from_outside_keeps_the_calls_up_to_the_kill() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    let (rec, pid, data) = record_until_hanging(dir.path(), "calls_killed");
    // SAFETY: kill has no memory preconditions; pid is the program this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let out = rec.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{err}");
    assert!(err.contains("(SIGKILL)"), "{err}");
    assert_trace_ends_in_booms_loop(&data);
}

/// Ctrl-C on `perfaux record -- PROG`, as perf does it: the program gets SIGTERM, the
/// recording ends with it, and the file holds every call up to then.
#[test]
fn sigint_to_the_recorder_ends_the_program_and_keeps_the_file() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    let (rec, _, data) = record_until_hanging(dir.path(), "calls_int");
    // SAFETY: kill has no memory preconditions; the pid is the recorder this test started.
    assert_eq!(unsafe { libc::kill(rec.id() as i32, libc::SIGINT) }, 0);
    let out = rec.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{err}");
    assert!(err.contains("(SIGTERM)"), "{err}");
    assert_trace_ends_in_booms_loop(&data);
    assert!(
        !dir.path().read_dir().unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("tmp")),
        "no temporary left"
    );
}

/// `exec`: the new image is traced in the same recording, its functions named apart from the
/// old image's (uftrace, on each image's run alone, judges the sum). uftrace runs the
/// -finstrument-functions build for both flavours: under -pg it records a leaf() call inside
/// the frames the longjmp left that the program never made. (Forked children:
/// record_program_fork.rs.)
#[test]
fn exec_traces_the_new_image() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    let judge = build_calls(dir.path(), &["-finstrument-functions"], "ef_judge");
    let mut want_exec = uftrace_counts(dir.path(), &judge, &["1", "4"]);
    for (f, n) in uftrace_counts(dir.path(), &judge, &["0", "4"]) {
        *want_exec.entry(f).or_insert(0) += n;
    }
    for (flags, name) in [
        (&["-finstrument-functions"][..], "ef_fi"),
        (&["-pg"][..], "ef_pg"),
    ] {
        let prog = build_calls(dir.path(), flags, name);
        let (out, data) = record(dir.path(), &prog, &["1", "4", "exec"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(counts(&call_trace(&data)), want_exec, "{name} exec");
    }
}

/// The image a thread execs is named as the kernel names it (its file's name, here "exe" for
/// /proc/self/exe) in a PERF_RECORD_COMM with the exec flag, before its calls; the process's
/// main thread exits once (an exec ends an image, not the task). Judged by Linux perf.
#[test]
fn an_exec_renames_the_thread_and_perf_sees_one_exit() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("perf");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_calls(dir.path(), &["-finstrument-functions"], "ex_comm");
    let (out, data) = record(dir.path(), &prog, &["1", "4", "exec"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = Command::new("perf")
        .args(["script", "--show-task-events", "-F", "comm,tid,event", "-i"])
        .arg(&data)
        .output()
        .expect("perf script");
    let text = String::from_utf8_lossy(&text.stdout);
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let exec = lines
        .iter()
        .position(|l| l.contains("PERF_RECORD_COMM exec: exe:"))
        .unwrap_or_else(|| panic!("no exec COMM in:\n{text}"));
    let pid = lines[exec].split_whitespace().nth(1).unwrap();
    // The main thread's calls, in time order: the old image's under the program's name, then
    // the new image's under "exe" (perfaux's call trace names each image's calls from the
    // COMM of its trace event: the two images share the tid).
    let trace = Command::new(PERFAUX)
        .args(["script", "--call-trace", "-i"])
        .arg(&data)
        .output()
        .expect("perfaux script");
    let trace = String::from_utf8_lossy(&trace.stdout);
    let comms: Vec<&str> = trace
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let comm = f.next()?;
            (f.next()? == pid).then_some(comm)
        })
        .collect();
    let first_exe = comms
        .iter()
        .position(|&c| c == "exe")
        .unwrap_or_else(|| panic!("no call of the new image in:\n{trace}"));
    assert!(first_exe > 0, "no call of the old image in:\n{trace}");
    assert!(
        comms[..first_exe].iter().all(|&c| c == "ex_comm")
            && comms[first_exe..].iter().all(|&c| c == "exe"),
        "the main thread's calls by name: {comms:?}"
    );
    let exits = lines
        .iter()
        .filter(|l| l.contains(&format!("PERF_RECORD_EXIT({pid}:{pid})")))
        .count();
    assert_eq!(exits, 1, "the main thread's exits in:\n{text}");
}

/// `prog args` recorded in `dir`: `perfaux script --call-trace` of its recording.
fn recorded_call_trace(dir: &Path, prog: &Path, args: &[&str]) -> String {
    let (out, data) = record(dir, prog, args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = Command::new(PERFAUX)
        .args(["script", "--call-trace", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    String::from_utf8_lossy(&text.stdout).into_owned()
}

/// After a longjmp out of five dive() frames, the next call (leaf, from jumpy) is at jumpy's
/// callees' depth, as the first dive was, with every flavour of hooks.
#[test]
fn longjmp_frames_end_where_the_jump_lands() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    for (flags, name) in [
        (&["-finstrument-functions"][..], "jmp_fi"),
        (&["-pg"][..], "jmp_pg"),
        (&["-pg", "-mfentry"][..], "jmp_fentry"),
    ] {
        let prog = build_calls(dir.path(), flags, name);
        let text = recorded_call_trace(dir.path(), &prog, &["0", "3"]);
        // (indent of the name, name) per call line.
        let calls: Vec<(usize, &str)> = text
            .lines()
            .filter(|l| !l.contains("tr end") && !l.contains("tr strt"))
            .filter_map(|l| {
                let colon = l.find(": ")?;
                let rest = &l[colon + 2..];
                let name = rest.trim_start();
                Some((rest.len() - name.len(), name))
            })
            .collect();
        let j = calls.iter().position(|c| c.1 == "jumpy").unwrap();
        let names: Vec<&str> = calls[j..].iter().map(|c| c.1).collect();
        assert_eq!(
            names,
            [
                "jumpy",
                "dive",
                "dive",
                "dive",
                "dive",
                "dive",
                "leaf",
                "on_the_way",
                "boom"
            ],
            "{name}"
        );
        assert_eq!(
            calls[j + 6].0,
            calls[j + 1].0,
            "{name}: leaf at the first dive's depth"
        );
        assert_eq!(
            calls[j + 7].0,
            calls[j].0,
            "{name}: on_the_way at jumpy's depth"
        );
    }
}

/// gcc calls the hooks of a function inlined into another (lanes.c's now_ns() in slow() at
/// -O2) from the container's frame, naming the container's call site: the inlined calls are
/// the container's callees, and the container's call lasts until its own return (300 us
/// here), not until the first inlined entry, which took the shared return-address slot for
/// a frame a longjmp had left.
#[test]
fn inlined_functions_are_their_containers_callees() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(
        dir.path(),
        "lanes.c",
        &["-O2", "-finstrument-functions"],
        "lanes",
    );
    assert_inlined(&prog, "now_ns");
    let text = recorded_call_trace(dir.path(), &prog, &[]);
    let data = dir.path().join("lanes.data");
    // Per thread (the second column), the indent of each call's name.
    let mut last_slow: std::collections::HashMap<String, usize> = Default::default();
    let (mut inlined, mut slows) = (0, 0);
    for l in text.lines() {
        let Some((head, rest)) = l.split_once(": ") else {
            continue;
        };
        let tid = head.split_whitespace().nth(1).unwrap_or("").to_owned();
        let name = rest.trim_start();
        let indent = rest.len() - name.len();
        match name {
            "slow" => {
                slows += 1;
                last_slow.insert(tid, indent);
            }
            "now_ns" => {
                let container = last_slow.get(&tid).copied();
                assert_eq!(
                    container.map(|c| c + 4),
                    Some(indent),
                    "now_ns one level under slow: {l}"
                );
                inlined += 1;
            }
            _ => {}
        }
    }
    assert_eq!(slows, 10);
    assert!(inlined > 20, "{inlined} inlined calls");
    let report = Command::new(PERFAUX)
        .args(["report", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&report.stdout).into_owned();
    let slow = report
        .lines()
        .find(|l| l.split_whitespace().last() == Some("slow"))
        .unwrap_or_else(|| panic!("slow in the report:\n{report}"));
    // Total time first: 10 calls of at least 300 us.
    let total = slow.split_whitespace().take(2).collect::<Vec<_>>();
    assert!(
        total[1] == "ms" && total[0].parse::<f64>().unwrap() >= 3.0,
        "slow's total: {slow}"
    );
}

/// Each thread's calls, in order, as (depth, name), from uftrace's replay of `prog args`
/// recorded with `--no-libcall` (lines `[ TID] | INDENT name() {` or `name();`; the threads
/// in the order they first show).
fn uftrace_trees(dir: &Path, prog: &Path, args: &[&str]) -> Vec<Vec<(usize, String)>> {
    let d = uftrace_record(dir, prog, args, &["--no-libcall"], "uftrace.tree");
    let rep = Command::new("uftrace")
        .args(["replay", "--no-libcall", "-f", "tid", "-d"])
        .arg(&d)
        .output()
        .expect("uftrace replay");
    assert!(
        rep.status.success(),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let mut trees: Vec<(String, Vec<(usize, String)>)> = Vec::new();
    for l in String::from_utf8_lossy(&rep.stdout).lines() {
        let Some((tid, call)) = l.split_once("] | ") else {
            continue;
        };
        let name = call.trim_start();
        let Some(name) = name.strip_suffix("() {").or(name.strip_suffix("();")) else {
            continue;
        };
        let depth = (call.len() - call.trim_start().len()) / 2;
        let tid = tid.trim_start_matches([' ', '[']).to_owned();
        match trees.iter_mut().find(|t| t.0 == tid) {
            Some(t) => t.1.push((depth, name.to_owned())),
            None => trees.push((tid, vec![(depth, name.to_owned())])),
        }
    }
    trees.into_iter().map(|t| t.1).collect()
}

/// The same from perfaux's call trace (`COMM TID [CPU] TIME: INDENT name`, 4 columns a level).
fn perfaux_trees(text: &str) -> Vec<Vec<(usize, String)>> {
    let mut trees: Vec<(String, Vec<(usize, String)>)> = Vec::new();
    for l in text.lines() {
        let Some((head, call)) = l.split_once(": ") else {
            continue;
        };
        let name = call.trim_start();
        if name.starts_with("tr ") || name.starts_with('[') {
            continue;
        }
        let depth = (call.len() - name.len()) / 4;
        let tid = head.split_whitespace().nth(1).unwrap_or("").to_owned();
        match trees.iter_mut().find(|t| t.0 == tid) {
            Some(t) => t.1.push((depth, name.to_owned())),
            None => trees.push((tid, vec![(depth, name.to_owned())])),
        }
    }
    trees.into_iter().map(|t| t.1).collect()
}

/// Each thread's call tree (every call, its depth, in order; a call repeated at once counted
/// once) is uftrace's, for programs built at -O2 with -finstrument-functions: calls.c's
/// recursion, and lanes.c's two threads with now_ns() inlined into slow() (its hooks called
/// from slow's frame).
#[test]
fn call_trees_at_o2_are_uftraces() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    for (source, args) in [("calls.c", &["0", "10", "nojmp"][..]), ("lanes.c", &[][..])] {
        let name = source.trim_end_matches(".c");
        let prog = build_c(dir.path(), source, &["-O2", "-finstrument-functions"], name);
        // A run of one call repeated (lanes.c's spin of now_ns() calls, as many as 300 us
        // takes) counts once: the tree's shape, not the clock's.
        let shape = |trees: Vec<Vec<(usize, String)>>| -> Vec<Vec<(usize, String)>> {
            trees
                .into_iter()
                .map(|mut t| {
                    t.dedup();
                    t
                })
                .collect()
        };
        let ours = shape(perfaux_trees(&recorded_call_trace(dir.path(), &prog, args)));
        let theirs = shape(uftrace_trees(dir.path(), &prog, args));
        assert_eq!(ours.len(), theirs.len(), "{source}: threads");
        // Threads in the order they first show; two started at once may show either way.
        for t in &theirs {
            assert!(
                ours.contains(t),
                "{source}: uftrace's thread of {} calls is none of perfaux's ({:?} calls)",
                t.len(),
                ours.iter().map(Vec::len).collect::<Vec<_>>()
            );
        }
    }
}

/// gcc inlined `func` into its callers in `prog`: no call of it is left (else the tests of
/// inlined functions would test nothing).
fn assert_inlined(prog: &Path, func: &str) {
    let dis = Command::new("objdump")
        .arg("-d")
        .arg(prog)
        .output()
        .unwrap();
    assert!(dis.status.success(), "objdump -d");
    let text = String::from_utf8_lossy(&dis.stdout);
    let called = format!("<{func}>");
    assert!(
        !text
            .lines()
            .any(|l| l.contains("call") && l.ends_with(&called)),
        "{func} is still called in {}",
        prog.display()
    );
}

/// A setjmp loop whose work() leaves by longjmp through a helper inlined into it (inline_jmp.c
/// at -O2): every work() is main's callee, however many longjmps came before. The frames the
/// jump left (work, and check inlined in it, at one return-address slot) end at the next
/// work(), as the same function again at that slot, with the inlined frame above it.
#[test]
fn a_longjmp_out_of_an_inlined_function_ends_its_container_too() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(
        dir.path(),
        "inline_jmp.c",
        &["-O2", "-finstrument-functions"],
        "inline_jmp",
    );
    assert_inlined(&prog, "check");
    let text = recorded_call_trace(dir.path(), &prog, &[]);
    let depth = |name: &str| -> Vec<usize> {
        text.lines()
            .filter_map(|l| l.split_once(": "))
            .filter(|(_, call)| call.trim_start() == name)
            .map(|(_, call)| call.len() - call.trim_start().len())
            .collect()
    };
    let (works, checks) = (depth("work"), depth("check"));
    assert_eq!(works.len(), 200);
    assert_eq!(checks.len(), 200);
    assert!(works.iter().all(|&d| d == 4), "work's depths: {works:?}");
    assert!(checks.iter().all(|&d| d == 8), "check's depths: {checks:?}");
}

/// `-a` cannot be had (perfaux sees the programs it starts, and a process's kernel events with
/// -p): the message says why and what to run instead.
#[test]
fn all_cpus_says_why_not_and_what_to_do() {
    let out = Command::new(PERFAUX)
        .args(["record", "-a"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("not possible"), "{err}");
    assert!(
        err.contains("a runtime loaded when it starts"),
        "why: {err}"
    );
    assert!(
        err.contains("perfaux record -- ./prog") && err.contains("-p PID"),
        "what instead: {err}"
    );
}

/// A linked shared library and one the program dlopens: every call named from the library's
/// own symbols (the runtime reports the dlopen'd object when its first function runs), with
/// uftrace's counts.
#[test]
fn shared_and_dlopened_library_calls_are_named_and_counted() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let prog = build_libmain(d, |args| perfaux_testutil::gcc_instrumented(d, args));
    let arg = d.to_str().unwrap();
    let (out, data) = record(d, &prog, &[arg]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = counts(&call_trace(&data));
    assert_eq!(ours, uftrace_counts(d, &prog, &[arg]));
    assert_eq!(ours.get("plugin_square"), Some(&7), "{ours:?}");
}

/// `-S`: the AUX areas run in overwrite mode; a snapshot on SIGUSR2 (the program keeps
/// running) and one when it ends, here killed from outside: the newest calls are there, those
/// of the loop the program was killed in.
#[test]
fn snapshot_mode_takes_the_newest_trace_on_sigusr2_and_at_the_end() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_calls(dir.path(), &["-finstrument-functions"], "calls_snap");
    let data = dir.path().join("snap.data");
    let mut rec = Command::new(PERFAUX)
        .current_dir(dir.path())
        .args(["record", "-S", "-m", ",16K", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&prog)
        .args(["2", "14", "hang"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(rec.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("hanging") {
        line.clear();
        let n = std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        assert!(n > 0, "the program ended before it hung");
    }
    let pid: i32 = line.trim().rsplit(' ').next().unwrap().parse().unwrap();
    // SAFETY: kill has no memory preconditions; the pids are this test's children.
    assert_eq!(unsafe { libc::kill(rec.id() as i32, libc::SIGUSR2) }, 0);
    // The recorder takes the SIGUSR2 snapshot within its next drain pass; the kill may come
    // before or after it: either way the final snapshot holds the newest calls.
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let out = rec.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{err}");
    assert!(err.contains(" snapshots"), "{err}");
    // The loop overwrites a 16 KiB area in microseconds: the newest calls are the loop's
    // (or boom itself if the kill came first).
    let calls = call_trace(&data);
    let last = calls.last().map(String::as_str);
    assert!(matches!(last, Some("leaf" | "boom")), "{last:?}");
}

/// uevents from C (include/perfaux.h): byte-exact and in order, with the seed's E2BIG rule;
/// and a no-op without perfaux.
#[test]
fn uevents_from_c_arrive_byte_exact_and_in_order() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let prog = dir.path().join("uev");
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-finstrument-functions", "-I"])
        .arg(root.join("include"))
        .arg("-o")
        .arg(&prog)
        .arg(root.join("crates/preload/tests/c/uevents.c"))
        .status()
        .unwrap();
    assert!(st.success());
    let alone = Command::new(&prog).arg("3").output().unwrap();
    assert!(alone.status.success());
    assert_eq!(
        String::from_utf8_lossy(&alone.stdout),
        "big: 0 ok\n",
        "a no-op without perfaux"
    );
    let (out, data) = record(dir.path(), &prog, &["3"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "big: -1 Argument list too long\n"
    );
    let script = Command::new(PERFAUX)
        .args(["script", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&script.stdout).into_owned();
    let uevents: Vec<String> = text
        .lines()
        .filter(|l| l.contains("perfaux:uevent: "))
        .map(|l| l.rsplit("perfaux:uevent: ").next().unwrap().to_owned())
        .collect();
    let want: Vec<String> = (0..3).map(|i| format!("type 7 \"step {i}\"")).collect();
    assert_eq!(uevents, want);
    let trace = Command::new(PERFAUX)
        .args(["script", "--call-trace", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    let steps = String::from_utf8_lossy(&trace.stdout)
        .lines()
        .filter(|l| l.ends_with(" step"))
        .count();
    assert_eq!(steps, 3);
    // Not asserted: each uevent's time between its step() and the next. The trace's
    // timestamps (TSC) and the samples' (perf clock) disagreed by more than the 200 us the
    // program leaves on each side, in 1 of about 10 runs on the loaded test host.
}

/// Every traced thread's life ends with a PERF_RECORD_EXIT, as the kernel writes one at each
/// task's exit: perf shows one per thread (the two workers, then main), each after the thread's
/// COMM, naming its process and thread.
#[test]
fn every_thread_ends_with_an_exit_record_perf_reads() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("perf");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_calls(dir.path(), &["-finstrument-functions"], "calls_exit");
    let (out, data) = record(dir.path(), &prog, &["2", "20"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = perf_task_events(&data);
    let task = |kind: &str| -> Vec<String> {
        events
            .lines()
            .filter_map(|l| l.split_once(&format!("PERF_RECORD_{kind}")))
            .map(|(_, rest)| rest.to_string())
            .collect()
    };
    let comms = task("COMM");
    let exits = task("EXIT");
    assert_eq!(comms.len(), 3, "{}", events);
    assert_eq!(exits.len(), 3, "{}", events);
    // "(PID:TID):(PPID:PTID)" after each thread's COMM ": calls_exit:PID/TID".
    for c in &comms {
        let (pid, tid) = c.rsplit_once(':').unwrap().1.split_once('/').unwrap();
        let want = format!("({pid}:{tid}):");
        assert!(
            exits.iter().any(|e| e.starts_with(&want)),
            "no EXIT of {pid}/{tid}: {exits:?}"
        );
    }
    // Each thread's EXIT after its COMM (a worker may end before the next one starts, in the
    // slot it left: that one's COMM then comes after the first's EXIT).
    for c in &comms {
        let (pid, tid) = c.rsplit_once(':').unwrap().1.split_once('/').unwrap();
        let comm = events.find(&format!(":{pid}/{tid}")).unwrap();
        let exit = events
            .find(&format!("PERF_RECORD_EXIT({pid}:{tid})"))
            .unwrap();
        assert!(
            comm < exit,
            "the EXIT of {pid}/{tid} before its COMM:\n{}",
            events
        );
    }
}

/// The `# cmdline :` line `perf report --header-only` prints for `file`.
fn perf_header_cmdline(file: &Path, home: &Path) -> String {
    let out = perfaux_testutil::perf_command(&["report", "--header-only", "-i"], home)
        .arg(file)
        .output()
        .expect("perf report --header-only");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find(|l| l.starts_with("# cmdline :"))
        .unwrap_or_else(|| panic!("no cmdline in {}:\n{text}", file.display()))
        .to_owned()
}

/// The recorded command line is stored as perf stores its own (issue 22 item 25): `perf report
/// --header-only` prints the words of a `sh -c 'A; B'` recording of perfaux's as it prints
/// those of perf's own recording of the same command, and the first word is the recorder's
/// executable (perf's `/proc/self/exe`), also when it was started by its name in PATH.
#[test]
fn the_command_line_is_stored_as_perf_stores_its_own() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("perf");
    let dir = tempfile::tempdir().unwrap();
    build_calls(dir.path(), &["-finstrument-functions"], "calls_fi");
    let script = "./calls_fi 3 12; echo 'it ran'";
    let ours = dir.path().join("ours.data");
    let bin_dir = Path::new(PERFAUX).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("perfaux")
        .current_dir(dir.path())
        .env("PATH", &path)
        .args(["record", "-o"])
        .arg(&ours)
        .args(["--", "sh", "-c", script])
        .output()
        .expect("perfaux record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = dir.path().join("theirs.data");
    let out = perfaux_testutil::perf_command(&["record", "-e", "task-clock", "-o"], dir.path())
        .current_dir(dir.path())
        .arg(&theirs)
        .args(["--", "sh", "-c", script])
        .output()
        .expect("perf record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (ours_line, theirs_line) = (
        perf_header_cmdline(&ours, dir.path()),
        perf_header_cmdline(&theirs, dir.path()),
    );
    let exe = std::fs::canonicalize(PERFAUX).unwrap();
    let head = format!(
        "# cmdline : {} record -o {} -- ",
        exe.display(),
        ours.display()
    );
    assert!(ours_line.starts_with(&head), "{ours_line}");
    let tail = |l: &str| l.split_once(" -- ").map(|(_, t)| t.to_owned());
    assert_eq!(
        tail(&ours_line),
        tail(&theirs_line),
        "{ours_line}\n{theirs_line}"
    );
}

/// A task-clock sampler gives the rate asked for (issue 22 item 15): `perf record -e
/// task-clock` around `perfaux record -e '{swtrace//,task-clock}'` samples the same run of the
/// traced program, so the time perfaux's samples of the program stand for (user mode only, as
/// its sampler excludes the kernel) lies between the time of perf's samples that landed in user
/// mode and of all perf's samples, within 10%, each sample weighed by its period (the kernel's
/// task-clock is the sampler's interrupt, not a POSIX CPU-time timer that fires at most once a
/// scheduler tick, which would give a sixteenth of perf's).
///
/// Why both bounds: perfaux's sampler signals cost kernel time at a fixed phase of its own
/// timer, so its samples never land there while perf's land there at random and are dropped as
/// kernel samples; on a host with dear interrupts perf's user-mode time alone falls short.
#[test]
fn a_task_clock_sampler_samples_at_perfs_rate() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("perf");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let prog = calls::build_calls(d, &["-O2", "-finstrument-functions"], "rate_calls");
    let (outer, inner) = (d.join("outer.data"), d.join("inner.data"));
    let out = perfaux_testutil::perf_command(&["record", "-e", "task-clock", "-o"], d)
        .current_dir(d)
        .arg(&outer)
        .args([
            "--",
            PERFAUX,
            "record",
            "-e",
            "{swtrace//,task-clock}",
            "-o",
        ])
        .arg(&inner)
        .arg("--")
        .arg(&prog)
        .args(["1", "30", "nojmp"])
        .output()
        .expect("perf record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The program's samples, by its threads' ids as perfaux's samples give them (a comm can
    // be the recorder's until perf sees the exec's), read by perf with their periods: the time
    // each sample stands for is compared, not the count, as perf lowers its rate to the
    // kernel's perf_event_max_sample_rate when a host's interrupts are slow.
    let fields = |file: &Path, f: &str| {
        let out = perfaux_testutil::perf_command(&["script", "-F", f, "-i"], d)
            .arg(file)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let ours: Vec<(u32, u64)> = fields(&inner, "tid,period,event")
        .lines()
        .filter(|l| l.contains("task-clock:"))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .collect();
    let tids: std::collections::BTreeSet<u32> = ours.iter().map(|&(t, _)| t).collect();
    // (ns sampled of the program's threads in any mode, of them in user mode)
    let (theirs, theirs_user) = fields(&outer, "tid,ip,period")
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            // perf prints its own order: tid, period, ip.
            let tid = f.next()?.parse::<u32>().ok()?;
            let period = f.next()?.parse::<u64>().ok()?;
            let ip = u64::from_str_radix(f.next()?, 16).ok()?;
            let user = if ip < 1 << 63 { period } else { 0 };
            tids.contains(&tid).then_some((period, user))
        })
        .fold((0u64, 0u64), |(all, user), (p, u)| (all + p, user + u));
    let ours_ns: u64 = ours.iter().map(|&(_, p)| p).sum();
    assert!(
        theirs_user > 50_000_000,
        "perf sampled {theirs_user} ns in user mode of threads {tids:?}"
    );
    // perf's own losses (its buffer not drained in time on a loaded host) leave it short: then
    // only perfaux's floor is judged.
    let stats = perfaux_testutil::perf_command(&["report", "--stats", "-i"], d)
        .arg(&outer)
        .output()
        .unwrap();
    let stats = String::from_utf8_lossy(&stats.stdout);
    let perf_lost = stats.lines().any(|l| l.trim_start().starts_with("LOST"));
    let (low, high) = (
        ours_ns as f64 / theirs_user as f64,
        ours_ns as f64 / theirs as f64,
    );
    assert!(
        low >= 0.9 && (high <= 1.1 || perf_lost),
        "perfaux sampled {ours_ns} ns in {} samples; perf {theirs_user} ns in user mode and \
         {theirs} ns in all of the same run (perf lost some: {perf_lost})\n{stats}",
        ours.len()
    );
}
