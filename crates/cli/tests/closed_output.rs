//! A reader that closes perfaux's standard output early (`perfaux script | head`) ends the
//! command quietly with success, as perf does; the closed pipe is known by the write's error
//! kind, not by matching its text.

use std::io::Read;
use std::process::{Command, Stdio};

const PERFAUX: &str = env!("CARGO_BIN_EXE_perfaux");

#[test]
fn a_closed_stdout_ends_the_readers_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("r.data");
    let rec = Command::new(PERFAUX)
        .args(["record", "--requests", "2000", "-o"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        rec.status.success(),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    for args in [
        &["script"][..],
        &["script", "--call-trace"],
        &["report", "-D"],
        &["report"],
    ] {
        let mut child = Command::new(PERFAUX)
            .args(args)
            .arg("-i")
            .arg(&data)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 64];
        let mut out = child.stdout.take().unwrap();
        out.read_exact(&mut first).unwrap();
        drop(out);
        let done = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&done.stderr);
        assert!(done.status.success(), "{args:?}: {:?} {err}", done.status);
        assert!(!err.contains("error"), "{args:?}: {err}");
    }
}
