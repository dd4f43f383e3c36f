//! The kernel's events as triggers of the trace (issue 23 item 4): a tracepoint or software
//! event with an aux-action, or in the trace's group with `--aux-sample`, is opened by each
//! traced thread as a `ktrigger` event of perfaux's core, whose kernel side (sigtrap) signals
//! the thread at each hit on its way back to user space: `-e swtrace/aux-action=start-paused/
//! -e syscalls:sys_enter_write/aux-action=resume/ -e
//! syscalls:sys_enter_clock_nanosleep/aux-action=pause/` traces exactly what runs between a
//! write and the next sleep; `-e '{swtrace//,page-faults}' --aux-sample=4096` gives each page
//! fault the trace that led to it.

mod common;

use std::path::{Path, PathBuf};

use common::{path_str, perfaux, tempdir};

/// 20 rounds of: before(), a write, inside(), a sleep, after().
const WINDOWS: &str = r#"
#include <time.h>
#include <unistd.h>
__attribute__((noinline)) int before(int i) { return i * 3; }
__attribute__((noinline)) int inside(int i) { return i * 5; }
__attribute__((noinline)) int after(int i) { return i * 7; }
int main(void) {
    int s = 0;
    for (int i = 0; i < 20; i++) {
        s += before(i);
        write(1, "x", 1);
        s += inside(i);
        struct timespec t = {0, 100000};
        nanosleep(&t, 0);
        s += after(i);
    }
    return s == 42;
}
"#;

/// WINDOWS with a SIGTRAP handler of the program's own, installed in main (after the
/// runtime's first hook, when the triggers' handler holds SIGTRAP), and four traps it raises
/// itself: it exits 0 if its handler saw exactly those four.
const OWN_TRAPS: &str = r#"
#include <signal.h>
#include <time.h>
#include <unistd.h>
static volatile int traps;
static void on_trap(int s) { (void)s; traps++; }
__attribute__((noinline)) int inside(int i) { return i * 5; }
__attribute__((noinline)) int after(int i) { return i * 7; }
int main(void) {
    signal(SIGTRAP, on_trap);
    int s = 0;
    for (int i = 0; i < 20; i++) {
        write(1, "x", 1);
        s += inside(i);
        struct timespec t = {0, 100000};
        nanosleep(&t, 0);
        s += after(i);
        if (i % 5 == 0) raise(SIGTRAP);
    }
    return traps == 4 ? 0 : 10 + traps;
}
"#;

/// `toucher` writes to 50 fresh pages, calling `warm` before each.
const TOUCHER: &str = r#"
#include <sys/mman.h>
#include <unistd.h>
__attribute__((noinline)) void warm(int i) { (void)i; }
__attribute__((noinline)) void toucher(char *p, long page, int n) {
    for (int i = 0; i < n; i++) { warm(i); p[i * page] = 1; }
}
int main(void) {
    long page = sysconf(_SC_PAGESIZE);
    char *p = mmap(0, 50 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    madvise(p, 50 * page, MADV_NOHUGEPAGE);
    toucher(p, page, 50);
    return 0;
}
"#;

fn build(dir: &Path, src: &str, name: &str) -> PathBuf {
    std::fs::write(dir.join(format!("{name}.c")), src).unwrap();
    perfaux_testutil::gcc_instrumented(dir, &[&format!("{name}.c"), "-o", name]);
    dir.join(name)
}

/// `prog` recorded with its trace resumed at each write and paused at each sleep, and the
/// recording's call trace.
fn record_windows(dir: &Path, prog: &Path) -> (common::Run, common::Run) {
    let data = dir.join("windows.data");
    let r = perfaux(&[
        "record",
        "-o",
        path_str(&data),
        "-e",
        "swtrace/aux-action=start-paused/",
        "-e",
        "syscalls:sys_enter_write/aux-action=resume/",
        "-e",
        "syscalls:sys_enter_clock_nanosleep/aux-action=pause/",
        "--",
        path_str(prog),
    ]);
    let calls = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert!(!r.ok() || calls.ok(), "{}", calls.stderr);
    (r, calls)
}

/// The last word of each call-trace line, counted.
fn last_words(text: &str) -> std::collections::HashMap<String, usize> {
    let mut m = std::collections::HashMap::new();
    for l in text.lines() {
        if let Some(w) = l.split_whitespace().last() {
            *m.entry(w.to_string()).or_insert(0) += 1;
        }
    }
    m
}

/// A write resumes the trace and the next sleep pauses it: the trace holds the 20 calls of
/// `inside` between them and none of `before` or `after`, with 20 resumes and 20 pauses.
#[test]
fn a_kernel_event_resumes_the_trace_and_another_pauses_it() {
    perfaux_testutil::require_oracle!("gcc");
    if let Err(e) = perfaux_recorder::tracefs::tracepoint_id("syscalls", "sys_enter_write") {
        perfaux_testutil::skip(&format!("no syscalls:sys_enter_write here: {e}"));
        return;
    }
    let d = tempdir();
    let prog = build(d.path(), WINDOWS, "windows");
    let (r, calls) = record_windows(d.path(), &prog);
    assert!(r.ok(), "{}", r.stderr);
    let w = last_words(&calls.stdout);
    let n = |k: &str| w.get(k).copied().unwrap_or(0);
    assert_eq!(
        (n("inside"), n("before"), n("after"), n("main")),
        (20, 0, 0, 0),
        "{}",
        calls.stdout
    );
    assert_eq!(
        (n("(resumed)"), n("(paused)")),
        (20, 20),
        "{}",
        calls.stdout
    );
}

/// A decoded call's line under a sample (its time in ns: nine decimals, where a sample's line
/// has six).
fn is_call_line(l: &str) -> bool {
    l.split_whitespace()
        .nth(3)
        .and_then(|t| t.trim_end_matches(':').split_once('.'))
        .is_some_and(|(_, frac)| frac.len() == 9)
}

/// The triggers take no SIGTRAP of the program's: its own handler, installed after the
/// triggers' (the runtime hands `signal(SIGTRAP, ...)` to the triggers' handler to chain to),
/// sees exactly the four traps it raised, and the trace still holds the 20 windows.
#[test]
fn the_programs_own_sigtrap_handler_works_beside_the_triggers() {
    perfaux_testutil::require_oracle!("gcc");
    if let Err(e) = perfaux_recorder::tracefs::tracepoint_id("syscalls", "sys_enter_write") {
        perfaux_testutil::skip(&format!("no syscalls:sys_enter_write here: {e}"));
        return;
    }
    let d = tempdir();
    let prog = build(d.path(), OWN_TRAPS, "own_traps");
    let (r, calls) = record_windows(d.path(), &prog);
    assert_eq!(
        r.code, 0,
        "the program's handler saw other than its 4 traps: {}",
        r.stderr
    );
    let w = last_words(&calls.stdout);
    assert_eq!(
        (w.get("inside").copied(), w.get("after").copied()),
        (Some(20), None),
        "{}",
        calls.stdout
    );
}

/// Each page fault of `toucher` (the kernel's page-faults, grouped behind the trace) is a
/// sample that carries the trace before it: all 50 decode to calls that end in toucher, as
/// perf places those faults.
#[test]
fn a_page_fault_samples_the_trace_that_led_to_it() {
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let prog = build(d.path(), TOUCHER, "toucher");
    let data = d.path().join("pf.data");
    let r = perfaux(&[
        "record",
        "-o",
        path_str(&data),
        "-e",
        "{swtrace//,page-faults}",
        "--aux-sample=4096",
        "--",
        path_str(&prog),
    ]);
    assert!(r.ok(), "{}", r.stderr);
    let script = perfaux(&["script", "-i", path_str(&data)]);
    assert!(script.ok(), "{}", script.stderr);
    // Each sample's line, then its AUX data's calls, indented.
    let mut samples: Vec<Vec<String>> = Vec::new();
    for l in script.stdout.lines() {
        if l.contains("page-faults:") {
            samples.push(Vec::new());
        } else if let Some(s) = samples.last_mut()
            && is_call_line(l)
        {
            s.push(l.split_whitespace().last().unwrap().to_string());
        }
    }
    let in_toucher = samples
        .iter()
        .filter(|calls| calls.iter().any(|c| c == "toucher"))
        .count();
    assert!(
        in_toucher >= 50,
        "{in_toucher} of {} samples carry toucher's trace:\n{}",
        samples.len(),
        script.stdout
    );
    // perf reads the file and places 50 of the faults in toucher.
    if perfaux_testutil::oracle("perf") {
        let r = perfaux_testutil::perf_on_file(&["script", "-F", "ip,sym"], &data, false, d.path());
        assert!(
            r.ok() && r.stderr.trim().is_empty(),
            "perf script: {}",
            r.stderr
        );
        let in_perf = r.stdout.lines().filter(|l| l.ends_with(" toucher")).count();
        assert_eq!(in_perf, 50, "{}", r.stdout);
    }
}

/// An ordinary user's program takes the kernel's page faults as triggers too (sigtrap on
/// one's own threads needs no privilege at perf_event_paranoid 2).
#[test]
fn an_ordinary_users_program_takes_kernel_triggers() {
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let Some(mut cmd) = common::perfaux_as_ordinary_user(d.path()) else {
        return;
    };
    let prog = build(d.path(), TOUCHER, "toucher");
    let data = d.path().join("u.data");
    let out = cmd
        .args([
            "record",
            "-o",
            path_str(&data),
            "-e",
            "{swtrace//,page-faults}",
        ])
        .args(["--aux-sample=1024", "--", path_str(&prog)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let paranoid = common::perf_event_paranoid();
    if paranoid > 2 {
        assert!(!out.status.success(), "{stderr}");
        return;
    }
    assert!(out.status.success(), "{stderr}");
    let script = perfaux(&["script", "-i", path_str(&data)]);
    let faults = script
        .stdout
        .lines()
        .filter(|l| l.contains("page-faults:"))
        .count();
    assert!(faults >= 50, "{faults}\n{}", script.stdout);
}
