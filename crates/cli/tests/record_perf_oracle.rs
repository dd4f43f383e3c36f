//! Every mode of `perfaux record` writes a file that Linux perf 6.1 reads:
//! `perf report -D` and `perf script` exit 0 with nothing on stderr, and
//! the record counts perf prints (its "Aggregated stats" table) equal
//! perfaux's own (its `report -D` table and record's summary line).
//! The rules are docs/PERF-COMPAT.md's; the modes are the README's:
//! full trace, snapshot (-S with SIGUSR2, -Se), AUX sample, pause/resume
//! via aux-action, uevents.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

/// perf and perfaux agree on the file; returns perfaux's dump text.
fn judged_by_perf(file: &Path, cap: Captured) -> String {
    let home = tempdir();
    let f = path_str(file);
    let d = perf(&["report", "-D", "-i", f], home.path());
    assert_eq!(d.code, 0, "perf report -D failed: {}", d.stderr);
    assert_eq!(d.stderr.trim(), "", "perf report -D warned about {f}");
    let s = perf(&["script", "-i", f], home.path());
    assert_eq!(s.code, 0, "perf script failed: {}", s.stderr);
    assert_eq!(s.stderr.trim(), "", "perf script warned about {f}");
    let ours = perfaux(&["report", "-D", "-i", f]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let (theirs_rows, our_rows) = (stats_rows(&d.stdout), stats_rows(&ours.stdout));
    assert_eq!(theirs_rows, our_rows, "Aggregated stats differ");
    assert_eq!(
        theirs_rows[0],
        ("TOTAL".to_string(), cap.records),
        "record's summary counts"
    );
    // Same records at the same offsets with the same sizes and names.
    let lines = record_lines(&d.stdout);
    assert_eq!(
        lines.len() as u64,
        cap.records,
        "one PERF_RECORD line per record"
    );
    assert_eq!(lines, record_lines(&ours.stdout));
    // Beyond offsets: every line perf prints (record headers, fields, the
    // thread and dso lines, the stats) is perfaux's too, in perf's words;
    // perfaux adds only its hex views of AUX data and its trace section.
    assert_eq!(
        comparable(&d.stdout),
        comparable(&ours.stdout),
        "dump lines differ from perf's"
    );
    let sc = perfaux(&["script", "-i", f]);
    assert_eq!(sc.code, 0, "{}", sc.stderr);
    ours.stdout
}

/// The lines of a dump that perf prints too, sorted (perf orders records
/// by time, perfaux by file offset).
fn comparable(text: &str) -> Vec<String> {
    const OURS_ONLY: [&str; 7] = [
        ". ... AUX sample: ",
        ". ... uevent type: ",
        ". ... raw sample: ",
        "perfaux trace section at ",
        "trace event id: ",
        "snapshot event id: ",
        "uevent-log event id: ",
    ];
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| {
            !l.is_empty() && !l.starts_with(".  ") && !OURS_ONLY.iter().any(|p| l.starts_with(p))
        })
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

fn count(rows: &[(String, u64)], name: &str) -> u64 {
    rows.iter().find(|(n, _)| n == name).map_or(0, |r| r.1)
}

#[test]
fn full_trace_default_loses_nothing() {
    require_oracle!("perf");
    let dir = tempdir();
    let (f, r) = record(dir.path(), "full.data", &[]);
    let cap = parse_captured(&r.stderr);
    assert!(
        r.stderr.contains("[ perfaux record: Woken up "),
        "{}",
        r.stderr
    );
    // Default settings lose no record on the workload (BENCHMARKS: records lost).
    assert_eq!(cap.lost, 0, "{}", r.stderr);
    assert!(cap.aux_bytes > 0);
    let dump = judged_by_perf(&f, cap);
    let rows = stats_rows(&dump);
    // One ITRACE_START per traced thread (three workers), AUX records for the data.
    assert_eq!(count(&rows, "ITRACE_START"), 3);
    assert!(count(&rows, "AUX") >= 3);
    assert_eq!(count(&rows, "LOST"), 0);
    assert!(dump.contains("perfaux trace section"));
    // No trace lost either: every request of every worker (200 by
    // default) is in the decoded call trace, each with its FIB_N tree.
    let ct = perfaux(&["script", "--call-trace", "-i", path_str(&f)]);
    assert_eq!(ct.code, 0, "{}", ct.stderr);
    let calls = |name: &str| {
        ct.stdout
            .lines()
            .filter(|l| l.trim_end().ends_with(&format!(" {name}")))
            .count()
    };
    assert_eq!(calls("serve_request"), 3 * 200);
    assert_eq!(calls("send_response"), 3 * 200);
    assert_eq!(
        calls("fib"),
        3 * 200 * 41,
        "2 * fib(8) - 1 calls of fib per request"
    );
    assert!(
        !ct.stdout.contains("lost"),
        "the writer reported lost probe events"
    );
}

#[test]
fn uevents_probe_counts_and_task_clock() {
    require_oracle!("perf");
    let dir = tempdir();
    let (f, r) = record(
        dir.path(),
        "ue.data",
        &[
            "--requests",
            "20",
            "-e",
            "uevent",
            "-e",
            "uevent:request_done",
            "-e",
            "probe:rebuild_cache",
            "-e",
            "task-clock",
        ],
    );
    let cap = parse_captured(&r.stderr);
    let dump = judged_by_perf(&f, cap);
    // 3 workers x 20 requests: start and done for each, and the slow path of request 0.
    let uevents = dump.matches(". ... uevent type: ").count();
    assert_eq!(uevents, 3 * (20 * 2 + 1));
    assert!(dump.contains("probe:rebuild_cache stats:"));
    assert!(dump.contains("uevent:request_done stats:"));
}

#[test]
fn snapshot_at_exit() {
    require_oracle!("perf");
    let dir = tempdir();
    let (f, r) = record(dir.path(), "se.data", &["-Se", "--requests", "50"]);
    let cap = parse_captured(&r.stderr);
    assert_eq!(cap.snapshots, 1, "{}", r.stderr);
    assert!(cap.aux_bytes > 0);
    let dump = judged_by_perf(&f, cap);
    assert!(dump.contains("\nsnapshot event id: "));
}

#[test]
fn snapshot_on_sigusr2() {
    require_oracle!("perf");
    let dir = tempdir();
    let out = dir.path().join("s.data");
    let mut child = Command::new(PERFAUX)
        .args([
            "-v",
            "record",
            "-S",
            "--requests",
            "4000",
            "-o",
            path_str(&out),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let mut all = String::new();
    loop {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "record ended before it started: {all}"
        );
        all += &line;
        if line.contains("recording started") {
            break;
        }
    }
    let pid = child.id() as libc::pid_t;
    let reader = std::thread::spawn(move || {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
        rest
    });
    // Ask for snapshots until the recording ends, as a user's script would.
    while child.try_wait().unwrap().is_none() {
        // SAFETY: kill() has no memory effects; pid is our live child.
        unsafe { libc::kill(pid, libc::SIGUSR2) };
        std::thread::sleep(Duration::from_millis(3));
    }
    assert!(child.wait().unwrap().success());
    all += &reader.join().unwrap();
    let cap = parse_captured(&all);
    assert!(cap.snapshots >= 1, "{all}");
    judged_by_perf(&out, cap);
}

#[test]
fn aux_sample() {
    require_oracle!("perf");
    let dir = tempdir();
    let (f, r) = record(
        dir.path(),
        "as.data",
        &["--aux-sample=512", "--requests", "20"],
    );
    let cap = parse_captured(&r.stderr);
    let dump = judged_by_perf(&f, cap);
    // Every request_done sample carries an AUX sample of at most 512 bytes.
    let sizes: Vec<u64> = dump
        .lines()
        .filter_map(|l| l.strip_prefix(". ... AUX sample: size "))
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(sizes.len(), 3 * 20, "one per request_done uevent");
    assert!(sizes.iter().all(|&s| s <= 512 && s % 8 == 0), "{sizes:?}");
    assert!(sizes.iter().any(|&s| s > 0));
}

#[test]
fn pause_resume_with_aux_action() {
    require_oracle!("perf");
    let dir = tempdir();
    let (f, r) = record_windows(dir.path(), "pr.data", "10");
    let cap = parse_captured(&r.stderr);
    assert!(cap.aux_bytes > 0);
    let dump = judged_by_perf(&f, cap);
    let rows = stats_rows(&dump);
    assert_eq!(
        count(&rows, "SAMPLE"),
        3 * 10 * 2,
        "one sample per trigger hit"
    );
}

#[test]
fn uevent_log_aux_pmu() {
    require_oracle!("perf");
    let dir = tempdir();
    let (f, r) = record(
        dir.path(),
        "ua.data",
        &["--requests", "4", "-e", "uevent_aux//"],
    );
    let cap = parse_captured(&r.stderr);
    let dump = judged_by_perf(&f, cap);
    // The uevent_aux PMU logs seed 002 bodies into its AUX area: the
    // section's chunks hold the `request_start` body of worker 0's first request.
    assert!(
        dump.contains("\nuevent-log event id: "),
        "{}",
        &dump[dump.len().saturating_sub(3000)..]
    );
    assert!(
        dump.contains(
            ".  0000:  01 00 00 00 0e 00 00 00 77 6f 72 6b 65 72 3d 30  ........worker=0"
        )
    );
}

/// perf's sampler options on record (issue 22 item 20): `-g -F 999 -e task-clock` records
/// the clock at 999 Hz with call chains (perf reads the attr's freq and sample_type, and
/// every sample's chain holds the function it sampled in and its callers);
/// `--call-graph dwarf -c 7 -e probe:compute` samples every seventh call with its chain.
#[test]
fn dash_g_dash_f_and_dash_c_set_the_samplers() {
    require_oracle!("perf");
    let dir = tempdir();
    let (f, r) = record(
        dir.path(),
        "g.data",
        &[
            "-g",
            "-F",
            "999",
            "-e",
            "swtrace//",
            "-e",
            "task-clock",
            "--requests",
            "3000",
        ],
    );
    let cap = parse_captured(&r.stderr);
    judged_by_perf(&f, cap);
    let ev = perf(&["evlist", "-v", "-i", path_str(&f)], dir.path());
    let clock = ev
        .stdout
        .lines()
        .find(|l| l.starts_with("task-clock"))
        .unwrap_or_else(|| panic!("{}", ev.stdout));
    assert!(clock.contains("sample_freq }: 999"), "{clock}");
    assert!(clock.contains("freq: 1"), "{clock}");
    assert!(clock.contains("CALLCHAIN"), "{clock}");
    let s = perf(
        &["script", "-F", "event,ip,sym", "-i", path_str(&f)],
        dir.path(),
    );
    assert!(s.ok(), "{}", s.stderr);
    let deep = s
        .stdout
        .split("\n\n")
        .filter(|b| b.contains("task-clock"))
        .filter(|b| b.lines().count() >= 3)
        .count();
    assert!(deep > 0, "no task-clock sample with a chain:\n{}", s.stdout);

    let (f, _) = record(
        dir.path(),
        "c.data",
        &[
            "--call-graph",
            "dwarf",
            "-c",
            "7",
            "-e",
            "{swtrace//,probe:compute}",
            "--requests",
            "70",
        ],
    );
    let ev = perf(&["evlist", "-v", "-i", path_str(&f)], dir.path());
    let probe = ev
        .stdout
        .lines()
        .find(|l| l.starts_with("probe:compute"))
        .unwrap_or_else(|| panic!("{}", ev.stdout));
    assert!(probe.contains("sample_freq }: 7"), "{probe}");
    assert!(!probe.contains(" freq: 1"), "{probe}");
    assert!(probe.contains("CALLCHAIN"), "{probe}");
    let s = perf(
        &["script", "-F", "event,ip,sym", "-i", path_str(&f)],
        dir.path(),
    );
    let samples: Vec<&str> = s
        .stdout
        .split("\n\n")
        .filter(|b| b.contains("probe:compute"))
        .collect();
    assert!(!samples.is_empty(), "{}", s.stdout);
    assert!(
        samples
            .iter()
            .all(|b| b.lines().any(|l| l.contains("serve_request"))),
        "every chain holds compute's caller:\n{}",
        s.stdout
    );
}
