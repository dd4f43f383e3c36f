//! A flight recording bounded by time (issue 25 item 2): `perfaux record -S --window 500ms --
//! ./prog` keeps in each snapshot the last 500 ms of each thread's trace, from its first
//! packet at or after the snapshot's time less 500 ms (the state there said by a SYNC made for
//! the cut), however seldom the thread writes; the AUX area's size stays the cap; `perfaux
//! report` says what span each snapshot holds. Judged by the program's own clock: it prints
//! CLOCK_MONOTONIC as it ends, a moment before the snapshot (taken at its exit).

mod common;

use std::path::{Path, PathBuf};

use common::{path_str, perfaux, tempdir};

/// Calls `tick` about every millisecond (or every `argv[1]` µs) for 2 s, then prints
/// CLOCK_MONOTONIC in ns.
const TICKER: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) void tick(int i) { (void)i; }
static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}
int main(int argc, char **argv) {
    long period_us = argc > 1 ? atol(argv[1]) : 1000;
    long end = now_ns() + 2000000000L;
    int i = 0;
    while (now_ns() < end) {
        tick(i++);
        struct timespec t = {period_us / 1000000, period_us % 1000000 * 1000};
        nanosleep(&t, 0);
    }
    printf("%ld\n", now_ns());
    return 0;
}
"#;

fn build(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("ticker.c"), TICKER).unwrap();
    perfaux_testutil::gcc_instrumented(dir, &["ticker.c", "-o", "ticker"]);
    dir.join("ticker")
}

/// Records the ticker with `opts` (and the ticker's own `args`); its end as its own clock says.
fn record_with(data: &Path, opts: &[&str], prog: &Path, args: &[&str]) -> u64 {
    let mut a = vec!["record", "-o", path_str(data)];
    a.extend_from_slice(opts);
    a.extend_from_slice(&["--", path_str(prog)]);
    a.extend_from_slice(args);
    let r = perfaux(&a);
    assert!(r.ok(), "{}", r.stderr);
    r.stdout
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}", r.stdout))
}

/// [`record_with`] the ticker's default period.
fn record(data: &Path, opts: &[&str], prog: &Path) -> u64 {
    record_with(data, opts, prog, &[])
}

/// The first kept tick's distance from the program's end must be 500 ms (the window) and at
/// most `slack` more than the window less the time the snapshot came after the end: the
/// first tick at or past the window's start.
fn assert_window(first: u64, end: u64, slack_ms: u64) {
    let before = (end - first) / 1_000_000;
    assert!(
        first >= end - 500_000_000,
        "the first tick kept is {before} ms before the end: more than the window"
    );
    assert!(
        first <= end - 500_000_000 + slack_ms * 1_000_000,
        "the first tick kept is {before} ms before the end: less than the window allows"
    );
}

/// The times (ns) of the ticks in the recording's call trace.
fn ticks(data: &Path) -> Vec<u64> {
    let r = perfaux(&["script", "--call-trace", "-i", path_str(data)]);
    assert!(r.ok(), "{}", r.stderr);
    r.stdout
        .lines()
        .filter(|l| l.trim_end().ends_with(" tick"))
        .map(|l| {
            let t = l.split_whitespace().nth(3).unwrap().trim_end_matches(':');
            let (s, n) = t.split_once('.').unwrap();
            s.parse::<u64>().unwrap() * 1_000_000_000 + n.parse::<u64>().unwrap()
        })
        .collect()
}

#[test]
fn a_window_keeps_its_span_of_the_newest_trace_and_little_more() {
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let prog = build(d.path());
    let data = d.path().join("w.data");
    let end = record(&data, &["-Se", "--window", "500ms"], &prog);
    let t = ticks(&data);
    assert!(!t.is_empty());
    let (first, last) = (t[0], *t.last().unwrap());
    // The last 500 ms before the snapshot (taken a moment after the program's end), of the
    // 2 s the area held: a tick a millisecond, so the first kept is within a few ms of the
    // window's start (the snapshot's delay after the end is the rest of the slack).
    assert_window(first, end, 100);
    assert!(
        end - last < 50_000_000,
        "the last tick is the program's last"
    );
    // The report says what the snapshot holds.
    let r = perfaux(&["report", "-i", path_str(&data)]);
    assert!(r.ok(), "{}", r.stderr);
    let line = r
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("snapshot 1: holds "))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(line.ends_with(" ms)") || line.ends_with(" s)"), "{line}");
    // Without the window, the snapshot holds all the area held: the whole 2 s.
    let all = d.path().join("all.data");
    let end = record(&all, &["-Se"], &prog);
    let t = ticks(&all);
    assert!(
        end - t[0] > 1_800_000_000,
        "{} ms",
        (end - t[0]) / 1_000_000
    );
}

/// A thread that writes seldom (a tick every 100 ms: 2 s of ticks lie between two of the
/// writer's restart points, which come every 512 bytes) is cut at the window too, not at its
/// restart point 2 s back.
#[test]
fn a_thread_that_writes_seldom_is_cut_at_the_window_too() {
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let prog = build(d.path());
    let data = d.path().join("s.data");
    let end = record_with(&data, &["-Se", "--window", "500ms"], &prog, &["100000"]);
    let t = ticks(&data);
    assert!(t.len() >= 4 && t.len() <= 6, "{} ticks kept", t.len());
    assert_window(t[0], end, 200);
}

/// The AUX area's size stays the cap: a 4 KiB area with a window of 10 s holds 4 KiB at
/// most, the newest.
#[test]
fn the_area_size_stays_the_cap() {
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let prog = build(d.path());
    let data = d.path().join("c.data");
    let end = record(&data, &["-Se", "--window", "10s", "-m", ",4K"], &prog);
    let t = ticks(&data);
    assert!(
        end - t[0] < 1_000_000_000,
        "{} ms",
        (end - t[0]) / 1_000_000
    );
    let r = perfaux(&["report", "-i", path_str(&data)]);
    let bytes: u64 = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("# snapshots: 1 ("))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(bytes <= 4096, "{bytes} bytes");
}

#[test]
fn a_window_needs_a_flight_recording_and_a_duration() {
    let d = tempdir();
    let data = d.path().join("x.data");
    for (args, says) in [
        (&["--window", "2s"][..], "needs -S"),
        (
            &["-S", "--window", "2 weeks"][..],
            "--window 2 weeks: a duration",
        ),
        (&["-S", "--window", "0s"][..], "--window 0s: a duration"),
    ] {
        let mut a = vec!["record", "-o", path_str(&data)];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--", "true"]);
        let r = perfaux(&a);
        assert!(!r.ok(), "{args:?}");
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
    }
}
