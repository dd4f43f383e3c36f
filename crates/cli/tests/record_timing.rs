//! `swtrace/timing=.../`: a recording in each cheaper timing mode decodes
//! into the same calls as full timing for the same deterministic workload,
//! its interpolated times are marked (`~sec.nsec:`), and perf 6.1 still
//! reads the file.

mod common;

use std::collections::BTreeMap;

use common::*;

/// The `--call-trace` lines per thread name, without pid and time, and how
/// many times were interpolated.
fn calls_by_thread(text: &str) -> (BTreeMap<String, Vec<String>>, usize) {
    let mut calls: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut interpolated = 0;
    for line in text.lines() {
        // " comm  tid [cpu] [~]sec.nsec: <indent>name"
        let (head, call) = line.split_once(": ").expect("a call-trace line");
        let time = head.split_whitespace().last().expect("a time");
        interpolated += usize::from(time.starts_with('~'));
        let comm = head.split_whitespace().next().expect("a comm").to_string();
        calls.entry(comm).or_default().push(call.to_string());
    }
    (calls, interpolated)
}

#[test]
fn every_timing_mode_decodes_the_calls_of_full_timing() {
    let dir = tempdir();
    let trace = |mode: &str| {
        let (file, _) = record(
            dir.path(),
            &format!("{}.data", mode.replace(':', "-")),
            &["-e", &format!("swtrace/timing={mode}/"), "--requests", "30"],
        );
        let s = perfaux(&["script", "-i", path_str(&file), "--call-trace"]);
        assert_eq!(
            s.code, 0,
            "script --call-trace, timing={mode}: {}",
            s.stderr
        );
        (file, calls_by_thread(&s.stdout))
    };
    let (full_file, (full, full_interpolated)) = trace("full");
    assert_eq!(full_interpolated, 0, "full timing interpolates nothing");
    assert_eq!(full.len(), 3, "three workload threads: {:?}", full.keys());
    assert!(full.values().all(|c| !c.is_empty()));
    let mut files = vec![full_file];
    for mode in ["entry", "periodic:16"] {
        let (file, (calls, interpolated)) = trace(mode);
        assert_eq!(calls, full, "timing={mode} decodes other calls than full");
        let total: usize = calls.values().map(Vec::len).sum();
        if mode == "entry" {
            // Every ENTER is timed, and call-trace prints ENTERs.
            assert_eq!(interpolated, 0, "timing=entry");
        } else {
            // One packet in 16 timed, ENTERs and EXITs alike.
            assert!(
                interpolated > total / 2 && interpolated < total,
                "timing={mode}: {interpolated} of {total} interpolated"
            );
        }
        files.push(file);
    }
    perfaux_testutil::require_oracle!("perf");
    let home = tempdir();
    for f in &files {
        for args in [&["script", "-i"][..], &["report", "-D", "-i"]] {
            let mut a = args.to_vec();
            a.push(path_str(f));
            let r = perf(&a, home.path());
            assert_eq!(r.code, 0, "perf {a:?}: {}", r.stderr);
            assert_eq!(r.stderr.trim(), "", "perf {a:?} warned");
        }
    }
}
