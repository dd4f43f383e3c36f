//! Why `perfaux record -o -` refuses an event with an AUX area: perfaux's
//! trace is feature section 250, and the pipe-mode form of a feature
//! section, PERF_RECORD_HEADER_FEATURE records after the data, stops perf
//! 6.1's `report`, whose `perf_event__process_feature` refuses a feature id
//! it does not know ("wrong feature ID", "failed to process type: 80").
//! `perf script` skips it. docs/PERF-COMPAT.md, "Pipe mode and the trace".
//! If a later perf reads on, this test fails and the refusal can go.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::*;
use perfaux_abi::Endianness;
use perfaux_abi::user::HeaderFeatureRecord;
use perfaux_perfdata::trace_section::PERFAUX_FEATURE_BIT;

/// `perf ARGS -i -` fed `input` through a real pipe (perf misreads a
/// regular file on stdin, PERF-COMPAT.md).
fn perf_on_pipe(args: &[&str], input: &[u8]) -> Run {
    let home = tempdir();
    let mut child = Command::new("perf")
        .args(args)
        .args(["-i", "-"])
        .env("HOME", home.path())
        .env("PAGER", "cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn perf");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let o = child.wait_with_output().expect("perf");
    feeder.join().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

#[test]
fn perf_report_stops_at_a_pipes_trace_feature_records() {
    perfaux_testutil::require_oracle!("perf");
    // The stream's bytes (binary: not through `Run`'s text).
    let o = Command::new(PERFAUX)
        .args(["record", "-e", "uevent", "--requests", "5", "-o", "-"])
        .output()
        .expect("perfaux");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plain = o.stdout;
    // The trace as it would stream: feature 250 after the data, in
    // records under the 64 KiB record size.
    let mut with_trace = plain.clone();
    let chunk = vec![0x5au8; 32 * 1024];
    for _ in 0..3 {
        HeaderFeatureRecord {
            feat_id: u64::from(PERFAUX_FEATURE_BIT),
            data: &chunk,
        }
        .write(&mut with_trace, Endianness::NATIVE)
        .unwrap();
    }
    let before = perf_on_pipe(&["report", "-D"], &plain);
    assert!(
        before.stdout.contains("Aggregated stats"),
        "perf report -D reads the stream without the trace: {}",
        before.stderr
    );
    let after = perf_on_pipe(&["report", "-D"], &with_trace);
    assert!(
        after.stderr.contains("wrong feature ID: 250")
            && after.stderr.contains("failed to process type: 80"),
        "perf report -D on feature 250 records: {}",
        after.stderr
    );
    assert!(
        !after.stdout.contains("Aggregated stats"),
        "perf report -D stopped before its summary"
    );
    // And perfaux says so, naming the way out.
    let refused = perfaux(&["record", "-o", "-"]);
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("perf report") && refused.stderr.contains("-o FILE"),
        "{}",
        refused.stderr
    );
}
