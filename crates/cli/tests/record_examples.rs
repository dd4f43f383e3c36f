//! perfaux-recorder's examples, built and run: the embedded flight
//! recorder writes a perf.data that perf 6.1's `perf script` and
//! `perfaux script --call-trace` both read, its wrapped snapshot flagged
//! PERF_AUX_FLAG_OVERWRITE; the reader example reads it back.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

/// Builds perfaux-recorder's examples; returns their directory.
fn examples() -> PathBuf {
    let st = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "perfaux-recorder", "--examples"])
        .status()
        .expect("cargo");
    assert!(st.success(), "building perfaux-recorder's examples");
    // target/<profile>/deps/<test> -> target/<profile>/examples
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("examples")
}

#[test]
fn the_flight_recorder_example_writes_a_file_perf_and_perfaux_read() {
    let ex = examples();
    let dir = tempdir();
    let out = dir.path().join("flight.data");
    let o = Command::new(ex.join("flight_recorder"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ct = perfaux(&["script", "--call-trace", "-i", path_str(&out)]);
    assert_eq!(ct.code, 0, "{}", ct.stderr);
    let fibs = ct
        .stdout
        .lines()
        .filter(|l| l.trim_end().ends_with(" fib"))
        .count();
    assert!(
        fibs > 100,
        "the snapshot holds the last calls of fib: {}",
        ct.stdout
    );
    let r = Command::new(ex.join("read_perf_data"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let text = String::from_utf8_lossy(&r.stdout);
    // 2000 calls of fib(8) overfill 64 KiB: the snapshot wrapped and says so (flag 0x2; the
    // chunk that begins a snapshot also carries SNAPSHOT_BEGIN).
    let flags = text
        .lines()
        .filter(|l| l.contains("snapshot chunk:"))
        .filter_map(|l| l.split("flags 0x").nth(1))
        .filter_map(|f| u64::from_str_radix(f.trim(), 16).ok())
        .collect::<Vec<_>>();
    assert!(
        !flags.is_empty() && flags.iter().all(|f| f & 0x2 != 0),
        "{text}"
    );
    perfaux_testutil::require_oracle!("perf");
    let home = tempdir();
    for args in [&["script", "-i"][..], &["report", "-D", "-i"]] {
        let mut a = args.to_vec();
        a.push(path_str(&out));
        let p = perf(&a, home.path());
        assert_eq!(p.code, 0, "perf {args:?}: {}", p.stderr);
        assert_eq!(p.stderr.trim(), "", "perf {args:?} warned");
    }
}
