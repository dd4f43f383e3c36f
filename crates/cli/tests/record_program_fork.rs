//! `perfaux record -- ./prog` on a program that forks (crates/preload/tests/c/calls.c with
//! `fork` and `forksegv`): the child is traced, as perf (`inherit`) and uftrace trace children
//! by default. Call counts summed over both processes are judged by uftrace's report of the
//! same run; the child's calls are under its own tid; perf 6.1 names its functions through the
//! parent's maps, which the FORK record gives it; an image the child execs is traced as the
//! child.

mod calls;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use calls::*;

/// The child's pid, as the program says it ("forked PID").
fn child_pid(out: &Output) -> u32 {
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("forked ")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no 'forked PID' in {text:?}"))
}

/// The calls of thread `tid`.
fn calls_of(calls: &[(u32, String)], tid: u32) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.0 == tid)
        .map(|c| c.1.clone())
        .collect()
}

/// What the child does in calls.c: it returns through main, on_the_way and boom, open at the
/// fork (uftrace counts each once in the child: their entries are in the parent's trace,
/// their returns in the child's), and calls fib(5): 15 calls of fib, 8 of leaf.
fn child_counts(booms: u64) -> BTreeMap<String, u64> {
    [
        ("main", 1),
        ("on_the_way", 1),
        ("boom", booms),
        ("fib", 15),
        ("leaf", 8),
    ]
    .into_iter()
    .map(|(f, n)| (f.to_owned(), n))
    .collect()
}

const FLAVOURS: [(&[&str], &str); 3] = [
    (&["-finstrument-functions"], "fork_fi"),
    (&["-pg"], "fork_pg"),
    (&["-pg", "-mfentry"], "fork_fentry"),
];

/// Without the longjmp: uftrace 0.13 does not follow one under -finstrument-functions (the
/// frames it left stay on its stack, so it names the child's return from main `dive`), nor
/// under -pg, nor -pg -mfentry (record_program.rs).
const ARGS: [&str; 4] = ["1", "4", "fork", "nojmp"];

#[test]
fn forked_children_are_traced_with_uftraces_call_counts() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (flags, name) in FLAVOURS {
        let prog = build_calls(d, flags, name);
        let want = uftrace_counts(d, &prog, &ARGS);
        let (out, data) = record(d, &prog, &ARGS);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(counts(&call_trace(&data)), want, "{name}: against uftrace");
        assert_eq!(report_counts(&data), want, "{name}: perfaux report");
        let child = child_pid(&out);
        let all = calls_by_tid(&data);
        let theirs = calls_of(&all, child);
        assert_eq!(
            theirs[..3],
            ["main", "on_the_way", "boom"],
            "{name}: the child's trace starts with the calls open at the fork"
        );
        assert_eq!(counts(&theirs), child_counts(1), "{name}: the child's");
        if perfaux_testutil::oracle("perf") {
            perf_names_the_childs_functions(d, &prog, name);
        }
    }
}

/// perf 6.1 reads a fork run recorded with `probe:fib` and shows the child's 15 fib samples
/// under the child's comm and pid, named `fib` in the program (the maps perf gave the child
/// from its parent on the FORK record).
fn perf_names_the_childs_functions(d: &Path, prog: &Path, name: &str) {
    let data = d.join(format!("{name}_probe.data"));
    let out = Command::new(PERFAUX)
        .current_dir(d)
        .args(["record", "-e", "swtrace//", "-e", "probe:fib", "-o"])
        .arg(&data)
        .arg("--")
        .arg(prog)
        .args(ARGS)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let child = child_pid(&out).to_string();
    let home = tempfile::tempdir().unwrap();
    let mut c =
        perfaux_testutil::perf_command(&["script", "-i", data.to_str().unwrap()], home.path());
    let p = c.output().unwrap();
    let text = String::from_utf8_lossy(&p.stdout);
    let err = String::from_utf8_lossy(&p.stderr);
    assert!(p.status.success(), "perf script: {err}");
    assert_eq!(err.trim(), "", "perf script warned");
    let samples: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" probe:fib:"))
        .filter(|l| l.split_whitespace().nth(1) == Some(child.as_str()))
        .collect();
    assert_eq!(
        samples.len(),
        15,
        "{name}: the child's fib samples in\n{text}"
    );
    let path = format!("{})", prog.display());
    for l in samples {
        assert!(l.trim_start().starts_with(&format!("{name} ")), "comm: {l}");
        assert!(l.contains(" fib+0x0 (") && l.ends_with(&path), "{l}");
    }
}

#[test]
fn a_forked_child_that_crashes_keeps_its_calls_up_to_the_crash() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    for (flags, name) in FLAVOURS {
        let prog = build_calls(dir.path(), flags, name);
        let (out, data) = record(dir.path(), &prog, &["1", "4", "forksegv", "nojmp"]);
        // The parent checks that its child died of SIGSEGV and ends well.
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs = calls_of(&calls_by_tid(&data), child_pid(&out));
        assert_eq!(
            theirs.last().map(String::as_str),
            Some("boom"),
            "{name}: the child's trace ends in the boom() that crashed: {theirs:?}"
        );
        assert_eq!(counts(&theirs), child_counts(2), "{name}: the child's");
    }
}

/// `forkexec`: the child execs the program again as `calls 0 4 nojmp`; that image is traced as
/// the child (its pid found in the control area's table of children). uftrace, which follows
/// both, judges the sum over the processes, and its report of the image's run alone judges
/// the child's calls.
#[test]
fn an_image_a_forked_child_execs_is_traced_with_uftraces_call_counts() {
    the_child_image_is_traced_with_uftraces_call_counts("forkexec");
}

/// `spawnexec`: the same child made by posix_spawn (glibc's runs no fork handler, so the child
/// is in no table of children when its image starts): traced as perf's inherit and uftrace
/// trace it, its parent named by its FORK record.
#[test]
fn an_image_a_spawned_child_execs_is_traced_with_uftraces_call_counts() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("uftrace");
    the_child_image_is_traced_with_uftraces_call_counts("spawnexec");
    perfaux_testutil::require_oracle!("perf");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_calls(dir.path(), &["-finstrument-functions"], "spawn_fi");
    let (out, data) = record(dir.path(), &prog, &["1", "4", "spawnexec", "nojmp"]);
    assert!(out.status.success());
    let child = child_pid(&out);
    let forked = format!("PERF_RECORD_FORK({child}:{child})");
    let fork = perf_line(&data, &["script", "--show-task-events"], &forked, |l| {
        l.contains(&forked)
    });
    let parent = out_parent_pid(&data);
    assert!(
        fork.contains(&format!("):({parent}:{parent})")),
        "the spawned child's parent is the program ({parent}): {fork}"
    );
}

/// `closefds`: the child puts other files under every inherited descriptor number above 2 (as
/// a shell or Python's `close_fds` may leave them): under the recorder's memfds' numbers
/// memfds of the same sizes and seals (sealed against writes too, so a runtime that took one
/// for the recorder's could not trace into it), elsewhere a plain file; then it execs the
/// program. The image is traced through the recorder's descriptors (/proc), with uftrace's
/// counts for its run, and the plain file is left as it was.
#[test]
fn an_image_started_with_its_descriptors_replaced_is_traced() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let scratch = d.join("scratch");
    let bytes: Vec<u8> = (0..1 << 20).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&scratch, &bytes).unwrap();
    for (flags, name) in FLAVOURS {
        let prog = build_calls(d, flags, name);
        let want_child = uftrace_counts(d, &prog, &["0", "4", "nojmp"]);
        let args = ["1", "4", "closefds", "nojmp"];
        let env = [("CALLS_SCRATCH", scratch.as_path())];
        let (out, data) = record_with(d, &prog, &args, &[], &env);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs = calls_of(&calls_by_tid(&data), child_pid(&out));
        assert_eq!(counts(&theirs), want_child, "{name}: the exec'd image's");
        assert!(
            std::fs::read(&scratch).unwrap() == bytes,
            "{name}: the file under the inherited numbers was written"
        );
    }
}

/// dash (Debian's /bin/sh), which starts its commands with vfork, so that no fork handler runs
/// (bash forks them); `None`, said as a skip, without it.
fn dash() -> Option<&'static Path> {
    let dash = Path::new("/bin/dash");
    if !dash.exists() {
        perfaux_testutil::skip("dash not found");
        return None;
    }
    Some(dash)
}

/// The pid of the program's main thread: the first call's tid.
fn out_parent_pid(data: &Path) -> u32 {
    calls_by_tid(data)[0].0
}

/// `perfaux record -- dash -c 'prog ...; prog ...'`: a shell (not instrumented) starts the
/// commands with vfork; each command's image is traced under its own pid, with the counts
/// uftrace gives one run.
#[test]
fn the_commands_a_shell_runs_are_traced() {
    let Some(sh) = in_dash("shell_fi", &["0", "4", "nojmp"], |p| {
        format!("{p} 0 4 nojmp; {p} 0 4 nojmp; true")
    }) else {
        return;
    };
    let all = calls_by_tid(&sh.data);
    let pids = tids(&all);
    assert_eq!(pids.len(), 2, "two commands, two processes: {pids:?}");
    for pid in pids {
        assert_eq!(
            counts(&calls_of(&all, pid)),
            sh.one,
            "the command of pid {pid}"
        );
    }
}

/// A shell that runs 250 uninstrumented commands (each loads five objects or so) before the
/// program: they take no entry of the control area's object table (512 entries), so the
/// program's objects are still written and its functions named, with uftrace's counts.
#[test]
fn commands_that_call_no_hook_leave_the_recording_alone() {
    let Some(sh) = in_dash("quiet_fi", &["0", "4", "nojmp"], |p| {
        format!("i=0; while [ $i -lt 250 ]; do /bin/true; i=$((i+1)); done; {p} 0 4 nojmp")
    }) else {
        return;
    };
    assert_eq!(counts(&call_trace(&sh.data)), sh.one);
}

/// More processes, one after another, than the recording has slots and its ring of loaded
/// objects has entries (a shell running the program 200 times, each run's thread ending
/// before the next begins, each run reporting about 4 objects into a ring of 512): a slot
/// whose thread ended goes to the next and the recorder takes the objects as they come, so
/// every run is traced whole and named, and nothing is said untraced or unrecorded.
#[test]
fn every_run_of_a_shell_loop_longer_than_the_slots_is_traced() {
    let runs = 200;
    let Some(sh) = in_dash("many_fi", &["0", "2", "nojmp"], |p| {
        format!("i=0; while [ $i -lt {runs} ]; do {p} 0 2 nojmp > /dev/null; i=$((i+1)); done")
    }) else {
        return;
    };
    let all = calls_by_tid(&sh.data);
    let pids = tids(&all);
    assert!(!sh.stderr.contains("warning"), "{}", sh.stderr);
    assert_eq!(pids.len(), runs, "traced processes: {}", sh.stderr);
    for pid in pids {
        assert_eq!(counts(&calls_of(&all, pid)), sh.one, "process {pid}");
    }
}

/// The threads with calls, each once (the shell tests' programs are single-threaded: their
/// pids).
fn tids(calls: &[(u32, String)]) -> Vec<u32> {
    let mut t: Vec<u32> = calls.iter().map(|c| c.0).collect();
    t.sort_unstable();
    t.dedup();
    t
}

/// A recording of a dash script: its data and stderr, and uftrace's counts of one run of
/// the program.
struct Shell {
    _dir: tempfile::TempDir,
    data: std::path::PathBuf,
    stderr: String,
    one: BTreeMap<String, u64>,
}

/// Builds calls.c as `name` (-finstrument-functions), has uftrace count one run with
/// `args`, and records dash running `script(program path)`; `None` (a visible skip) without
/// gcc, uftrace or dash.
fn in_dash(name: &str, args: &[&str], script: impl Fn(&str) -> String) -> Option<Shell> {
    if !perfaux_testutil::oracle("gcc") || !perfaux_testutil::oracle("uftrace") {
        return None;
    }
    let dash = dash()?;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let prog = build_calls(d, &["-finstrument-functions"], name);
    let one = uftrace_counts(d, &prog, args);
    let (out, data) = record(d, dash, &["-c", &script(&prog.display().to_string())]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    Some(Shell {
        _dir: dir,
        data,
        stderr,
        one,
    })
}

fn the_child_image_is_traced_with_uftraces_call_counts(how: &str) {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let args = ["1", "4", how, "nojmp"];
    for (flags, name) in FLAVOURS {
        let prog = build_calls(d, flags, name);
        let want = uftrace_counts(d, &prog, &args);
        let want_child = uftrace_counts(d, &prog, &["0", "4", "nojmp"]);
        let (out, data) = record(d, &prog, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(counts(&call_trace(&data)), want, "{name}: against uftrace");
        let theirs = calls_of(&calls_by_tid(&data), child_pid(&out));
        assert_eq!(counts(&theirs), want_child, "{name}: the exec'd image's");
    }
}

/// `forkstay`: the child calls fib(5), tells its parent, and loops on leaf() until killed;
/// the parent ends then. The recording ends with the program the user started, as perf's
/// does: it succeeds, and the child's slot, still written, gives what the child wrote by then
/// (the calls open at the fork, fib(5)'s 15 fib and at least its 8 leaf calls).
#[test]
fn the_recording_ends_with_the_program_and_keeps_a_running_childs_calls() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    for (flags, name) in FLAVOURS {
        let prog = build_calls(dir.path(), flags, name);
        let (out, data) = record(dir.path(), &prog, &["1", "4", "forkstay", "nojmp"]);
        let child = child_pid(&out);
        // SAFETY: kill has no memory preconditions; the pid is the child this test's program
        // forked, still looping.
        assert_eq!(unsafe { libc::kill(child as i32, libc::SIGKILL) }, 0);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs = calls_of(&calls_by_tid(&data), child);
        assert_eq!(theirs[..3], ["main", "on_the_way", "boom"], "{name}");
        let mut c = counts(&theirs);
        let leaves = c.remove("leaf").unwrap_or(0);
        assert!(leaves >= 8, "{name}: {leaves} leaf calls");
        let mut want = child_counts(1);
        want.remove("leaf");
        assert_eq!(c, want, "{name}: the child's");
    }
}
