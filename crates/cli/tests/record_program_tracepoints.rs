//! The kernel's tracepoints by name in a program's recording (issue 23 item 3): `-e
//! syscalls:sys_enter_write -e sched:sched_switch`, and a uprobe tracefs lists (`-e
//! probe_prog:func`, made with `perf probe`), sampled on every hit of the program's threads as
//! perf records them, with the HEADER_TRACING_DATA feature from which perf 6.1's `script`
//! prints their fields without a warning, and perfaux's as `name=value`. Judged by perf recording the same program: as many
//! hits, the same fields; each write lies inside the traced call that made it; what cannot be
//! had is refused saying why.

mod common;

use std::path::{Path, PathBuf};

use common::{path_str, perfaux, tempdir};

/// `say` writes two bytes to stdout, 25 times, a millisecond apart (a sleep: a switch out).
const WRITER: &str = r#"
#include <time.h>
#include <unistd.h>
__attribute__((noinline)) void say(int i) {
    char b[2] = {'a' + i % 26, '\n'};
    write(1, b, 2);
}
int main(void) {
    for (int i = 0; i < 25; i++) {
        say(i);
        struct timespec t = {0, 1000000};
        nanosleep(&t, 0);
    }
    return 0;
}
"#;

const WRITES: usize = 25;

fn build(dir: &Path, name: &str) -> PathBuf {
    std::fs::write(dir.join("writer.c"), WRITER).unwrap();
    perfaux_testutil::gcc_instrumented(dir, &["writer.c", "-o", name]);
    dir.join(name)
}

fn record(data: &Path, events: &[&str], prog: &Path) -> common::Run {
    let mut a = vec!["record", "-o", path_str(data)];
    for e in events {
        a.extend_from_slice(&["-e", e]);
    }
    a.extend_from_slice(&["--", path_str(prog)]);
    perfaux(&a)
}

/// perf script of `data` (nanosecond times), which must say nothing on stderr.
fn perf_script(data: &Path, home: &Path) -> String {
    let r = perfaux_testutil::perf_on_file(&["script", "--ns"], data, false, home);
    assert!(r.ok(), "perf script: {}", r.stderr);
    assert!(r.stderr.trim().is_empty(), "perf script says: {}", r.stderr);
    r.stdout
}

/// `sec.nsec:` in ns.
fn ns(t: &str) -> u64 {
    let (s, n) = t.trim_end_matches(':').split_once('.').unwrap();
    s.parse::<u64>().unwrap() * 1_000_000_000 + n.parse::<u64>().unwrap()
}

/// Tracepoints beside the trace: perf prints each write's fields from perfaux's file as from
/// its own recording of the same program (fd 1, 2 bytes, 25 of them), every sleep's
/// sched_switch names the program, and each write lies between its `say` call's entry and
/// the next one's in the trace, on the same clock.
#[test]
fn tracepoints_are_recorded_as_perf_records_them() {
    perfaux_testutil::require_oracle!("perf");
    perfaux_testutil::require_oracle!("gcc");
    if let Err(e) = perfaux_recorder::tracefs::tracepoint_id("syscalls", "sys_enter_write") {
        perfaux_testutil::skip(&format!("no syscalls:sys_enter_write here: {e}"));
        return;
    }
    let d = tempdir();
    let prog = build(d.path(), "writer");
    let data = d.path().join("tp.data");
    let r = record(
        &data,
        &[
            "swtrace//",
            "syscalls:sys_enter_write",
            "sched:sched_switch",
        ],
        &prog,
    );
    assert!(r.ok(), "{}", r.stderr);
    let ours = perf_script(&data, d.path());
    let theirs_data = d.path().join("perf.data");
    let st = perfaux_testutil::perf_command(
        &[
            "record",
            "-q",
            "-e",
            "syscalls:sys_enter_write",
            "-o",
            path_str(&theirs_data),
            "--",
        ],
        d.path(),
    )
    .arg(&prog)
    .stdout(std::process::Stdio::null())
    .status()
    .unwrap();
    assert!(st.success());
    let theirs = perf_script(&theirs_data, d.path());
    let writes = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains("syscalls:sys_enter_write:") && l.contains("writer"))
            .map(|l| {
                l.split("sys_enter_write:")
                    .nth(1)
                    .unwrap()
                    .trim()
                    .to_string()
            })
            .collect()
    };
    let (a, b) = (writes(&ours), writes(&theirs));
    assert_eq!(a.len(), WRITES, "{ours}");
    assert_eq!(b.len(), WRITES, "{theirs}");
    // The fields but the buffer's address (another run's stack).
    let fields = |w: &String| {
        w.split(", ")
            .filter(|f| !f.starts_with("buf:"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(fields(x), fields(y));
        assert!(x.starts_with("fd: 0x00000001"), "{x}");
    }
    let switches = ours
        .lines()
        .filter(|l| l.contains("sched:sched_switch:") && l.contains("prev_comm=writer"))
        .count();
    assert!(
        switches >= WRITES,
        "{switches} switches out of the writer:\n{ours}"
    );
    // perfaux script prints the same fields from the file's formats (name=value).
    let script = perfaux(&["script", "-i", path_str(&data)]);
    assert!(script.ok(), "{}", script.stderr);
    let printed = script
        .stdout
        .lines()
        .filter(|l| l.contains("syscalls:sys_enter_write: ") && l.contains(" fd=1 "))
        .filter(|l| l.trim_end().ends_with(" count=2"))
        .count();
    assert_eq!(printed, WRITES, "{}", script.stdout);
    assert!(
        script
            .stdout
            .contains("sched:sched_switch: prev_comm=writer prev_pid="),
        "{}",
        script.stdout
    );
    // On the trace's clock: each write inside its say call.
    let calls = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert!(calls.ok(), "{}", calls.stderr);
    let says: Vec<u64> = calls
        .stdout
        .lines()
        .filter(|l| l.trim_end().ends_with(" say"))
        .map(|l| ns(l.split_whitespace().nth(3).unwrap()))
        .collect();
    assert_eq!(says.len(), WRITES, "{}", calls.stdout);
    let times: Vec<u64> = ours
        .lines()
        .filter(|l| l.contains("syscalls:sys_enter_write:") && l.contains("writer"))
        .map(|l| ns(l.split_whitespace().nth(3).unwrap()))
        .collect();
    for (k, t) in times.iter().enumerate() {
        let end = says.get(k + 1).copied().unwrap_or(u64::MAX);
        assert!(
            says[k] <= *t && *t < end,
            "write {k} at {t} outside say's call [{}, {end})",
            says[k]
        );
    }
}

/// A uprobe that tracefs lists (made with `perf probe -x PROG say`) is a tracepoint like any:
/// `-e probe_PROG:say` samples each of the 25 calls.
#[test]
fn a_uprobe_tracefs_lists_is_recorded_by_its_name() {
    perfaux_testutil::require_oracle!("perf");
    perfaux_testutil::require_oracle!("gcc");
    if perfaux_recorder::tracefs::tracefs_dir().is_err() {
        perfaux_testutil::skip("no tracefs here");
        return;
    }
    let d = tempdir();
    // A name of its own: uprobes are the whole system's.
    let prog = build(d.path(), "uprobed_writer");
    let made = common::perf(&["probe", "-x", path_str(&prog), "-a", "say"], d.path());
    assert!(made.ok(), "perf probe: {}", made.stderr);
    let data = d.path().join("up.data");
    let r = record(&data, &["swtrace//", "probe_uprobed_writer:say"], &prog);
    let removed = common::perf(&["probe", "-d", "probe_uprobed_writer:say"], d.path());
    assert!(r.ok(), "{}", r.stderr);
    assert!(removed.ok(), "{}", removed.stderr);
    let script = perf_script(&data, d.path());
    let hits = script
        .lines()
        .filter(|l| l.contains("probe_uprobed_writer:say:"))
        .count();
    assert_eq!(hits, WRITES, "{script}");
}

/// A tracepoint that does not exist, and one an ordinary user cannot read, are refused
/// before the program runs, saying which and why.
#[test]
fn a_tracepoint_that_cannot_be_had_is_refused_with_why() {
    perfaux_testutil::require_oracle!("gcc");
    if perfaux_recorder::tracefs::tracefs_dir().is_err() {
        perfaux_testutil::skip("no tracefs here");
        return;
    }
    let d = tempdir();
    let prog = build(d.path(), "writer");
    let data = d.path().join("x.data");
    let r = record(&data, &["swtrace//", "sched:no_such_event"], &prog);
    assert!(!r.ok());
    assert!(
        r.stderr.contains("no tracepoint 'sched:no_such_event'"),
        "{}",
        r.stderr
    );
    assert!(!data.exists());
    // The built-in workload runs perfaux's own perf core: no kernel tracepoints there.
    let r = perfaux(&["record", "-o", path_str(&data), "-e", "swtrace//"]);
    assert!(r.ok(), "{}", r.stderr);
    std::fs::remove_file(&data).unwrap();
    let r = perfaux(&[
        "record",
        "-o",
        path_str(&data),
        "-e",
        "swtrace//",
        "-e",
        "sched:sched_switch",
    ]);
    assert!(!r.ok());
    assert!(
        r.stderr
            .contains("'sched:sched_switch' is a tracepoint of the running kernel")
            && r.stderr.contains("-- ./prog"),
        "{}",
        r.stderr
    );
    assert!(!data.exists());
    let Some(mut cmd) = common::perfaux_as_ordinary_user(d.path()) else {
        return;
    };
    let out = cmd
        .args(["record", "-o", path_str(&data), "-e", "swtrace//"])
        .args(["-e", "sched:sched_switch", "--", path_str(&prog)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let readable = std::fs::metadata("/sys/kernel/tracing")
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o005 == 0o005)
        .unwrap_or(false);
    if !readable {
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains("sched:sched_switch") && stderr.contains("root"),
            "{stderr}"
        );
    }
}
