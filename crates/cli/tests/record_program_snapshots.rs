//! `perfaux record -S -- ./prog` snapshotted on SIGUSR2 while the program runs, and again as
//! its thread ends: the snapshots of one thread overlap in its AUX stream, and what they share
//! is shown once; `record` and `report` give the same number of snapshots.

mod calls;
mod common;

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use calls::{PERFAUX, build_c, call_fields, report_counts};

/// The children of process `pid` (of any of its threads).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// (tid, time, function) of every call line of `perfaux script --call-trace`.
fn call_lines(data: &Path) -> Vec<(String, String, String)> {
    call_fields(data)
        .into_iter()
        .map(|f| {
            let time = f
                .iter()
                .find(|w| w.ends_with(':'))
                .unwrap_or_else(|| panic!("time in {f:?}"))
                .clone();
            (f[1].clone(), time, f[f.len() - 1].clone())
        })
        .collect()
}

#[test]
fn overlapping_snapshots_count_each_call_once_and_record_and_report_agree() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(dir.path(), "ticks.c", &["-finstrument-functions"], "ticks");
    let data = dir.path().join("ticks.data");
    let mut rec = Command::new(PERFAUX)
        .current_dir(dir.path())
        .args(["record", "-S", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&prog)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("perfaux record");
    let pid = rec.id();
    // The program runs for 1,000 sleeps of 2 ms and more: the snapshots on SIGUSR2 at 1 s
    // and 1.3 s after it started, and its thread's last one as it ends, all fall in its run
    // whatever the machine's speed.
    while children(pid).is_empty() {
        assert!(rec.try_wait().unwrap().is_none(), "record ended early");
        std::thread::sleep(Duration::from_millis(5));
    }
    for pause in [1000, 300] {
        std::thread::sleep(Duration::from_millis(pause));
        // SAFETY: kill() has no memory effects; `pid` is our unreaped child.
        unsafe { libc::kill(pid as i32, libc::SIGUSR2) };
    }
    let out = rec.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);

    let counts = report_counts(&data);
    let ticks = counts.get("tick").copied().unwrap_or(0);
    assert!(ticks > 0, "no tick in the snapshots: {counts:?}");
    assert!(ticks <= 1000, "tick counted {ticks} times: {counts:?}");

    let lines = call_lines(&data);
    assert!(!lines.is_empty());
    let mut seen = HashSet::new();
    for l in &lines {
        assert!(seen.insert(l), "a call shown twice: {l:?}");
    }

    let recorded = common::parse_captured(&stderr).snapshots;
    let report = Command::new(PERFAUX)
        .args(["report", "--stdio", "-i"])
        .arg(&data)
        .output()
        .expect("perfaux report");
    assert!(report.status.success());
    let text = String::from_utf8_lossy(&report.stdout);
    let reported: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("# snapshots: "))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(recorded >= 2, "two SIGUSR2 and the thread's end: {stderr}");
    assert_eq!(recorded, reported, "record: {stderr}\nreport:\n{text}");
}
