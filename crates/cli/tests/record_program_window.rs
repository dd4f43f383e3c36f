//! A flight recording bounded by time (issue 25 item 2): `perfaux record -S --window 500ms --
//! ./prog` keeps in each snapshot at least the last 500 ms of each thread's trace, and not
//! much more (it is cut at the trace's newest restart point, a SYNC, before then); the AUX
//! area's size stays the cap; `perfaux report` says what span each snapshot holds. Judged by
//! the program's own clock: it prints CLOCK_MONOTONIC as it ends.

mod common;

use std::path::{Path, PathBuf};

use common::{path_str, perfaux, tempdir};

/// Calls `tick` about every millisecond for 2 s, then prints CLOCK_MONOTONIC in ns.
const TICKER: &str = r#"
#include <stdio.h>
#include <time.h>
__attribute__((noinline)) void tick(int i) { (void)i; }
static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}
int main(void) {
    long end = now_ns() + 2000000000L;
    int i = 0;
    while (now_ns() < end) {
        tick(i++);
        struct timespec t = {0, 1000000};
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

/// Records the ticker with `opts`; its end as its own clock says.
fn record(data: &Path, opts: &[&str], prog: &Path) -> u64 {
    let mut a = vec!["record", "-o", path_str(data)];
    a.extend_from_slice(opts);
    a.extend_from_slice(&["--", path_str(prog)]);
    let r = perfaux(&a);
    assert!(r.ok(), "{}", r.stderr);
    r.stdout
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}", r.stdout))
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
    // At least the last 500 ms before the snapshot (taken after the program's end)...
    assert!(
        first <= end - 500_000_000,
        "the first tick kept is {} ms before the end",
        (end - first) / 1_000_000
    );
    // ...and no more than a restart point's spacing beyond it (a SYNC every 512 bytes: a few
    // tens of ms of ticks), of the 2 s the area held.
    assert!(
        first >= end - 700_000_000,
        "the first tick kept is {} ms before the end",
        (end - first) / 1_000_000
    );
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
