//! A full trace whose AUX area fills (issue 22, item 8): the transaction ends TRUNCATED, and
//! tracing resumes by itself once the recorder has made room (no re-enable, as the kernel's
//! drivers restart at their next `perf_aux_output_begin`); the summary names each gap: which
//! thread had no trace over which time span, and how many trace events were dropped. The
//! built-in workload's three threads trace far faster than an 8 KiB area is drained.

mod common;

use common::{path_str, perfaux, record, tempdir};

/// A gap of the summary: (tid, from, to) in ns; `to` is None for a gap to the recording's end.
fn gaps(stderr: &str) -> Vec<(u32, u64, Option<u64>)> {
    let ns = |s: &str| -> u64 {
        let (sec, usec) = s.split_once('.').unwrap();
        sec.parse::<u64>().unwrap() * 1_000_000_000 + usec.parse::<u64>().unwrap() * 1000
    };
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("[ perfaux record: thread "))
        .filter(|l| l.contains(": no trace from "))
        .map(|l| {
            let (tid, rest) = l.split_once(": no trace from ").unwrap();
            let (from, rest) = rest.split_once(" to ").unwrap();
            let to = rest.split_whitespace().next().unwrap();
            let to = (to != "the").then(|| ns(to));
            if to.is_some() {
                assert!(rest.contains(" trace events dropped"), "{l}");
            }
            (tid.parse().unwrap(), ns(from), to)
        })
        .collect()
}

#[test]
fn a_truncated_trace_resumes_and_the_summary_names_the_gap() {
    let dir = tempdir();
    let (data, run) = record(
        dir.path(),
        "small_aux.data",
        &["--requests", "20000", "-m", ",8K"],
    );
    let gaps = gaps(&run.stderr);
    let closed: Vec<_> = gaps
        .iter()
        .filter_map(|&(tid, from, to)| to.map(|to| (tid, from, to)))
        .collect();
    assert!(
        !closed.is_empty(),
        "a gap with its end (the trace resumed): {}",
        run.stderr
    );
    for &(_, from, to) in &closed {
        assert!(from <= to, "{from} .. {to}");
    }
    // The calls after each resumed gap are in the trace, decoded, on the gap's thread.
    let script = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert_eq!(script.code, 0, "{}", script.stderr);
    let calls: Vec<(u32, u64)> = script
        .stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let time = w.get(3)?.strip_suffix(':')?.trim_start_matches('~');
            let (sec, nsec) = time.split_once('.')?;
            Some((
                w.get(1)?.parse().ok()?,
                sec.parse::<u64>().ok()? * 1_000_000_000 + nsec.parse::<u64>().ok()?,
            ))
        })
        .collect();
    for &(tid, from, to) in &closed {
        assert!(
            calls.iter().any(|&(t, at)| t == tid && at >= to),
            "thread {tid}: calls after its gap {from}..{to}"
        );
    }
}
