//! `perfaux record -- ./rustprog`: a Rust program instrumented with perfaux-swtrace's probe
//! macros (crates/swtrace/examples/traced_program.rs) is traced as a C program with compiler
//! hooks is: its probes go to the preload runtime (perfaux_swtrace::forward), each thread into
//! its own ring, and every call is in the file under its function's name.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use common::*;

/// Builds perfaux-swtrace's traced_program example; returns its path.
fn traced_program() -> PathBuf {
    let st = Command::new(env!("CARGO"))
        .args([
            "build",
            "-q",
            "-p",
            "perfaux-swtrace",
            "--example",
            "traced_program",
        ])
        .status()
        .expect("cargo");
    assert!(
        st.success(),
        "building perfaux-swtrace's traced_program example"
    );
    // target/<profile>/deps/<test> -> target/<profile>/examples
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/traced_program")
}

/// The program's own count of each function's calls ("calls NAME N" lines).
fn printed_counts(stdout: &str) -> BTreeMap<String, u64> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("calls "))
        .map(|l| {
            let (name, n) = l.split_once(' ').unwrap();
            (format!("traced_program::{name}"), n.parse().unwrap())
        })
        .collect()
}

#[test]
fn a_rust_programs_probe_macros_are_traced_with_every_call_named() {
    let prog = traced_program();
    let plain = Command::new(&prog).arg("14").output().unwrap();
    assert!(plain.status.success());
    let want = printed_counts(&String::from_utf8_lossy(&plain.stdout));
    assert_eq!(want.len(), 3, "{want:?}");
    let dir = tempdir();
    let data = dir.path().join("rust.data");
    let rec = Command::new(PERFAUX)
        .args(["record", "-o", path_str(&data), "--"])
        .arg(&prog)
        .arg("14")
        .output()
        .unwrap();
    assert!(
        rec.status.success(),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    // The program behaves as it does alone.
    assert_eq!(printed_counts(&String::from_utf8_lossy(&rec.stdout)), want);
    let ct = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert_eq!(ct.code, 0, "{}", ct.stderr);
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    let mut tids = std::collections::BTreeSet::new();
    for l in ct.stdout.lines() {
        let name = l.split_whitespace().last().unwrap_or("");
        if name.starts_with("traced_program::") {
            *got.entry(name.to_string()).or_insert(0) += 1;
            tids.insert(l.split_whitespace().nth(1).unwrap().to_string());
        }
    }
    assert_eq!(got, want, "calls in the trace against the program's count");
    // main and the two workers, each in its own ring.
    assert_eq!(tids.len(), 3, "{tids:?}");
    // The nesting is kept: leaf under fib under fib.
    assert!(
        ct.stdout
            .lines()
            .any(|l| l.ends_with("        traced_program::leaf")),
        "{}",
        ct.stdout
    );
    // perf 6.1 reads the file without a warning.
    if perfaux_testutil::oracle("perf") {
        let home = tempdir();
        for args in [&["report", "-D", "-i"][..], &["script", "-i"]] {
            let mut a = args.to_vec();
            a.push(path_str(&data));
            let r = perf(&a, home.path());
            assert_eq!(r.code, 0, "perf {args:?} failed: {}", r.stderr);
            assert_eq!(r.stderr.trim(), "", "perf {args:?} warned");
        }
    }
}
