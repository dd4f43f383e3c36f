//! Seed 003's scenario (`perf record -e intel_pt/aux-action=start-paused/
//! -e ...sys_enter.../aux-action=resume/ -e ...sys_exit.../aux-action=pause/`
//! then `perf script --call-trace`): the trace starts paused, a probe on
//! `serve_request` resumes it and a probe on `send_response` pauses it, so
//! the call trace holds exactly the calls made inside each window: the
//! request's parsing, cache lookup and computation, and neither
//! `send_response` (paused before its entry is traced) nor anything else.

mod common;

use std::collections::BTreeMap;

use common::*;
use perfaux::workload::{FIB_N, SLOW_PATH_EVERY};

fn fib_calls(n: u32, depth: usize, out: &mut Vec<(usize, String)>) {
    out.push((depth, "fib".into()));
    if n >= 2 {
        fib_calls(n - 1, depth + 1, out);
        fib_calls(n - 2, depth + 1, out);
    }
}

/// The calls one worker makes inside the windows of `requests` requests,
/// with their depths (perfaux::workload's request path).
fn expected(requests: u32) -> Vec<(usize, String)> {
    let mut v = Vec::new();
    for req in 0..requests {
        v.push((0, "serve_request".into()));
        v.push((1, "parse_request".into()));
        v.push((1, "lookup_cache".into()));
        if req.is_multiple_of(SLOW_PATH_EVERY) {
            v.push((2, "rebuild_cache".into()));
        }
        v.push((1, "compute".into()));
        fib_calls(FIB_N, 2, &mut v);
        v.push((2, "mat_mul".into()));
    }
    v
}

#[test]
fn call_trace_holds_exactly_the_calls_inside_resume_pause_windows() {
    let dir = tempdir();
    let requests = 66; // two slow paths per worker (requests 0 and 64)
    let n = requests.to_string();
    let (f, _) = record_windows(dir.path(), "win.data", &n);
    let r = perfaux(&["script", "--call-trace", "-i", path_str(&f)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut by_tid: BTreeMap<u32, Vec<(usize, String)>> = BTreeMap::new();
    for line in r.stdout.lines() {
        let (head, body) = line.split_once(": ").expect("comm tid [cpu] time: body");
        let tid: u32 = head
            .split_whitespace()
            .nth(1)
            .expect("tid")
            .parse()
            .expect("tid number");
        let name = body.trim_start();
        if name.starts_with("tr strt") || name.starts_with("tr end") {
            continue;
        }
        let depth = (body.len() - name.len()) / 4;
        by_tid
            .entry(tid)
            .or_default()
            .push((depth, name.to_string()));
    }
    assert_eq!(
        by_tid.len(),
        perfaux::workload::WORKERS,
        "{}",
        &r.stdout[..r.stdout.len().min(2000)]
    );
    let want = expected(requests);
    for (tid, calls) in &by_tid {
        assert!(
            !calls.iter().any(|(_, n)| n == "send_response"),
            "thread {tid} traced past the pause"
        );
        assert_eq!(calls.len(), want.len(), "thread {tid}");
        assert_eq!(calls, &want, "thread {tid}");
    }
}

/// Seed 004's flight recorder: with `-Se` and a small AUX area that wraps
/// many times, the snapshot at exit holds the newest calls of each thread:
/// its call trace ends with the last request's `send_response`, and holds
/// far fewer requests than were served.
#[test]
fn snapshot_call_trace_ends_with_the_newest_calls() {
    let dir = tempdir();
    let requests = 1500;
    let n = requests.to_string();
    let (f, _) = record(
        dir.path(),
        "fr.data",
        &["-Se", "-m", ",16K", "--requests", &n],
    );
    let r = perfaux(&["script", "--call-trace", "-i", path_str(&f)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut by_tid: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for line in r.stdout.lines() {
        let (head, body) = line.split_once(": ").expect("comm tid [cpu] time: body");
        let tid: u32 = head
            .split_whitespace()
            .nth(1)
            .expect("tid")
            .parse()
            .expect("tid number");
        by_tid.entry(tid).or_default().push(body.trim().to_string());
    }
    assert_eq!(by_tid.len(), perfaux::workload::WORKERS);
    for (tid, calls) in &by_tid {
        let last = calls
            .iter()
            .rfind(|c| !c.starts_with("tr "))
            .expect("a call");
        assert_eq!(
            last, "send_response",
            "thread {tid}: the newest call is the last request's response"
        );
        let served = calls.iter().filter(|c| *c == "serve_request").count();
        assert!(
            served > 0 && served < requests as usize / 10,
            "thread {tid}: {served} requests in 16 KiB"
        );
    }
}

/// `--aux-sample`: each sample's AUX data (the newest trace bytes when the
/// probe fired) is decoded under the sample line. Every call shown there is
/// a call of the full trace of the same thread at the same time (the full
/// `--call-trace` of the same file is the reference) made by the sample's
/// own thread, and the samples together show calls. (Trace and sample
/// times are not compared: under load they drift apart, time_agreement.rs.)
#[test]
fn aux_sample_lines_show_the_calls_the_sample_carries() {
    let dir = tempdir();
    let (f, _) = record(
        dir.path(),
        "as.data",
        &[
            "-e",
            "{swtrace//,probe:lookup_cache}",
            "--aux-sample=1024",
            "--requests",
            "5",
        ],
    );
    let script = perfaux(&["script", "-i", path_str(&f)]);
    assert_eq!(script.code, 0, "{}", script.stderr);
    let full = perfaux(&["script", "--call-trace", "-i", path_str(&f)]);
    assert_eq!(full.code, 0, "{}", full.stderr);
    // (tid, time, function) of a call-trace line.
    let call = |l: &str| -> (String, String, String) {
        let w: Vec<&str> = l.split_whitespace().collect();
        let n = w.len();
        (w[1].to_string(), w[3].to_string(), w[n - 1].to_string())
    };
    let reference: std::collections::HashSet<_> = full.stdout.lines().map(call).collect();
    let (mut samples, mut shown) = (0, 0);
    let mut sample_tid = String::new();
    for l in script.stdout.lines() {
        if l.contains(" aux: ") {
            samples += 1;
            sample_tid = l.split_whitespace().nth(1).unwrap().to_string();
        } else if let Some(c) = l.strip_prefix("    ") {
            let c = call(c);
            assert!(reference.contains(&c), "{l}: not in the full call trace");
            assert_eq!(c.0, sample_tid, "{l}: not the sample's thread");
            shown += 1;
        }
    }
    assert!(samples >= 5, "{samples} samples with AUX data");
    assert!(
        shown >= samples,
        "{shown} calls shown under {samples} samples"
    );
}

/// `uevent_aux//` payloads are printed by `script` as plain uevents are:
/// recorded beside the plain `uevent` event (BPF-output samples), the two
/// show the same uevents, thread for thread, type and payload alike.
#[test]
fn uevent_aux_payloads_print_as_plain_uevents_do() {
    let dir = tempdir();
    let (f, _) = record(
        dir.path(),
        "ua.data",
        &["-e", "uevent_aux//", "-e", "uevent", "--requests", "4"],
    );
    let r = perfaux(&["script", "-i", path_str(&f)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // (tid, "type payload") of the lines of one event, sorted.
    let of = |event: &str| {
        let mut v: Vec<(String, String)> = r
            .stdout
            .lines()
            .filter_map(|l| {
                let (head, rest) = l.split_once(&format!(" {event}: "))?;
                if rest.starts_with("PERF_RECORD_") {
                    return None;
                }
                Some((
                    head.split_whitespace().nth(1)?.to_string(),
                    rest.to_string(),
                ))
            })
            .collect();
        v.sort();
        v
    };
    let (logged, plain) = (of("uevent_aux//"), of("perfaux:uevent"));
    assert!(plain.len() >= 12, "{} plain uevents", plain.len());
    assert_eq!(logged, plain);
}

/// The end of a snapshot and a stop because the AUX area filled
/// (PERF_AUX_FLAG_TRUNCATED) print as themselves, not as an aux_pause:
/// neither recording pauses, so no `(paused)` line may appear.
#[test]
fn snapshot_end_and_truncated_stop_are_not_pauses() {
    let dir = tempdir();
    let tr_ends = |f: &std::path::Path| -> Vec<(String, String)> {
        let r = perfaux(&["script", "--call-trace", "-i", path_str(f)]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.stdout
            .lines()
            .filter_map(|l| {
                let (_, why) = l.split_once(": tr end   ")?;
                Some((l.split_whitespace().nth(1)?.to_string(), why.to_string()))
            })
            .collect()
    };
    // -Se: one snapshot per thread at exit.
    let (f, cap) = record(
        dir.path(),
        "se.data",
        &["-Se", "-e", "swtrace//", "--requests", "3"],
    );
    let ends = tr_ends(&f);
    let snapshots = parse_captured(&cap.stderr).snapshots;
    assert!(snapshots >= 1);
    assert!(!ends.is_empty(), "no end of snapshot printed");
    for (tid, why) in &ends {
        assert_eq!(why, "(snapshot end)", "thread {tid}");
    }
    // A full trace into an 8 KiB area that fills: each PERF_RECORD_AUX
    // flagged T ends its thread's trace with `(truncated)`. The area must fill
    // on every traced thread (a thread whose trace the recorder drained in time
    // ends when the recording stops it, which is not this test's case): a run
    // where one did not is recorded again with more requests.
    // The tid of each line `what` takes, sorted.
    let tids_of = |text: &str, what: &dyn Fn(&str) -> bool| -> Vec<String> {
        let mut v: Vec<String> = text
            .lines()
            .filter(|l| what(l))
            .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    let mut requests = 300;
    let (f, truncated) = loop {
        let (f, _) = record(
            dir.path(),
            "tr.data",
            &["-m", ",8K", "--requests", &requests.to_string()],
        );
        let plain = perfaux(&["script", "-i", path_str(&f)]);
        let truncated = tids_of(&plain.stdout, &|l| {
            l.contains("PERF_RECORD_AUX") && l.ends_with("[T]")
        });
        let mut traced = tids_of(&plain.stdout, &|l| l.contains("PERF_RECORD_ITRACE_START"));
        traced.dedup();
        assert!(!traced.is_empty(), "no traced thread:\n{}", plain.stdout);
        let mut filled = truncated.clone();
        filled.dedup();
        if filled == traced || requests >= 300 * 64 {
            break (f, truncated);
        }
        requests *= 4;
    };
    assert!(!truncated.is_empty(), "the 8 KiB area never filled");
    // The trace resumes once the recorder has made room (the writer's restart after a
    // TRUNCATED end): a thread whose area was still full at its end ends `(truncated)`; one
    // whose trace resumed says the gap (`lost N probe events (AUX area full)`) and ends as the
    // recording stops it, `(stopped)`. Never `(paused)`.
    let mut ends = tr_ends(&f);
    assert!(
        ends.iter()
            .all(|(_, why)| why == "(truncated)" || why == "(stopped)"),
        "{ends:?}"
    );
    let calls = perfaux(&["script", "--call-trace", "-i", path_str(&f)]).stdout;
    let said_gap = tids_of(&calls, &|l| l.contains("probe events (AUX area full)"));
    for tid in &truncated {
        let ended_truncated = ends.iter().any(|(t, why)| t == tid && why == "(truncated)");
        assert!(
            ended_truncated || said_gap.contains(tid),
            "thread {tid}: a TRUNCATED record, but neither a truncated end nor a gap said:\n{calls}"
        );
    }
    ends.sort();
    let mut ended: Vec<String> = ends.into_iter().map(|e| e.0).collect();
    ended.dedup();
    let mut filled = truncated.clone();
    filled.dedup();
    assert_eq!(ended, filled, "one end per traced thread");
}

/// A recording with no aux-action pauses nothing: the recorder's stop of each thread's trace
/// event at the end (a stop from another thread, which the swtrace PMU carries out in the
/// traced thread's signal handler) ends the trace as a stop, `(stopped)`, and the report
/// counts no pause window. (It was written as a pause: every thread ended `(paused)` and the
/// report said "windows: 3".)
#[test]
fn the_recordings_final_stop_is_a_stop_not_a_pause() {
    let dir = tempdir();
    let (f, _) = record(dir.path(), "plain.data", &["--requests", "20"]);
    let trace = perfaux(&["script", "--call-trace", "-i", path_str(&f)]);
    assert_eq!(trace.code, 0, "{}", trace.stderr);
    let ends: Vec<&str> = trace
        .stdout
        .lines()
        .filter(|l| l.contains(": tr end"))
        .collect();
    assert!(!ends.is_empty(), "no trace end in:\n{}", trace.stdout);
    assert!(
        ends.iter().all(|l| l.ends_with("tr end   (stopped)")),
        "{ends:?}"
    );
    let report = perfaux(&["report", "-i", path_str(&f)]);
    assert_eq!(report.code, 0, "{}", report.stderr);
    assert!(
        !report.stdout.contains("# pause/resume"),
        "a pause/resume section in:\n{}",
        report.stdout
    );
}
