//! Issue 22's view items ("every number true, every loss said") on programs the tests build:
//! a recursive function's total (uftrace's rule), calls with no return, uevent names, filters
//! and sort keys that match nothing, uftrace replay's layout of the call trace.

mod calls;
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use calls::*;

/// A recursive program: main -> compute -> fib -> fib -> ... (compute is no tail call, so
/// every hook sees its frame around fib's).
const FIB_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__attribute__((noinline)) int compute(int n) { return fib(n) + 1; }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20;
    printf("%d\n", compute(n));
    return 0;
}
"#;

/// `source` compiled by gcc with `flags` into `dir/name`.
fn build_source(dir: &Path, source: &str, flags: &[&str], name: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let st = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .expect("gcc");
    assert!(st.success(), "gcc {flags:?} failed");
    out
}

fn perfaux_on(args: &[&str], data: &Path) -> Output {
    Command::new(PERFAUX)
        .args(args)
        .arg("-i")
        .arg(data)
        .output()
        .expect("perfaux")
}

fn stdout_of(args: &[&str], data: &Path) -> String {
    let out = perfaux_on(args, data);
    assert!(
        out.status.success(),
        "perfaux {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A time as the report prints it (`2.603 ms`) in ns.
fn ns(value: &str, unit: &str) -> f64 {
    let v: f64 = value.parse().unwrap_or_else(|_| panic!("time {value:?}"));
    v * match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        u => panic!("unit {u:?}"),
    }
}

/// The report's total time per function.
fn report_totals(data: &Path) -> BTreeMap<String, f64> {
    report_rows(data)
        .into_iter()
        .map(|f| (f[11].clone(), ns(&f[0], &f[1])))
        .collect()
}

#[test]
fn a_recursive_functions_total_stays_within_its_callers_and_counts_equal_uftraces() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_source(dir.path(), FIB_C, &["-O2", "-pg"], "fib_pg");
    let (out, data) = record(dir.path(), &prog, &["22"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = uftrace_counts(dir.path(), &prog, &["22"]);
    assert_eq!(theirs.get("fib"), Some(&28657), "{theirs:?}");
    assert_eq!(
        report_counts(&data),
        theirs,
        "perfaux report against uftrace report"
    );
    let totals = report_totals(&data);
    let (fib, compute, main) = (totals["fib"], totals["compute"], totals["main"]);
    assert!(
        fib <= compute && compute <= main,
        "a callee's total above its caller's: {totals:?}"
    );
}

#[test]
fn calls_whose_return_is_not_in_the_trace_are_said_unfinished_not_zero() {
    // serve_request resumes the trace inside itself and send_response pauses it: no
    // serve_request returns in the trace.
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = common::record_windows(dir.path(), "pause.data", "20");
    let text = stdout_of(&["report", "--stdio"], &data);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("===="))
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .take_while(|f| f.len() == 12)
        .collect();
    let serve = rows
        .iter()
        .find(|f| f[11] == "serve_request")
        .unwrap_or_else(|| panic!("no serve_request row:\n{text}"));
    assert_eq!(serve[4], "60", "{text}");
    for f in &rows {
        assert!(
            !(f[0] == "0" && f[1] == "ns"),
            "a function's calls shown as taking 0 ns: {f:?}\n{text}"
        );
    }
    assert_eq!(&serve[0..2], ["no", "return"], "{text}");
    let unfinished: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("# unfinished calls"))
        .skip(3)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(
        unfinished
            .iter()
            .any(|l| l.split_whitespace().eq(["60", "serve_request"])),
        "{text}"
    );
}

#[test]
fn a_filter_that_matches_nothing_and_a_sort_key_of_no_table_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = common::record(dir.path(), "w.data", &["--requests", "5"]);
    let data = data.as_path();
    for args in [
        &["report", "--tid", "999999"][..],
        &["report", "--comm", "nosuch"][..],
    ] {
        let out = perfaux_on(args, data);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?} printed a report");
        assert!(
            err.contains(&format!("{} {} matches no thread", args[1], args[2]))
                && err.contains("perfaux-worker0"),
            "{args:?}: {err}"
        );
    }
    let json = dir.path().join("t.json");
    let out = Command::new(PERFAUX)
        .args(["export", "-F", "chrome", "--tid", "999999", "-o"])
        .arg(&json)
        .arg("-i")
        .arg(data)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(err.contains("--tid 999999 matches no thread"), "{err}");
    assert!(
        !json.exists(),
        "export left a file for a filter that matched nothing"
    );
    // A sample key on a recording with no samples.
    let out = perfaux_on(&["report", "-s", "sym"], data);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        err.contains("'sym'") && err.contains("total,self,call,avg,min,max,func"),
        "{err}"
    );
    // The trace keys work: sorted by calls.
    let text = stdout_of(&["report", "-s", "call"], data);
    let calls: Vec<u64> = text
        .lines()
        .skip_while(|l| !l.contains("===="))
        .skip(1)
        .take_while(|l| l.split_whitespace().count() == 12)
        .map(|l| l.split_whitespace().nth(4).unwrap().parse().unwrap())
        .collect();
    assert!(
        calls.len() > 3 && calls.is_sorted_by(|a, b| a >= b),
        "{text}"
    );
}

/// uevents of types 1, 2 and 3 from a program that names none of them.
const UEVENTS_C: &str = r#"
#include <stdio.h>
#include "perfaux.h"
__attribute__((noinline)) int step(int i) { return i * 3; }
int main(void) {
    for (int i = 0; i < 3; i++) {
        step(i);
        for (unsigned ty = 1; ty <= 3; ty++)
            if (perfaux_uevent(ty, "x", 1) != 0) return 10;
    }
    return 0;
}
"#;

#[test]
fn uevent_names_come_from_the_recording_only() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include");
    let include = format!("-I{}", include.display());
    let prog = build_source(
        dir.path(),
        UEVENTS_C,
        &["-O1", "-finstrument-functions", &include],
        "uev123",
    );
    let (out, data) = record(dir.path(), &prog, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let builtin = ["request_start", "request_done", "slow_path"];
    let report = stdout_of(&["report", "--stdio"], &data);
    let rows: Vec<Vec<&str>> = report
        .lines()
        .skip_while(|l| !l.starts_with("# uevents"))
        .skip(3)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [vec!["3", "1"], vec!["3", "2"], vec!["3", "3"]],
        "{report}"
    );
    let script = stdout_of(&["script"], &data);
    assert_eq!(
        script.matches("perfaux:uevent: type 2 ").count(),
        3,
        "{script}"
    );
    let json = dir.path().join("t.json");
    let out = Command::new(PERFAUX)
        .args(["export", "-F", "chrome", "-o"])
        .arg(&json)
        .arg("-i")
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chrome = std::fs::read_to_string(&json).unwrap();
    assert!(
        chrome.contains("uevent 1"),
        "no numbered uevent in the Chrome JSON"
    );
    for text in [&report, &script, &chrome] {
        for name in builtin {
            assert!(
                !text.contains(name),
                "the built-in workload's {name}: {text}"
            );
        }
    }
    // The built-in workload's recording carries its names, and the views read them there.
    let (w, _) = common::record(dir.path(), "w.data", &["--requests", "2"]);
    let report = stdout_of(&["report", "--stdio"], &w);
    for (ty, name) in [(1, "request_start"), (2, "request_done"), (3, "slow_path")] {
        assert!(
            report
                .lines()
                .any(|l| l.trim_end().ends_with(&format!(" {ty} {name}"))),
            "{report}"
        );
    }
}

/// The function column of replay lines (after `| `), header and blank lines left out.
fn replay_functions(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            l.split_once("| ")
                .unwrap_or_else(|| panic!("no function column in {l:?}"))
                .1
                .to_owned()
        })
        .collect()
}

#[test]
fn replay_layout_matches_uftrace_replay_and_the_default_stays() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_source(dir.path(), FIB_C, &["-O2", "-pg"], "fib_replay");
    let (out, data) = record(dir.path(), &prog, &["6"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = stdout_of(&["script", "--call-trace", "--replay"], &data);
    assert_eq!(ours.lines().next(), Some("# DURATION     TID     FUNCTION"));
    let u = dir.path().join("uftrace.data");
    let rec = Command::new("uftrace")
        .args(["record", "--no-libcall", "-d"])
        .arg(&u)
        .arg(&prog)
        .arg("6")
        .output()
        .unwrap();
    assert!(
        rec.status.success(),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    let theirs = Command::new("uftrace")
        .args(["replay", "-d"])
        .arg(&u)
        .output()
        .unwrap();
    let theirs = String::from_utf8_lossy(&theirs.stdout);
    // perfaux's trace markers (`/* tr end   (stopped) */`) are comments uftrace has not.
    let calls: Vec<String> = replay_functions(&ours)
        .into_iter()
        .filter(|f| !f.starts_with("/* "))
        .collect();
    assert!(ours.contains("| /* tr end   (stopped) */"), "{ours}");
    assert_eq!(calls, replay_functions(&theirs), "{ours}");
    // Every line's duration column: blank for an entry, a time for a return or a leaf.
    for l in ours.lines().skip(1).filter(|l| !l.contains("| /* ")) {
        let (dur, rest) = l.split_at(11);
        let func = rest.split_once("| ").unwrap().1.trim_start();
        if func.ends_with(" {") {
            assert!(dur.trim().is_empty(), "{l}");
        } else {
            let f: Vec<&str> = dur.split_whitespace().collect();
            assert!(f.len() == 2 && f[0].parse::<f64>().is_ok(), "{l}");
        }
    }
    // The default layout is perf's, entries only.
    let perf = stdout_of(&["script", "--call-trace"], &data);
    assert_eq!(
        perf.lines().count(),
        calls
            .iter()
            .filter(|f| !f.trim_start().starts_with('}'))
            .count()
            + 1
    );
    assert!(!perf.contains(" | "), "{perf}");
}

/// The Perfetto export of `data` (its bytes).
fn perfetto_of(dir: &Path, data: &Path) -> Vec<u8> {
    let out = dir.join(format!(
        "{}.perfetto-trace",
        data.file_name().unwrap().to_string_lossy()
    ));
    let r = Command::new(PERFAUX)
        .args(["export", "-F", "perfetto", "-o"])
        .arg(&out)
        .arg("-i")
        .arg(data)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    std::fs::read(&out).unwrap()
}

#[test]
fn a_plain_full_trace_has_no_pause_resume_tracks_in_perfetto() {
    let dir = tempfile::tempdir().unwrap();
    let has_pause_track = |bytes: &[u8]| bytes.windows(12).any(|w| w == b"pause/resume");
    let (plain, _) = common::record(dir.path(), "plain.data", &["--requests", "5"]);
    let bytes = perfetto_of(dir.path(), &plain);
    assert!(
        bytes.windows(13).any(|w| w == b"trace stopped"),
        "the trace's stops are still said"
    );
    assert!(
        !has_pause_track(&bytes),
        "a pause/resume track in a trace that never paused"
    );
    let (paused, _) = common::record_windows(dir.path(), "paused.data", "5");
    assert!(
        has_pause_track(&perfetto_of(dir.path(), &paused)),
        "the pause/resume track of a paused trace"
    );
}

/// The number after `what` on the line of `text` that has it, or before it (`N what`).
fn number_near(text: &str, what: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.contains(what))?;
    let (before, after) = line.split_once(what)?;
    after
        .trim_start_matches([':', ' '])
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .or_else(|| before.split_whitespace().last()?.parse().ok())
}

/// What record and report both say is the same number in the same words: a start-paused
/// trace's first resume is no dropped request (report said 3 where record said 0), and the
/// transactions a full AUX area cut short are counted alike, each loss with why.
#[test]
fn record_and_report_say_the_same_numbers_in_the_same_words() {
    let dir = tempfile::tempdir().unwrap();
    let (f, run) = common::record_windows(dir.path(), "pr.data", "200");
    let recorded = number_near(&run.stderr, "dropped pause/resume").expect("record's count");
    let report = stdout_of(&["report"], &f);
    if let Some(reported) = number_near(&report, "dropped pause/resume") {
        assert_eq!(reported, recorded, "{report}");
    }
    let chrome = dir.path().join("pr.json");
    stdout_of(
        &["export", "-F", "chrome", "-o", chrome.to_str().unwrap()],
        &f,
    );
    let json = std::fs::read_to_string(&chrome).unwrap();
    assert_eq!(
        recorded == 0,
        !json.contains("dropped resume") && !json.contains("dropped pause"),
        "record dropped {recorded}; the export's markers disagree"
    );
    let (f, run) = common::record(dir.path(), "tr.data", &["-m", ",8K", "--requests", "300"]);
    let what = "trace transactions cut short (PERF_AUX_FLAG_TRUNCATED)";
    let recorded = number_near(&run.stderr, what).expect("record says the cut transactions");
    let report = stdout_of(&["report"], &f);
    assert_eq!(number_near(&report, what), Some(recorded), "{report}");
    let why = "the AUX area was full (-m ,N enlarges it)";
    assert!(report.contains(why) && run.stderr.contains(why), "{report}");
}
