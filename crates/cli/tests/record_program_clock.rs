//! The TSC rate a recording keeps for the next ones (crates/preload/src/tsc_cache.rs):
//! the first recording of a boot measures it and keeps its first pair in the cache directory;
//! the next ones take it from there (no 10 ms wait) and leave it as it was. Either way each
//! call of the traced program is timed inside its thread's traced life, as the recording's
//! own CLOCK_MONOTONIC records say: after the trace event opened (PERF_RECORD_ITRACE_START)
//! and before the AUX data that holds it was published (its last PERF_RECORD_AUX).

mod calls;

use std::process::Command;

use calls::*;

/// Microseconds from a perf-style "SECONDS.FRACTION" time.
fn micros(t: &str) -> u64 {
    let (s, f) = t.trim_end_matches(':').split_once('.').unwrap();
    let f = format!("{f:0<6}");
    s.parse::<u64>().unwrap() * 1_000_000 + f[..6].parse::<u64>().unwrap()
}

/// Every call of `data` lies between its thread's ITRACE_START and its last PERF_RECORD_AUX
/// (a microsecond of rounding either side); the number of calls.
fn calls_inside_the_traced_life(data: &std::path::Path) -> usize {
    let script = Command::new(PERFAUX)
        .args(["script", "-i"])
        .arg(data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&script.stdout);
    let (mut start, mut end) = (None, None);
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if l.contains("PERF_RECORD_ITRACE_START") {
            start.get_or_insert(micros(f[3]));
        } else if l.contains("PERF_RECORD_AUX ") {
            end = Some(micros(f[3]));
        }
    }
    let (start, end) = (start.expect(&text), end.expect(&text));
    let trace = Command::new(PERFAUX)
        .args(["script", "--call-trace", "-i"])
        .arg(data)
        .output()
        .unwrap();
    let trace = String::from_utf8_lossy(&trace.stdout);
    let mut n = 0;
    for l in trace.lines() {
        let t = micros(l.split_whitespace().nth(3).unwrap());
        assert!(
            t + 1 >= start && t <= end + 1,
            "a call at {t} us outside [{start}, {end}]: {l}"
        );
        n += 1;
    }
    n
}

#[test]
fn the_tsc_rate_is_kept_for_the_next_recordings_of_the_boot() {
    if !perfaux_testutil::oracle("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cache = d.join("cache");
    std::fs::create_dir(&cache).unwrap();
    let prog = build_calls(d, &["-finstrument-functions"], "calls_clock");
    let env = [("XDG_CACHE_HOME", cache.as_path())];
    let args = ["1", "12"];
    let (out, data) = record_with(d, &prog, &args, &[], &env);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = calls_inside_the_traced_life(&data);
    let kept = cache.join("perfaux").join("tsc-rate");
    let line = std::fs::read_to_string(&kept).expect("the first recording keeps its rate");
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let w: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(w.len(), 8, "{line}");
    assert_eq!((w[0], w[1]), ("perfaux-tsc-rate-2", boot.trim()), "{line}");

    let (out, data) = record_with(d, &prog, &args, &[], &env);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(calls_inside_the_traced_life(&data), first, "the same calls");
    assert_eq!(
        std::fs::read_to_string(&kept).unwrap(),
        line,
        "the kept pair stays as it was"
    );
}
